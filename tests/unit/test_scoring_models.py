"""Unit tests of the GNN triple scorers and their helpers (engine/scoring): no database involved."""

from __future__ import annotations

import dataclasses
import math
import statistics
import time

import pytest
import torch

import engine.scoring as scoring
from engine import ConfigError, InputError
from engine.scoring.checkpoint import make_model
from engine.scoring.models.dde import log_scale
from engine.scoring.train import DEFAULT_MODEL_CONFIG
from engine.scoring import (
    DDE,
    DDEMLP,
    QRGAT,
    WITH_CUDA,
    QuestionGraph,
    adaptive_top_p,
    answer_recall_at_k,
    batch_graphs,
    resolve_device,
    shortest_path_labels,
    top_k,
    triple_recall_at_k,
)

from helpers.marks import onlyCUDA


@pytest.fixture(autouse=True)
def one_torch_thread():
    # Tiny graphs: a second intra-op thread only adds synchronisation, and on a busy machine a lot of it.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def random_graph(num_nodes: int = 40, num_edges: int = 120, num_rel: int = 8, dim: int = 16, seed: int = 0,
                 nameless: float = 0.2, labels: bool = False) -> QuestionGraph:
    g = torch.Generator().manual_seed(seed)
    return QuestionGraph(
        num_nodes=num_nodes,
        edge_index=torch.randint(0, num_nodes, (2, num_edges), generator=g),
        edge_rel=torch.randint(0, num_rel, (num_edges,), generator=g),
        node_emb=torch.randn(num_nodes, dim, generator=g),
        has_text=torch.rand(num_nodes, generator=g) >= nameless,
        rel_emb=torch.randn(num_rel, dim, generator=g),
        q_emb=torch.randn(dim, generator=g),
        topic=torch.tensor([0, 1]),
        labels=(torch.rand(num_edges, generator=g) < 0.1).float() if labels else None,
    )


def make_models(dim: int = 16) -> dict[str, torch.nn.Module]:
    torch.manual_seed(0)
    return {"ddemlp": DDEMLP(dim, dropout=0.1), "qrgat": QRGAT(dim, hidden=32, heads=4),
            "ddemlp_walk": DDEMLP(dim, dropout=0.1, dde_gated=True, walk=True),
            "qrgat_walk": QRGAT(dim, hidden=32, heads=4, walk=True, walk_rounds=2)}


MODEL_NAMES = ["ddemlp", "qrgat"]
#: the models above with the question's relation walk (engine.scoring.models.query_walk) as well
ALL_MODELS = MODEL_NAMES + ["ddemlp_walk", "qrgat_walk"]


# -- public surface -------------------------------------------------------------------------------------------


def test_exported_names_are_pinned():
    # The modelling surface; the package also exports the store-backed pipeline (neighbourhood, training...).
    modelling = {
        "QuestionGraph", "BatchedGraphs", "batch_graphs", "TripleScorer", "DDE", "DDEMLP", "QRGAT", "QRGATConv",
        "adaptive_top_p", "top_k", "shortest_path_labels", "bfs_distances", "triple_recall_at_k",
        "relation_path_labels", "path_labels_with_fallback", "QueryGatedDDE", "QueryWalk", "walk_answer_loss",
        "answer_recall_at_k", "resolve_device", "WITH_CUDA",
    }
    assert modelling <= set(scoring.__all__)
    assert len(scoring.__all__) == len(set(scoring.__all__))
    for name in scoring.__all__:
        assert hasattr(scoring, name), name


# -- graph batching -------------------------------------------------------------------------------------------


def test_batch_graphs_offsets_and_compacts_relations():
    graphs = [random_graph(10, 20, seed=1), random_graph(7, 5, seed=2), random_graph(12, 30, seed=3)]
    b = batch_graphs(graphs)
    assert b.num_graphs == 3 and b.num_nodes == 29 and b.num_edges == 55
    assert b.q_emb.shape == (3, 16)
    assert b.edge_ptr.tolist() == [0, 20, 25, 55] and b.node_ptr.tolist() == [0, 10, 17, 29]
    assert b.triple_batch.tolist() == [0] * 20 + [1] * 5 + [2] * 30
    assert b.node_batch.tolist() == [0] * 10 + [1] * 7 + [2] * 12
    # every triple sees its own relation's embedding, and its question owns that relation row
    for i, g in enumerate(graphs):
        sl = slice(b.edge_ptr[i], b.edge_ptr[i + 1])
        assert torch.equal(b.rel_emb[b.edge_rel[sl]], g.rel_emb[g.edge_rel])
        assert torch.equal(b.edge_index[:, sl] - b.node_ptr[i], g.edge_index)
        assert (b.rel_batch[b.edge_rel[sl]] == i).all()
    assert b.is_topic.nonzero().flatten().tolist() == [0, 1, 10, 11, 17, 18]
    assert [t.numel() for t in b.split(torch.arange(55))] == [20, 5, 30]


def test_batch_graphs_rejects_bad_input():
    g = random_graph()
    with pytest.raises(InputError):
        batch_graphs([dataclasses.replace(g, edge_rel=g.edge_rel[:-1])])
    with pytest.raises(InputError):
        batch_graphs([dataclasses.replace(g, topic=torch.tensor([99]))])
    with pytest.raises(InputError):
        batch_graphs([g, random_graph(dim=8)])
    with pytest.raises(InputError):
        batch_graphs([])


# -- DDE ------------------------------------------------------------------------------------------------------


def test_dde_hand_computed_example():
    # Triples (head -> tail): 0->1, 0->2, 1->2, 2->3, 4->3, 3->0; topic = {0}.
    # s0: node 0 = [1,0], nodes 1..4 = [0,1].
    # Forward (mean over in-neighbours = heads of triples into the node):
    #   F1: n0 <- {3}: [0,1]; n1 <- {0}: [1,0]; n2 <- {0,1}: [.5,.5]; n3 <- {2,4}: [0,1]; n4 <- {}: [0,0]
    #   F2: n0 <- F1[3] = [0,1]; n1 <- F1[0] = [0,1]; n2 <- mean(F1[0], F1[1]) = [.5,.5];
    #       n3 <- mean(F1[2], F1[4]) = mean([.5,.5],[0,0]) = [.25,.25]; n4: [0,0]
    # Reverse (mean over out-neighbours = tails of triples out of the node), starting again from s0:
    #   R1: n0 -> {1,2}: [0,1]; n1 -> {2}: [0,1]; n2 -> {3}: [0,1]; n3 -> {0}: [1,0]; n4 -> {3}: [0,1]
    #   R2: n0 -> mean(R1[1], R1[2]) = [0,1]; n1 -> R1[2] = [0,1]; n2 -> R1[3] = [1,0];
    #       n3 -> R1[0] = [0,1]; n4 -> R1[3] = [1,0]
    edge_index = torch.tensor([[0, 0, 1, 2, 4, 3], [1, 2, 2, 3, 3, 0]])
    expected = torch.tensor([
        #  F1          F2           R1        R2
        [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0],
        [1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0],
        [0.5, 0.5, 0.5, 0.5, 0.0, 1.0, 1.0, 0.0],
        [0.0, 1.0, 0.25, 0.25, 1.0, 0.0, 0.0, 1.0],
        [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0],
    ])
    dde = DDE()
    assert dde.out_dim == 8 and not list(dde.parameters())
    assert torch.equal(dde(5, edge_index, torch.tensor([0])), expected)
    # topic as a mask gives the same; include_initial prepends s0
    mask = torch.tensor([True, False, False, False, False])
    assert torch.equal(dde(5, edge_index, mask), expected)
    s0 = torch.tensor([[1.0, 0.0]] + [[0.0, 1.0]] * 4)
    with_initial = DDE(include_initial=True)
    assert with_initial.out_dim == 10
    assert torch.equal(with_initial(5, edge_index, torch.tensor([0])), torch.cat([s0, expected], 1))


def test_dde_mixed_rounds_follow_paths_that_change_direction():
    # topic film 0 -> director 1 <- film 2 -> genre 3 (MetaQA stores film -> x only).
    # F1: n1 <- {0, 2}: [.5, .5]; n3 <- {2}: [0, 1]; films get no message: [0, 0].
    # FR (reverse round over F1, mean over out-neighbours): n0 -> {1}: [.5, .5]; n2 -> {1, 3}: [.25, .75];
    #   n1, n3 have no out-neighbour: [0, 0]. RF (forward over R1; R1: n0 -> {1}: [0, 1], n2 -> {1, 3}: [0, 1]):
    #   n1 <- {0, 2}: [0, 1]; n3 <- {2}: [0, 1]; films: [0, 0].
    edge_index = torch.tensor([[0, 2, 2], [1, 1, 3]])
    plain, mixed = DDE(), DDE(mixed=True)
    assert mixed.mixed_sequences() == ["fr", "rf"] and mixed.out_dim == plain.out_dim + 4
    out = mixed(4, edge_index, torch.tensor([0]))
    assert torch.equal(out[:, :8], plain(4, edge_index, torch.tensor([0])))  # the paper's features come first
    fr = torch.tensor([[0.5, 0.5], [0.0, 0.0], [0.25, 0.75], [0.0, 0.0]])
    rf = torch.tensor([[0.0, 0.0], [0.0, 1.0], [0.0, 0.0], [0.0, 1.0]])
    assert torch.equal(out[:, 8:10], fr) and torch.equal(out[:, 10:12], rf)
    # film 2 shares the topic's director: only a mixed round gives it a topic share
    assert float(plain(4, edge_index, torch.tensor([0]))[2, 0::2].sum()) == 0.0 and float(fr[2, 0]) > 0
    assert DDE(3, mixed=True).mixed_sequences() == ["fr", "rf", "ffr", "frf", "frr", "rff", "rfr", "rrf"]
    assert DDEMLP(16, dde_mixed=True).first.in_features == 4 * 16 + 2 * 12


def test_qrgat_crossing_stacks_reach_a_film_that_shares_the_director():
    # topic film 0 -> director 1 <- film 2 -> genre 3. The topic flag of film 0 reaches the triple
    # (film 2, genre 3) only along 0 -> 1 <- 2: a forward hop, then a reverse one. Separate stacks never
    # mix the two; crossing stacks do from the second layer on.
    g = QuestionGraph(num_nodes=4, edge_index=torch.tensor([[0, 2, 2], [1, 1, 3]]), edge_rel=torch.tensor([0, 0, 1]),
                      node_emb=torch.zeros(4, 16), has_text=torch.ones(4, dtype=torch.bool),
                      rel_emb=torch.randn(2, 16, generator=torch.Generator().manual_seed(1)),
                      q_emb=torch.ones(16), topic=torch.tensor([0]))
    no_topic = dataclasses.replace(g, topic=torch.zeros(0, dtype=torch.long))  # only node 0's flag differs
    for cross in (False, True):
        torch.manual_seed(0)
        model = QRGAT(16, hidden=32, heads=4, num_layers=2, cross_directions=cross).eval()
        assert model.forward_convs[1].lin_s.in_features == (64 if cross else 32)
        seen = not torch.allclose(model(g)[2], model(no_topic)[2])
        assert seen == cross


def test_dde_on_a_batch_equals_per_graph():
    graphs = [random_graph(10, 20, seed=1), random_graph(7, 5, seed=2)]
    b = batch_graphs(graphs)
    together = DDE()(b.num_nodes, b.edge_index, b.is_topic)
    apart = torch.cat([DDE()(g.num_nodes, g.edge_index, g.topic) for g in graphs])
    assert torch.allclose(together, apart)


# -- models: shapes, batching, determinism ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_MODELS)
def test_batched_shapes_and_batch_invariance(name):
    model = make_models()[name].eval()
    graphs = [random_graph(30, 90, seed=1), random_graph(12, 25, seed=2), random_graph(45, 160, num_rel=11, seed=3)]
    batch = batch_graphs(graphs)
    logits = model(batch)
    assert logits.shape == (90 + 25 + 160,)
    assert torch.isfinite(logits).all()
    for part, g in zip(batch.split(logits), graphs):
        assert torch.allclose(part, model(g), atol=1e-5)
    probs = model.score(graphs[0])
    assert probs.shape == (90,) and ((probs >= 0) & (probs <= 1)).all()


@pytest.mark.parametrize("name", ALL_MODELS)
def test_empty_and_edgeless_graphs(name):
    model = make_models()[name].eval()
    g = random_graph(5, 0)
    assert model(g).shape == (0,)
    both = batch_graphs([g, random_graph(6, 4, seed=4)])
    assert model(both).shape == (4,)


@pytest.mark.parametrize("name", ALL_MODELS)
def test_determinism(name):
    g = random_graph(seed=5)
    a, b = make_models()[name], make_models()[name]  # same seed -> same initial weights
    for pa, pb in zip(a.state_dict().values(), b.state_dict().values()):
        assert torch.equal(pa, pb)
    a.eval(), b.eval()
    assert torch.equal(a(g), b(g))
    assert torch.equal(a(g), a(g))  # eval mode: no randomness left
    a.train(), b.train()
    torch.manual_seed(7)
    out_a = a(g)
    torch.manual_seed(7)
    out_b = b(g)
    assert torch.equal(out_a, out_b)  # train mode: same seed, same dropout masks


@pytest.mark.parametrize("name", ALL_MODELS)
def test_config_rebuilds_the_same_model(name):
    model = make_models()[name]
    clone = type(model)(**model.config)
    clone.load_state_dict(model.state_dict())
    g = random_graph(seed=6)
    assert torch.equal(model.eval()(g), clone.eval()(g))


# -- models: what they compute --------------------------------------------------------------------------------


def test_ddemlp_blockwise_first_layer_equals_the_literal_mlp():
    torch.manual_seed(0)
    model = DDEMLP(16, hidden=24, num_layers=2).eval()
    g = batch_graphs([random_graph(seed=1), random_graph(seed=2)])
    x = model.triple_inputs(g)
    assert x.shape == (240, 4 * 16 + 2 * 8)  # [z_q || z_h || z_r || z_t || dde_h || dde_t]
    assert torch.allclose(model(g), model.forward_dense(g), atol=1e-5)
    # with the relation walk: 2 more node features per end, walk_rounds + 1 triple features last
    walk = DDEMLP(16, hidden=24, walk=True, walk_rounds=2).eval()
    assert walk.triple_inputs(g).shape == (240, 4 * 16 + 2 * (8 + 2) + 3)
    assert torch.allclose(walk(g), walk.forward_dense(g), atol=1e-5)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_entity_table_gives_the_same_logits(name):
    # a table of 50 entity vectors; the graphs' nodes are rows of it (some nameless)
    table = torch.randn(50, 16, generator=torch.Generator().manual_seed(3))
    graphs = []
    for seed in (1, 2):
        g = random_graph(seed=seed)
        rows = torch.randperm(50, generator=torch.Generator().manual_seed(seed))[:g.num_nodes]
        graphs.append(dataclasses.replace(g, node_emb=table[rows], node_rows=rows))
    b = batch_graphs(graphs)
    for config in ({}, {"include_initial": True, "dde_mixed": True, "dde_log": True} if name == "ddemlp" else
                   {"positional": "dde", "cross_directions": True}, {"walk": True, "dde_gated": True}):
        torch.manual_seed(0)
        model = (DDEMLP(16, hidden=24, **config) if name == "ddemlp" else QRGAT(16, hidden=32, **config)).eval()
        plain = model(b)
        model.attach_entity_table(table)
        assert model._table_terms(b) is not None
        assert torch.allclose(model(b), plain, atol=1e-5)
        for g in graphs:  # a single question as well
            assert torch.allclose(model(g), model(dataclasses.replace(g, node_rows=None)), atol=1e-5)
        # a weight change makes the table stale: it is ignored, not used
        with torch.no_grad():
            next(model.parameters()).add_(0.5)
        assert model._table_terms(b) is None
        model.attach_entity_table(table)
        model.train()
        assert model._entity_table is None


@pytest.mark.parametrize("name", ALL_MODELS)
def test_scoring_a_subset_of_triples_equals_the_full_logits(name):
    # training on sampled negatives scores only some triples; their logits must be the full forward's
    model = make_models()[name]
    model.eval()
    graph = random_graph(num_nodes=50, num_edges=160, seed=4)
    full = model(graph)
    edges = torch.tensor([5, 0, 159, 77, 77, 31])
    part = model(graph, edges=edges)
    assert part.shape == (6,)
    assert torch.allclose(part, full[edges], atol=1e-5)


def test_sampled_negatives_are_stratified_and_weighted():
    import numpy as np

    from engine.scoring.neighbourhood import Neighbourhood
    from engine.scoring.prepared import PreparedSet
    from engine.scoring.train import near_negatives, sample_edges

    # a path 0 -> 1 -> 2 (the positives), 5 triples touching node 1 or 2, 20 elsewhere
    heads = np.array([0, 1] + [1, 2, 7, 8, 2] + [10 + i for i in range(20)])
    tails = np.array([1, 2] + [3, 4, 1, 2, 9] + [30 + i for i in range(20)])
    n = 50
    nb = Neighbourhood(kg="t", nodes=np.arange(n), heads=heads, tails=tails, rels=np.zeros(len(heads), np.int64),
                       relation_types=("r",), anchors=np.array([0]), distance=np.zeros(n, np.int64),
                       nameless=np.zeros(n, bool), report=None)
    ex = {"nb": "a", "pos": np.array([0, 1]), "train_pos": np.array([0, 1])}
    data = PreparedSet({"a": nb}, [ex], [], np.zeros((0, 4), np.float32), np.arange(n), np.zeros((n, 4), np.float32),
                       np.ones(n, bool), ("r",), np.zeros((1, 4), np.float32))
    pos, near, rest = near_negatives(data, ex)
    assert pos.tolist() == [0, 1] and near.tolist() == [2, 3, 4, 5, 6] and len(rest) == 20
    rng = np.random.default_rng(0)
    edges, w = sample_edges(data, [ex, ex], 8, 0.5, rng)
    first, second = edges[:10], edges[10:] - len(heads)  # the second question's triples come after the first's
    for got in (first, second):
        assert got[:2].tolist() == [0, 1]
        assert set(got[2:6].tolist()) <= set(near.tolist()) and set(got[6:].tolist()) <= set(rest.tolist())
        assert len(set(got.tolist())) == 10
    # weights: stratum size / drawn (5/4 near, 20/4 others), positives 1; the expected loss is the full one
    assert w[:10].tolist() == [1, 1] + [1.25] * 4 + [5.0] * 4
    # a stratum smaller than its share gives the rest to the other one; asking for more takes everything
    edges, w = sample_edges(data, [ex], 16, 0.9, rng)
    assert len(edges) == 18 and sorted(edges[2:7].tolist()) == near.tolist() and w[2:7].tolist() == [1.0] * 5
    edges, w = sample_edges(data, [ex], 100, 0.5, rng)
    assert sorted(edges.tolist()) == list(range(len(heads))) and (w == 1).all()


def test_answer_ceiling_at_k():
    from engine.scoring.metrics import answer_ceiling_at_k

    # answers 1..5; triples 1-2 and 3-4 join two answers each (a matching of 2), 5 only by a triple to 0
    heads, tails = [1, 3, 0, 0, 2], [2, 4, 5, 1, 3]
    assert answer_ceiling_at_k(heads, tails, [1, 2, 3, 4, 5], 1) == 2
    assert answer_ceiling_at_k(heads, tails, [1, 2, 3, 4, 5], 2) == 4
    assert answer_ceiling_at_k(heads, tails, [1, 2, 3, 4, 5], 3) == 5
    assert answer_ceiling_at_k(heads, tails, [1, 2, 3, 4, 5], 100) == 5
    # no triple joins two answers: one answer per triple, 150 answers cannot be covered by 100 triples
    assert answer_ceiling_at_k(list(range(150)), list(range(1000, 1150)), list(range(1000, 1150)), 100) == 100
    assert answer_ceiling_at_k(heads, tails, [], 10) == 0


def test_qrgat_blockwise_first_layer_equals_the_literal_input():
    torch.manual_seed(0)
    for positional in ("topic", "dde", "none"):
        for query_init in (True, False):
            model = QRGAT(16, hidden=32, positional=positional, query_init=query_init).eval()
            b = batch_graphs([random_graph(seed=1), random_graph(seed=2)])
            x, p = model.node_features(b), model.position(b)
            dense = model._first_projections(x, p, b, dense=True)  # materializes Dropout([e || q || p])
            blocks = model._first_projections(x, p, b, dense=False)
            for zd, zb in zip(dense, blocks):
                assert torch.allclose(zd, zb, atol=1e-5)


@pytest.mark.parametrize("name", ALL_MODELS)
def test_nameless_entities_use_the_shared_learned_vector(name):
    model = make_models()[name].eval()
    g = random_graph(seed=8, nameless=0.3)
    assert (~g.has_text).any()
    base = model(g)
    # whatever the rows of nameless entities hold, they are not read
    junk = g.node_emb.clone()
    junk[~g.has_text] = 1e3
    assert torch.equal(model(dataclasses.replace(g, node_emb=junk)), base)
    # the learned vector is what they get
    with torch.no_grad():
        model.nameless.add_(1.0)
    moved = model(g)
    touches = (~g.has_text)[g.edge_index].any(0)
    assert not torch.allclose(moved[touches], base[touches])
    if name.startswith("ddemlp"):  # no message passing (the walk reads no text): other triples do not change
        assert torch.allclose(moved[~touches], base[~touches])
    # and it is trained
    model.train()
    model.zero_grad()
    model(g).sum().backward()
    assert model.nameless.grad is not None and model.nameless.grad.abs().sum() > 0


def test_qrgat_attention_sums_to_one_over_incoming_edges():
    torch.manual_seed(0)
    g = random_graph(25, 80, seed=9)
    for self_loops in (True, False):
        model = QRGAT(16, hidden=32, heads=4, num_layers=2, add_self_loops=self_loops).eval()
        _, attention = model(g, return_attention=True)
        for direction in ("forward", "reverse"):
            assert len(attention[direction]) == 2
            for edge_index, alpha in attention[direction]:
                assert alpha.shape == (edge_index.shape[1], 4)
                assert (alpha >= 0).all()
                receivers = edge_index[1]
                sums = torch.zeros(g.num_nodes, 4).index_add_(0, receivers, alpha)
                has_in = torch.zeros(g.num_nodes, dtype=torch.bool)
                has_in[receivers] = True
                assert torch.allclose(sums[has_in], torch.ones(int(has_in.sum()), 4), atol=1e-5)
                assert (sums[~has_in] == 0).all()
                if self_loops:
                    assert has_in.all()
    # the reverse stack passes messages tail -> head
    fwd_ei = attention["forward"][0][0]
    rev_ei = attention["reverse"][0][0]
    assert torch.equal(rev_ei, fwd_ei.flip(0))


def test_qrgat_ablation_flags_change_the_model():
    torch.manual_seed(0)
    g = random_graph(seed=10)
    full = QRGAT(16, hidden=32)
    n_full = sum(p.numel() for p in full.parameters())
    no_attn = QRGAT(16, hidden=32, query_attn=False)
    no_init = QRGAT(16, hidden=32, query_init=False)
    no_score = QRGAT(16, hidden=32, query_score=False)
    assert all(c.lin_q is None for c in no_attn.forward_convs)
    assert no_init.forward_convs[0].lin_s.in_features == 16 + 2
    assert full.forward_convs[0].lin_s.in_features == 16 + 16 + 2
    assert no_score.score1.in_features == full.score1.in_features - 16
    for m in (no_attn, no_init, no_score):
        assert sum(p.numel() for p in m.parameters()) < n_full
        assert m.eval()(g).shape == (120,)
    # without any query path, the question embedding has no effect
    blind = QRGAT(16, hidden=32, query_init=False, query_attn=False, query_score=False).eval()
    other_q = dataclasses.replace(g, q_emb=torch.randn(16))
    assert torch.equal(blind(g), blind(other_q))
    assert not torch.equal(full.eval()(g), full(other_q))


def test_hyperparameters_are_configurable():
    m = QRGAT(16, hidden=48, num_layers=3, heads=6, dropout=0.2, score_hidden=20)
    assert len(m.forward_convs) == 3 and len(m.reverse_convs) == 3
    assert m.forward_convs[0].heads == 6 and m.forward_convs[0].head_dim == 8
    assert m.score1.out_features == 20 and m.dropout.p == 0.2
    with pytest.raises(ValueError):
        QRGAT(16, hidden=50, heads=4)
    d = DDEMLP(16, hidden=10, num_layers=3, dropout=0.3, dde_rounds=3)
    assert d.first.in_features == 4 * 16 + 2 * 12 and d.first.out_features == 10
    assert len(d.hidden_layers) == 2 and d.dropout.p == 0.3
    assert DDEMLP(16).first.out_features == 16  # hidden defaults to d
    assert DDEMLP(16, dde_rounds=0).first.in_features == 4 * 16  # the text-only MLP ablation
    assert DDEMLP(16, dde_rounds=0, include_initial=True).first.in_features == 4 * 16 + 4  # + topic one-hot


# -- selection --------------------------------------------------------------------------------------------------


def test_adaptive_top_p_hand_example():
    logits = torch.log(torch.tensor([0.15, 0.5, 0.05, 0.3]))  # softmax = these probabilities
    # sorted: 0.5 (1), 0.3 (3), 0.15 (0), 0.05 (2); cumulative 0.5, 0.8, 0.95 -> first > 0.9 at k_A = 2
    assert adaptive_top_p(logits, p=0.9, k_min=1, k_max=10).tolist() == [1, 3, 0]
    assert adaptive_top_p(logits, p=0.7, k_min=1, k_max=10).tolist() == [1, 3]
    assert adaptive_top_p(logits, p=0.9, k_min=1, k_max=2).tolist() == [1, 3]  # clamp to k_max
    assert adaptive_top_p(logits, p=0.4, k_min=3, k_max=10).tolist() == [1, 3, 0]  # clamp to k_min
    # pre-filter sigmoid(l) > tau: sigmoid(log 0.5) = 1/3, sigmoid(log 0.3) = 0.23 pass 0.2; the rest do not
    assert adaptive_top_p(logits, p=0.99, tau=0.2, k_min=1, k_max=10).tolist() == [1, 3]
    assert adaptive_top_p(logits, tau=0.99).numel() == 0  # nothing passes


def test_adaptive_top_p_clamps_and_mass():
    torch.manual_seed(0)
    peaked = torch.cat([torch.tensor([30.0]), torch.randn(999)])
    assert adaptive_top_p(peaked).numel() == 50  # one triple holds the mass -> k_min
    flat = torch.zeros(1000)
    assert adaptive_top_p(flat).numel() == 200  # 901 needed -> k_max
    assert adaptive_top_p(torch.zeros(30)).numel() == 30  # fewer triples than k_min
    logits = torch.randn(1000) * 3
    chosen = adaptive_top_p(logits, p=0.9, k_min=1, k_max=1000)
    probs = torch.softmax(logits.double(), 0)
    assert probs[chosen].sum() > 0.9 >= probs[chosen[:-1]].sum()  # the smallest prefix over p
    assert (logits[chosen][:-1] >= logits[chosen][1:]).all()  # best first
    assert torch.equal(chosen, top_k(logits, chosen.numel()))
    with pytest.raises(ValueError):
        adaptive_top_p(logits, p=0.0)
    with pytest.raises(ValueError):
        adaptive_top_p(logits, k_min=10, k_max=5)


def test_top_k_is_stable_on_ties():
    assert top_k(torch.tensor([1.0, 3.0, 3.0, 2.0, 3.0]), 4).tolist() == [1, 2, 4, 3]
    assert top_k(torch.tensor([1.0, 2.0]), 5).tolist() == [1, 0]


# -- labels and metrics -----------------------------------------------------------------------------------------


# e0 0->1, e1 1->3, e2 4->0, e3 4->3, e4 0->5, e5 5->6, e6 6->3, e7 1->3 (parallel), e8 2->1, e9 6->7
LABEL_EDGES = torch.tensor([[0, 1, 4, 4, 0, 5, 6, 1, 2, 6], [1, 3, 0, 3, 5, 6, 3, 3, 1, 7]])


def test_shortest_path_labels_hand_example():
    # topic 0; answers 3 and 7.
    # 0 ~ 3: length 2 by 0-1-3 (e0, e1 and its parallel e7) and by 0-4-3 (e2 walked against its
    #   direction, e3); 0-5-6-3 (length 3) is not shortest, 2->1 (e8) is off every path.
    # 0 ~ 7: length 3, only 0-5-6-7 (e4, e5, e9).
    labels = shortest_path_labels(8, LABEL_EDGES, torch.tensor([0]), torch.tensor([3, 7]))
    assert labels.dtype == torch.bool
    assert labels.nonzero().flatten().tolist() == [0, 1, 2, 3, 4, 5, 7, 9]
    # "set": only the paths of the minimum topic-to-answer distance (2, to answer 3)
    labels = shortest_path_labels(8, LABEL_EDGES, torch.tensor([0]), torch.tensor([3, 7]), mode="set")
    assert labels.nonzero().flatten().tolist() == [0, 1, 2, 3, 7]
    # two topics: 6 ~ 3 is one hop (e6), 6 ~ 7 is one hop (e9); plus topic 0's paths
    labels = shortest_path_labels(8, LABEL_EDGES, torch.tensor([0, 6]), torch.tensor([3, 7]))
    assert labels.nonzero().flatten().tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 9]


def test_relation_path_labels_hand_example():
    # MetaQA-like, one direction stored (film -> attribute). Nodes: 0 topic film, 1 actor A, 2 film B,
    # 3 year 1999, 4 genre G, 5 film C, 6 year 2000, 7 film D.
    # "years of the films that share an actor with [0]": path starred, starred, year; answers 3 (and 6, off path)
    starred, year, genre = 0, 1, 2
    edges = [(0, starred, 1), (2, starred, 1), (2, year, 3), (0, year, 3), (0, genre, 4), (5, genre, 4),
             (5, year, 6), (7, starred, 1)]
    ei = torch.tensor([[h for h, _, _ in edges], [t for _, _, t in edges]])
    rel = torch.tensor([r for _, r, _ in edges])
    lab = scoring.relation_path_labels(8, ei, rel, torch.tensor([0]), torch.tensor([3]), [starred, starred, year])
    # topic -> A <- B -> 1999; film D shares the actor but leads to no answer; the topic's own year is not a
    # walk (the topic is dropped from every step's set, as MetaQA's answers are made)
    assert lab.nonzero().flatten().tolist() == [0, 1, 2]
    assert not scoring.relation_path_labels(8, ei, rel, torch.tensor([0]), torch.tensor([6]),
                                            [starred, starred, year]).any()
    # edges walked against their direction count: from 1999 to the films of that year (B and the topic
    # film), then to their actor A
    lab_rev = scoring.relation_path_labels(8, ei, rel, torch.tensor([3]), torch.tensor([1]), [year, starred])
    assert lab_rev.nonzero().flatten().tolist() == [0, 1, 2, 3]
    # fallback: answer 6 is off the relation path, so its shortest path (through the genre) is added
    both = scoring.path_labels_with_fallback(8, ei, rel, torch.tensor([0]), torch.tensor([3, 6]),
                                             [starred, starred, year])
    assert both.nonzero().flatten().tolist() == [0, 1, 2, 4, 5, 6]
    assert not scoring.relation_path_labels(8, ei, rel, torch.tensor([0]), torch.tensor([3]), []).any()


def test_query_gated_dde_equals_dde_with_open_gates_and_learns_gates():
    g = batch_graphs([random_graph(20, 60, num_rel=3, seed=4)])
    gated = scoring.QueryGatedDDE(16, rounds=2)
    with torch.no_grad():
        gated.gate_bias.fill_(60.0)  # every gate ~1: plain mean aggregation of the topic share
    out = gated(g)
    assert out.shape == (20, 6) and gated.out_dim == 6  # f, r, ff, fr, rf, rr
    plain = DDE(2, mixed=True)(g.num_nodes, g.edge_index, g.is_topic)  # [f || ff || r || rr || fr || rf]
    topic_col = plain[:, 0::2]
    expect = torch.stack([topic_col[:, 0], topic_col[:, 2], topic_col[:, 1], topic_col[:, 4], topic_col[:, 5],
                          topic_col[:, 3]], dim=1)
    assert torch.allclose(out, log_scale(expect), atol=1e-5)
    # the gates get gradients from the features they scale
    with torch.no_grad():
        gated.gate_bias.fill_(0.0)
    gated(g).sum().backward()
    assert gated.gate_q.weight.grad is not None and gated.gate_q.weight.grad.abs().sum() > 0
    # in the scorer: literal MLP input and the blockwise forward agree
    torch.manual_seed(0)
    model = DDEMLP(16, hidden=24, include_initial=True, dde_mixed=True, dde_log=True, dde_gated=True).eval()
    b = batch_graphs([random_graph(seed=1), random_graph(seed=2)])
    assert model.triple_inputs(b).shape == (240, 4 * 16 + 2 * (14 + 6))
    assert torch.allclose(model(b), model.forward_dense(b), atol=1e-5)
    # in QR-GAT: appended to the position features, and the gates get gradients
    qr = QRGAT(16, hidden=32, heads=4, dropout=0.0, dde_gated=True)
    assert qr.pos_dim == 2 + 6
    out = qr(b)
    assert out.shape == (240,) and torch.isfinite(out).all()
    out.sum().backward()
    assert qr.gated.gate_q.weight.grad is not None and qr.gated.gate_q.weight.grad.abs().sum() > 0


def walk_graph() -> QuestionGraph:
    """Films F0 (topic), F1, F2; director D; languages L0, L1, L2; genre G. Relations: 0 directed_by,
    1 in_language, 2 has_genre (MetaQA's direction: film -> x)."""
    names = ["F0", "F1", "F2", "D", "L0", "L1", "L2", "G"]
    triples = [("F0", 0, "D"), ("F1", 0, "D"), ("F0", 1, "L0"), ("F1", 1, "L1"), ("F0", 2, "G"), ("F2", 2, "G"),
               ("F2", 1, "L2")]
    ix = {n: i for i, n in enumerate(names)}
    return QuestionGraph(
        num_nodes=len(names),
        edge_index=torch.tensor([[ix[h] for h, _, _ in triples], [ix[t] for _, _, t in triples]]),
        edge_rel=torch.tensor([r for _, r, _ in triples]), node_emb=torch.randn(len(names), 8),
        has_text=torch.ones(len(names), dtype=torch.bool), rel_emb=torch.randn(3, 8), q_emb=torch.randn(8),
        topic=torch.tensor([0]))


def forced_walk(rel: list[list[tuple[float, float]]], stay: list[float]) -> "scoring.QueryWalk":
    """A QueryWalk whose gates are the given numbers: ``rel[r][l] = (forward, reverse)``, ``stay[l]``."""
    walk = scoring.QueryWalk(8, rounds=len(stay))
    walk.gates = lambda b, dtype=torch.float32: (torch.tensor(rel, dtype=dtype), torch.tensor([stay], dtype=dtype))
    return walk


def test_query_walk_hand_computed_example():
    g = batch_graphs([walk_graph()])
    # "the languages of the films directed by the director of F0": directed_by forward, directed_by reverse,
    # in_language forward; every other gate closed
    walk = forced_walk([[(1, 0), (0, 1), (0, 0)], [(0, 0), (0, 0), (1, 0)], [(0, 0), (0, 0), (0, 0)]], [0, 0, 0])
    node, edge, end = walk(g)
    # the walk ends on the language of F1 only: not on F2's (genre route), nor on F0's own (F0 -> D -> F0 -> L0
    # comes back to the topic, which a walk never does)
    assert end.tolist() == [0, 0, 0, 0, 0, 1, 0, 0]
    assert torch.allclose(node[:, 0], end) and node.shape == (8, 2)
    # per triple and round: the best complete walk crossing it then; the last column is log_scale(max)
    assert edge.shape == (7, 4)
    assert edge[:, :3].tolist() == [[1, 0, 0],   # F0 -> D: round 1 (not back to F0 at round 2)
                                    [0, 1, 0],   # F1 -> D: round 2, reverse
                                    [0, 0, 0],   # F0 -> L0: only by coming back to the topic
                                    [0, 0, 1],   # F1 -> L1
                                    [0, 0, 0], [0, 0, 0], [0, 0, 0]]
    assert torch.allclose(edge[:, 3], log_scale(edge[:, :3].amax(1)))
    # a gate of 0.5 on the last round halves what that round reaches (max-product, no division by degrees)
    half = forced_walk([[(1, 0), (0, 1), (0, 0)], [(0, 0), (0, 0), (0.5, 0)], [(0, 0), (0, 0), (0, 0)]], [0, 0, 0])
    assert half(g)[2].tolist() == [0, 0, 0, 0, 0, 0.5, 0, 0]
    # with the genre open at round 1 and 2 as well, F2 is reached through G: its language L2 too
    genre = forced_walk([[(1, 0), (0, 1), (0, 0)], [(0, 0), (0, 0), (1, 0)], [(1, 0), (0, 1), (0, 0)]], [0, 0, 0])
    assert genre(g)[2].tolist() == [0, 0, 0, 0, 0, 1, 1, 0]


def test_query_walk_stays_for_questions_of_fewer_hops():
    g = batch_graphs([walk_graph()])
    # "who directed F0" on a 3-round walk: directed_by forward, then stay
    walk = forced_walk([[(1, 0), (0, 0), (0, 0)], [(0, 0), (0, 0), (0, 0)], [(0, 0), (0, 0), (0, 0)]], [0, 1, 1])
    _, edge, end = walk(g)
    assert end.tolist() == [0, 0, 0, 1, 0, 0, 0, 0]
    assert edge[:, :3].tolist() == [[1, 0, 0]] + [[0, 0, 0]] * 6
    # a walk that cannot be completed marks no triple: 2 rounds of in_language forward lead nowhere
    dead = forced_walk([[(0, 0)] * 2, [(1, 0), (1, 0)], [(0, 0)] * 2], [0, 0])
    _, edge, end = dead(g)
    assert end.sum() == 0 and edge[:, :2].sum() == 0


def test_mask_mentions():
    from engine.scoring.models.query_walk import mask_mentions

    assert mask_mentions("who directed [Heat]") == "who directed it"
    assert mask_mentions("films starring Tom Hanks and tom hanks", ["Tom Hanks"]) == "films starring it and it"
    # whole words only, longest mention first, regex characters taken literally
    assert mask_mentions("Heathers and Heat (1995)", ["Heat", "Heat (1995)"]) == "Heathers and it"
    assert mask_mentions("who wrote [Se7en] and Se7en", ["Se7en", ""], placeholder="X") == "who wrote X and X"
    assert mask_mentions("nothing to mask", ["absent"]) == "nothing to mask"


def test_walk_answer_loss_hand_computed():
    from engine.scoring.models.query_walk import walk_answer_loss

    g = walk_graph()  # 8 nodes, topic 0
    end = torch.tensor([0.9, 0.5, 0.2, 0.9, 0.1, 0.8, 0.05, 0.3])
    labels = torch.tensor([0, 0, 0, 0, 0, 1, 0, 0.0])
    b = batch_graphs([dataclasses.replace(g, node_labels=labels)])
    def bce(p: float, y: float) -> float:
        return -(y * math.log(p) + (1 - y) * math.log(1 - p))
    pos = bce(0.8, 1)
    negs = sorted((bce(p, 0) for i, p in enumerate(end.tolist()) if i not in (0, 5)), reverse=True)  # topic left out
    # one answer: the hardest max(hard_min, 2 * 1) non-answers; with hard_min=3 the three highest ends
    want = pos + sum(negs[:3]) / 3 + sum(negs) / len(negs)
    assert math.isclose(float(walk_answer_loss(end, b, hard_min=3)), want, rel_tol=1e-5)
    # a question without an answer in its neighbourhood adds nothing; none at all gives 0
    none = batch_graphs([dataclasses.replace(g, node_labels=torch.zeros(8))])
    assert float(walk_answer_loss(end, none)) == 0.0
    both = batch_graphs([dataclasses.replace(g, node_labels=labels),
                         dataclasses.replace(g, node_labels=torch.zeros(8))])
    assert math.isclose(float(walk_answer_loss(torch.cat([end, end]), both, hard_min=3)), want, rel_tol=1e-5)


def test_query_walk_learns_relation_paths_from_answers():
    """2-hop questions over random graphs: the question embedding is a fixed linear mix of its two relations'
    embeddings; trained from the answers alone (walk_answer_loss), the walk ends on held-out answers."""
    from engine.scoring.models.query_walk import walk_answer_loss

    dim, num_rel, n, e = 16, 6, 30, 90
    rel = torch.nn.functional.normalize(torch.randn(num_rel, dim, generator=torch.Generator().manual_seed(5)), dim=1)
    mix = torch.randn(2, dim, dim, generator=torch.Generator().manual_seed(6)) / math.sqrt(dim)

    def task(count: int, seed: int) -> list[QuestionGraph]:
        g = torch.Generator().manual_seed(seed)
        out = []
        while len(out) < count:
            ei = torch.randint(0, n, (2, e), generator=g)
            er = torch.randint(0, num_rel, (e,), generator=g)
            r1, r2 = (int(x) for x in torch.randint(0, num_rel, (2,), generator=g))
            hop1 = set(ei[1, (ei[0] == 0) & (er == r1)].tolist())
            answers = {int(t) for h, r, t in zip(ei[0].tolist(), er.tolist(), ei[1].tolist()) if h in hop1 and r == r2}
            answers.discard(0)
            if not answers:
                continue
            y = torch.zeros(n)
            y[list(answers)] = 1.0
            out.append(QuestionGraph(n, ei, er, torch.randn(n, dim, generator=g), torch.ones(n, dtype=torch.bool),
                                     rel, mix[0] @ rel[r1] + mix[1] @ rel[r2], torch.tensor([0]), node_labels=y))
        return out

    torch.manual_seed(0)
    walk = scoring.QueryWalk(dim, rounds=2, gate_dim=16)
    opt = torch.optim.Adam(walk.parameters(), lr=2e-2)
    train, test = task(96, seed=1), task(24, seed=2)

    def separation() -> tuple[float, float]:
        with torch.no_grad():
            b = batch_graphs(test)
            end = walk(b)[2]
        keep = ~b.is_topic
        return float(end[(b.node_labels > 0) & keep].mean()), float(end[(b.node_labels == 0) & keep].mean())

    before = separation()
    for step in range(150):
        b = batch_graphs(train[(step * 8) % 96:(step * 8) % 96 + 8])
        loss = walk_answer_loss(walk(b)[2], b)
        opt.zero_grad()
        loss.backward()
        opt.step()
    on_answers, elsewhere = separation()
    print(f"\nwalk end on answers / elsewhere: before {before[0]:.3f} / {before[1]:.3f}, "
          f"after {on_answers:.3f} / {elsewhere:.3f}")
    assert on_answers > 0.8 and elsewhere < 0.1


def test_shortest_path_labels_edge_cases():
    none = shortest_path_labels(8, LABEL_EDGES, torch.tensor([0]), torch.tensor([0]))  # answer is the topic
    assert not none.any()
    assert not shortest_path_labels(9, LABEL_EDGES, torch.tensor([0]), torch.tensor([8])).any()  # unreachable
    assert not shortest_path_labels(8, LABEL_EDGES, torch.tensor([], dtype=torch.long), torch.tensor([3])).any()
    with pytest.raises(InputError):
        shortest_path_labels(8, LABEL_EDGES, torch.tensor([0]), torch.tensor([8]))


@pytest.mark.parametrize("chunk_elements", [1 << 23, 100])  # 100: one source / answer per chunk
def test_shortest_path_labels_match_brute_force_on_random_graphs(chunk_elements, monkeypatch):
    # Reference: enumerate for each edge whether some shortest topic-answer path uses it, from BFS by hand.
    import collections

    import engine.scoring.labels as labels_module

    monkeypatch.setattr(labels_module, "_BFS_CHUNK_ELEMENTS", chunk_elements)

    for seed in range(5):
        g = torch.Generator().manual_seed(seed)
        n, e = 30, 45
        ei = torch.randint(0, n, (2, e), generator=g)
        topic, answers = torch.tensor([0, 1]), torch.tensor([5, 9, 17])
        adj = collections.defaultdict(set)
        for u, v in ei.t().tolist():
            adj[u].add(v)
            adj[v].add(u)

        def bfs(s, adj=adj):
            dist, queue = {s: 0}, collections.deque([s])
            while queue:
                x = queue.popleft()
                for y in adj[x]:
                    if y not in dist:
                        dist[y] = dist[x] + 1
                        queue.append(y)
            return dist

        expect = [False] * e
        for t in topic.tolist():
            dt = bfs(t)
            for a in answers.tolist():
                if a == t or a not in dt:
                    continue
                da, length = bfs(a), dt[a]
                for k, (u, v) in enumerate(ei.t().tolist()):
                    if (u in dt and v in da and dt[u] + 1 + da[v] == length) or \
                       (v in dt and u in da and dt[v] + 1 + da[u] == length):
                        expect[k] = True
        assert shortest_path_labels(n, ei, topic, answers).tolist() == expect


def test_shortest_path_labels_scale():
    # ~30k triples, 3 topics, 50 answers: must stay well under a second on CPU
    g = torch.Generator().manual_seed(0)
    n, e = 8000, 30000
    ei = torch.randint(0, n, (2, e), generator=g)
    t0 = time.perf_counter()
    labels = shortest_path_labels(n, ei, torch.tensor([0, 1, 2]), torch.arange(100, 150))
    elapsed = time.perf_counter() - t0
    assert labels.any()
    assert elapsed < 5.0, f"shortest_path_labels took {elapsed:.2f}s"


def test_recall_metrics():
    scores = torch.tensor([0.9, 0.1, 0.8, 0.3, 0.7])
    labels = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0])
    assert triple_recall_at_k(scores, labels, 2) == pytest.approx(1 / 3)  # top-2 = {0, 2}
    assert triple_recall_at_k(scores, labels, 3) == pytest.approx(2 / 3)  # {0, 2, 4}
    assert triple_recall_at_k(scores, labels, 10) == 1.0
    assert math.isnan(triple_recall_at_k(scores, torch.zeros(5), 3))
    edge_index = torch.tensor([[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]])
    # top-2 triples (0, 2) cover entities {0, 5, 2, 7}
    assert answer_recall_at_k(scores, edge_index, torch.tensor([5, 2, 6, 6]), 2) == pytest.approx(2 / 3)
    assert math.isnan(answer_recall_at_k(scores, edge_index, torch.tensor([], dtype=torch.long), 2))


# -- device -----------------------------------------------------------------------------------------------------


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if WITH_CUDA else "cpu")
    with pytest.raises(ConfigError):
        resolve_device("tpu-please")
    if not WITH_CUDA:
        with pytest.raises(ConfigError):
            resolve_device("cuda")


@onlyCUDA
@pytest.mark.parametrize("name", ALL_MODELS)
def test_models_on_cuda_match_cpu(name):
    model = make_models()[name].eval()
    g = random_graph(seed=11)
    cpu = model(g)
    dev = resolve_device("cuda")
    gpu = model.to(dev)(g)  # the graph is moved to the model's device
    assert gpu.device.type == "cuda"
    assert torch.allclose(gpu.cpu(), cpu, atol=1e-4)
    labels = shortest_path_labels(g.num_nodes, g.edge_index.to(dev), g.topic.to(dev), torch.tensor([5], device=dev))
    assert labels.device.type == "cuda"


# -- learning sanity ---------------------------------------------------------------------------------------------


def synthetic_task(num_questions: int, seed: int, dim: int = 16, num_rel: int = 12) -> list[QuestionGraph]:
    """Each question asks for one relation: the targets are the triples whose relation embedding is
    the closest to the question embedding (the asked relation); the question is that relation plus noise."""
    g = torch.Generator().manual_seed(seed)
    rel = torch.nn.functional.normalize(torch.randn(num_rel, dim, generator=torch.Generator().manual_seed(99)), dim=1)
    out = []
    for _ in range(num_questions):
        n, e = 40, 160
        asked = int(torch.randint(0, num_rel, (1,), generator=g))
        q = torch.nn.functional.normalize(rel[asked] + 0.3 * torch.randn(dim, generator=g) / math.sqrt(dim), dim=0)
        edge_rel = torch.randint(0, num_rel, (e,), generator=g)
        closest = int((rel @ q).argmax())
        out.append(QuestionGraph(
            num_nodes=n, edge_index=torch.randint(0, n, (2, e), generator=g), edge_rel=edge_rel,
            node_emb=torch.nn.functional.normalize(torch.randn(n, dim, generator=g), dim=1),
            has_text=torch.rand(n, generator=g) > 0.1, rel_emb=rel, q_emb=q, topic=torch.tensor([0]),
            labels=(edge_rel == closest).float()))
    return out


def mean_recall(model, graphs, k):
    model.eval()
    with torch.no_grad():
        vals = [triple_recall_at_k(model(g), g.labels, k) for g in graphs]
    return statistics.mean(v for v in vals if not math.isnan(v))


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_training_raises_triple_recall_well_above_random(name):
    torch.manual_seed(0)
    model = {"ddemlp": DDEMLP(16, hidden=64), "qrgat": QRGAT(16, hidden=32, heads=4, score_hidden=64)}[name]
    train, test = synthetic_task(64, seed=1), synthetic_task(20, seed=2)
    k = 20
    random_recall = k / 160
    before = mean_recall(model, test, k)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    batches = [batch_graphs(train[i:i + 8]) for i in range(0, len(train), 8)]
    for step in range(200):
        b = batches[step % len(batches)]
        model.train()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(b), b.labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = mean_recall(model, test, k)
    print(f"\n{name}: triple recall@{k} before {before:.3f}, after 200 steps {after:.3f}, random {random_recall:.3f}")
    assert after > 0.6 and after > 4 * random_recall  # reaches about 0.99 for both models


# -- latency --------------------------------------------------------------------------------------------------------


def test_forward_latency_10k_triples(capsys):
    """Prints CPU forward latency at the scale a neighbourhood is capped at (10,000 triples, d = 384), with 1 and 2
    torch threads; benchmarks/scorer_forward.py is the full measurement. Only a gross regression fails."""
    graph = random_graph(2_500, 10_000, num_rel=300, dim=384, nameless=0.1)
    lines = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        # the class defaults (hidden=d and 256) and what train-scorer builds (DEFAULT_MODEL_CONFIG)
        for name, model in (("DDEMLP", DDEMLP(384)), ("QRGAT", QRGAT(384)),
                            ("DDEMLP, train-scorer's", make_model("dde_mlp", 384, **DEFAULT_MODEL_CONFIG["dde_mlp"])),
                            ("QRGAT, train-scorer's", make_model("qrgat", 384, **DEFAULT_MODEL_CONFIG["qrgat"]))):
            model.eval()
            with torch.inference_mode():
                model(graph)
                wall, cpu = [], []
                for _ in range(5):
                    c0, t0 = time.process_time(), time.perf_counter()
                    model(graph)
                    wall.append((time.perf_counter() - t0) * 1000)
                    cpu.append((time.process_time() - c0) * 1000)
            lines.append(f"{name}: forward wall min {min(wall):.1f} ms, median {statistics.median(wall):.1f} ms, "
                         f"CPU time {statistics.median(cpu):.1f} ms (10,000 triples, 2,500 nodes, d=384, "
                         f"{threads} thread{'s' if threads > 1 else ''})")
            assert min(wall) < 5000
    with capsys.disabled():
        print("\n" + "\n".join(lines))
