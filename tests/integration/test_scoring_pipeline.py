"""The scorer pipeline on a small KG in the real Neo4j and Milvus: neighbourhood fetch (counts, directions, the
cap and its report), training (beats an untrained model), checkpoints (save, load, refusal), Engine.ask with
and without a scorer checkpoint (the LLM is the scripted OpenAI-compatible server)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import torch

from engine import (CheckpointError, ConfigError, Engine, KGNotFoundError, LLMConfig)
from engine.stores.graph import entity_id
from engine.scoring import fetch_neighbourhood
from engine.scoring.checkpoint import load_checkpoint, make_model, relation_fingerprint, save_checkpoint
from engine.scoring.extract import answer_candidates
from engine.scoring.evaluate import dev_recall
from engine.scoring.prepared import prepare
from engine.scoring.qa import QARecord, read_qa
from engine.scoring.train import TrainSettings, seed_everything, train_model
from loaders._model import EntityRecord, TripleRecord
from loaders.bulk import BulkLoader, LoadSummary

from helpers.kg import shared_kg


# -- a small movie KG: 24 films with a director, two actors, a year and a genre; a few shared people ---------
DIRECTORS = ["Ava Lind", "Bo Carter", "Cy Moreau", "Di Park", "Ed Novak", "Flo Brandt"]
ACTORS = [f"Actor {c}" for c in "ABCDEFGHIJKLMNOP"]
GENRES = ["Drama", "Comedy", "Thriller"]
FILMS = [f"Film {i:02d}" for i in range(24)]


def movie_triples() -> list[tuple[str, str, str]]:
    rng = random.Random(7)
    out = []
    for i, f in enumerate(FILMS):
        out.append((f, "directed_by", DIRECTORS[i % len(DIRECTORS)]))
        for a in rng.sample(ACTORS, 2):
            out.append((f, "starred_actors", a))
        out.append((f, "release_year", str(1990 + i % 8)))
        out.append((f, "has_genre", GENRES[i % len(GENRES)]))
    out.append(("Film 00", "has_tags", "m.0abc12"))  # a nameless entity (a Freebase-style mid)
    return out


TRIPLES = movie_triples()


def questions() -> list[QARecord]:
    """1-hop and 2-hop questions with their answers from TRIPLES."""
    by_head: dict[tuple[str, str], list[str]] = {}
    by_tail: dict[tuple[str, str], list[str]] = {}
    for h, r, t in TRIPLES:
        by_head.setdefault((h, r), []).append(t)
        by_tail.setdefault((t, r), []).append(h)
    out = []
    for f in FILMS:
        out.append(QARecord(f"who directed [{f}]", [f], by_head[(f, "directed_by")], hops=2))
        out.append(QARecord(f"what year was [{f}] released", [f], by_head[(f, "release_year")], hops=2))
    for d in DIRECTORS:
        films = by_tail[(d, "directed_by")]
        actors = sorted({a for f in films for a in by_head[(f, "starred_actors")]})
        out.append(QARecord(f"who acted in the films directed by [{d}]", [d], actors, hops=2))
    return out


@pytest.fixture(scope="module")
def kg(neo4j_uri: str, milvus_uri: str, embedder: Any) -> Any:
    """The movie KG loaded once for the module; yields a factory of engines on it."""
    records: list[Any] = [TripleRecord(h, r, t, i) for i, (h, r, t) in enumerate(TRIPLES, start=1)]
    records.append(EntityRecord("Film 01", None, ("movie",), len(records) + 1))  # an ISORAG_IS_A link to a type node
    yield from shared_kg("score", records, neo4j_uri, milvus_uri, embedder)


def eid(eng: Engine, key: str) -> int:
    return entity_id(eng.kg, key)


def brute_neighbourhood(anchors: set[str], hops: int) -> set[tuple[str, str, str]]:
    """Triples with an end within hops-1 of the anchors (undirected BFS), the definition being tested."""
    dist = {a: 0 for a in anchors}
    layer = set(anchors)
    for d in range(1, hops):
        nxt = set()
        for h, _, t in TRIPLES:
            if h in layer and t not in dist:
                nxt.add(t)
            if t in layer and h not in dist:
                nxt.add(h)
        for n in nxt:
            dist[n] = d
        layer = nxt
    return {tr for tr in TRIPLES if tr[0] in dist or tr[2] in dist}


def as_names(eng: Engine, nb: Any) -> set[tuple[str, str, str]]:
    rows = eng.graph.entities(nb.nodes.tolist())
    names = {ri.type: ri.name for ri in eng.graph.relation_catalog().values()}
    return {(rows[h]["key"], names[r], rows[t]["key"]) for h, r, t in nb.triple_eids(range(nb.num_edges))}


# ---------------------------------------------------------------------------------------------------------
# neighbourhoods
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_neighbourhood_matches_bfs_with_directions(kg: Callable[..., Engine], hops: int) -> None:
    eng = kg()
    nb = fetch_neighbourhood(eng.graph, [eid(eng, "Bo Carter")], hops=hops, max_edges=100_000)
    want = brute_neighbourhood({"Bo Carter"}, hops)
    got = as_names(eng, nb)
    assert got == want  # the same triples, each in its KG direction (film -> director, never reversed)
    assert nb.num_edges == len(want)  # no duplicates
    assert nb.report.queries == 1 + hops and not nb.report.truncated and nb.report.warning() is None
    assert nb.nodes[nb.anchors].tolist() == [eid(eng, "Bo Carter")] and nb.distance[nb.anchors].tolist() == [0]
    assert int(nb.distance.max()) <= hops
    assert len(nb.report.per_hop) <= hops


def test_neighbourhood_leaves_out_is_a_and_flags_nameless(kg: Callable[..., Engine]) -> None:
    eng = kg()
    nb = fetch_neighbourhood(eng.graph, [eid(eng, "Film 00"), eid(eng, "Film 01")], hops=1)
    assert {r for _, r, _ in as_names(eng, nb)} <= {"directed_by", "starred_actors", "release_year", "has_genre",
                                                   "has_tags"}
    assert as_names(eng, nb) == brute_neighbourhood({"Film 00", "Film 01"}, 1)  # no ISORAG_IS_A link to the type
    nameless = {int(e) for e, flag in zip(nb.nodes.tolist(), nb.nameless.tolist()) if flag}
    assert nameless == {eid(eng, "m.0abc12")}
    # unknown anchors are ignored; none left is an empty neighbourhood
    assert fetch_neighbourhood(eng.graph, [12345], hops=2).num_edges == 0


def test_neighbourhood_cap_prunes_and_reports(kg: Callable[..., Engine]) -> None:
    eng = kg()
    full = fetch_neighbourhood(eng.graph, [eid(eng, "Drama")], hops=2, max_edges=100_000)
    cap = 25
    nb = fetch_neighbourhood(eng.graph, [eid(eng, "Drama")], hops=2, max_edges=cap)
    assert full.num_edges > cap >= nb.num_edges > 0
    rep = nb.report
    assert rep.truncated and rep.pruned_nodes > 0 and rep.pruned_edges > 0
    assert rep.edges == nb.num_edges and rep.max_edges == cap
    assert f"capped at {cap}" in (rep.warning() or "")
    assert sum(h["pruned_nodes"] for h in rep.per_hop) == rep.pruned_nodes
    # what was kept is a subset of the full neighbourhood, with every Drama triple of hop 1 (budget 25 // 2)
    assert as_names(eng, nb) <= as_names(eng, full)
    # an anchor alone bigger than the cap is expanded in part rather than dropped
    tiny = fetch_neighbourhood(eng.graph, [eid(eng, "Drama")], hops=1, max_edges=3)
    assert tiny.num_edges == 3 and tiny.report.partial_nodes == 1 and tiny.report.truncated


# ---------------------------------------------------------------------------------------------------------
# training and checkpoints
# ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prepared(kg: Callable[..., Engine], tmp_path_factory: pytest.TempPathFactory) -> Any:
    eng = kg()
    cache = tmp_path_factory.mktemp("scorer") / "cache.pt"
    data = prepare(eng, questions(), hops=2, max_edges=10_000, cache=cache, progress=False)
    return eng, data, cache


def test_prepare_labels_and_cache(prepared: Any) -> None:
    eng, data, cache = prepared
    assert len(data.examples) == len(questions())
    ex = data.examples[0]  # who directed [Film 00]: the one triple Film 00 -directed_by-> Ava Lind
    nb = data.neighbourhoods[ex["nb"]]
    assert [eng.graph.entities([h])[h]["key"] for h, _, _ in nb.triple_eids(ex["pos"])] == ["Film 00"]
    assert nb.triple_eids(ex["pos"])[0][2] == eid(eng, "Ava Lind")
    # the cache reads back the same data without touching the stores
    again = prepare(eng, questions(), hops=2, max_edges=10_000, cache=cache, progress=False)
    assert [e["pos"].tolist() for e in again.examples] == [e["pos"].tolist() for e in data.examples]
    assert np.array_equal(again.node_vecs, data.node_vecs)


def test_prepare_relation_path_labels(prepared: Any) -> None:
    eng, _, cache = prepared
    # Film 00, 06, 12 and 18 share a director (i % 6) and a genre (i % 3): shortest paths go both ways, the
    # relation path only through the director
    rec = QARecord("which films share the director of [Film 00]", ["Film 00"], ["Film 06", "Film 12", "Film 18"],
                   hops=2, source="path-q", relation_path=["directed_by", "directed_by"])
    data = prepare(eng, [rec], hops=2, max_edges=10_000, progress=False)
    ex = data.examples[0]
    nb = data.neighbourhoods[ex["nb"]]
    names = {ri.type: ri.name for ri in eng.graph.relation_catalog().values()}

    def rels(idx: Any) -> set[str]:
        return {names[r] for _, r, _ in nb.triple_eids(idx)}

    assert {"directed_by", "has_genre"} <= rels(ex["pos"])
    assert rels(ex["train_pos"]) == {"directed_by"} and len(ex["train_pos"]) == 4
    assert data.meta["path_labels"]["path_labelled"] == 1
    # the cache keeps the shortest-path labels; the relation-path labels are made again from the records
    again = prepare(eng, [rec], hops=2, max_edges=10_000, cache=cache.with_name("path.pt"), progress=False)
    again = prepare(eng, [rec], hops=2, max_edges=10_000, cache=cache.with_name("path.pt"), progress=False)
    assert again.examples[0]["train_pos"].tolist() == ex["train_pos"].tolist()
    plain = QARecord(rec.question, rec.topics, rec.answers, hops=2, source="path-q")
    again = prepare(eng, [plain], hops=2, max_edges=10_000, cache=cache.with_name("path.pt"), progress=False)
    assert "train_pos" not in again.examples[0]


TRAIN_K = 2  # triples per question: the small graphs make recall@100 trivially 1


def test_training_beats_an_untrained_model(prepared: Any) -> None:
    eng, data, _ = prepared
    n = len(data.examples)
    train, test = data.subset([i for i in range(n) if i % 4]), data.subset([i for i in range(n) if i % 4 == 0])
    seed_everything(0)
    model = make_model("dde_mlp", eng.embedder.dim, hidden=64, include_initial=True)
    before = dev_recall(model, test, TRAIN_K)
    # no early stopping on the held-out questions: the weights of the last epoch are judged
    model, history, best_epoch, best = train_model(model, train, None, TrainSettings(
        epochs=25, patience=25, lr=3e-3, batch_questions=4, recall_k=TRAIN_K, seed=0, device="cpu"), progress=False)
    after = dev_recall(model, test, TRAIN_K)
    # stated margin: at least +0.2 triple recall@2 on held-out questions over the same model untrained
    assert after >= before + 0.2, (before, after, history[-3:])


def test_training_is_deterministic(prepared: Any) -> None:
    eng, data, _ = prepared
    weights = []
    for _ in range(2):
        seed_everything(3)
        model = make_model("qrgat", eng.embedder.dim, hidden=16, heads=2)
        train_model(model, data, None, TrainSettings(epochs=2, seed=3, batch_questions=8, device="cpu"),
                    progress=False)
        weights.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert torch.equal(weights[0], weights[1])


def short_training(eng: Engine, seed: int, out: Path) -> tuple[dict[str, Any], Any]:
    """Three epochs of DDE+MLP through the public entry point, with sampled negatives (their generator is
    seeded too): ``(checkpoint payload, result)``."""
    res = eng.train_scorer(questions(), model="dde_mlp", out=out, hops=2, model_config={"hidden": 32},
                           settings=TrainSettings(epochs=3, patience=3, min_epochs=1, lr=3e-3, batch_questions=4,
                                                  recall_k=TRAIN_K, neg_samples=8, seed=seed, device="cpu"),
                           progress=False)
    return torch.load(out, map_location="cpu", weights_only=True), res


def test_the_same_seed_gives_the_same_checkpoint(kg: Callable[..., Engine], tmp_path: Path) -> None:
    eng = kg()
    (a, res_a), (b, res_b) = (short_training(eng, 5, tmp_path / f"{i}.ckpt") for i in range(2))
    (c, res_c) = short_training(eng, 6, tmp_path / "other.ckpt")
    assert a["state_dict"].keys() == b["state_dict"].keys() == c["state_dict"].keys()
    assert all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])
    figures = ("loss", f"dev_triple_recall@{TRAIN_K}", "dev_smoothed")
    assert [[e[f] for f in figures] for e in res_a.history] == [[e[f] for f in figures] for e in res_b.history]
    assert (res_a.best_epoch, res_a.best_dev_recall) == (res_b.best_epoch, res_b.best_dev_recall)
    # another seed: other weights and another loss curve
    assert not all(torch.equal(a["state_dict"][k], c["state_dict"][k]) for k in a["state_dict"])
    assert [e["loss"] for e in res_a.history] != [e["loss"] for e in res_c.history]
    # the seed and every training setting are kept in the checkpoint and in the result
    assert a["info"]["seed"] == 5 and c["info"]["seed"] == 6
    assert a["info"]["settings"]["seed"] == 5 and a["info"]["settings"]["neg_samples"] == 8
    assert res_a.to_dict()["settings"] == a["info"]["settings"]


def test_early_stopping_waits_for_min_epochs_and_judges_the_smoothed_figure(prepared: Any) -> None:
    eng, data, _ = prepared
    n = len(data.examples)
    train, dev = data.subset([i for i in range(n) if i % 4]), data.subset([i for i in range(n) if i % 4 == 0])
    seed_everything(0)
    model = make_model("dde_mlp", eng.embedder.dim, hidden=32)
    _, history, best_epoch, best = train_model(model, train, dev, TrainSettings(
        epochs=7, patience=1, min_epochs=5, smooth=3, lr=3e-3, batch_questions=4, recall_k=TRAIN_K, seed=0,
        device="cpu"), progress=False)
    assert len(history) >= 5  # patience 1 alone may stop at epoch 2; never before min_epochs
    raw = [e[f"dev_triple_recall@{TRAIN_K}"] for e in history]
    for i, e in enumerate(history):
        assert e["dev_smoothed"] == pytest.approx(float(np.mean(raw[max(0, i - 2):i + 1])))
    assert best == max(e["dev_smoothed"] for e in history)
    assert history[best_epoch - 1]["dev_smoothed"] == best
    if len(history) < 7:  # stopped early: the epoch before the last had no better smoothed figure
        assert history[-1]["dev_smoothed"] <= best


@pytest.fixture(scope="module")
def checkpoint(kg: Callable[..., Engine], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DDE+MLP trained on the movie questions through the public entry point, written to a file."""
    eng = kg()
    out = tmp_path_factory.mktemp("ckpt") / "scorer.ckpt"
    res = eng.train_scorer(questions(), model="dde_mlp", out=out, hops=2, model_config={"hidden": 64},
                           settings=TrainSettings(epochs=12, patience=12, lr=3e-3, batch_questions=4, recall_k=TRAIN_K,
                                                  device="cpu"), progress=False)
    assert res.checkpoint == str(out) and out.is_file() and res.history
    return out


def test_checkpoint_round_trip_and_refusals(kg: Callable[..., Engine], checkpoint: Path, tmp_path: Path) -> None:
    eng = kg()
    types = sorted(eng.graph.relation_types())
    ck = load_checkpoint(checkpoint, kg=eng.kg, embedding_slug=eng.embedder.slug, emb_dim=eng.embedder.dim,
                         relation_types=types)
    assert ck.model_class == "DDEMLP" and ck.config["hidden"] == 64 and ck.kg == eng.kg and ck.hops == 2
    assert ck.embedding_slug == eng.embedder.slug and ck.relation_fingerprint == relation_fingerprint(types)
    # the same weights: a re-save and re-load scores identically
    again = tmp_path / "again.ckpt"
    save_checkpoint(again, ck.model, kg=ck.kg, embedding_model=ck.embedding_model, embedding_slug=ck.embedding_slug,
                    relation_types=types, hops=ck.hops, max_edges=ck.max_edges)
    ck2 = load_checkpoint(again)
    for a, b in zip(ck.model.state_dict().values(), ck2.model.state_dict().values()):
        assert torch.equal(a, b)

    with pytest.raises(CheckpointError, match="trained on KG .* not on 'other_kg'"):
        load_checkpoint(checkpoint, kg="other_kg")
    assert load_checkpoint(checkpoint, kg="other_kg", allow_other_kg=True).kg == eng.kg
    with pytest.raises(CheckpointError, match="embedding model"):
        load_checkpoint(checkpoint, embedding_slug="some_other_model")
    with pytest.raises(CheckpointError, match="relation vocabulary"):
        load_checkpoint(checkpoint, kg=eng.kg, relation_types=types + ["new_relation"])
    with pytest.raises(CheckpointError, match="no scorer checkpoint"):
        load_checkpoint(tmp_path / "missing.ckpt")
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="not a readable"):
        load_checkpoint(bad)
    # an engine on another KG refuses it at first use, with the same error (a KG that exists: reads of one that
    # does not are refused before, as such)
    other = Engine(eng.config.with_(kg="other_kg_" + eng.kg[-6:], scorer=str(checkpoint)), llm=False,
                   embedder=eng.embedder)
    try:
        with pytest.raises(KGNotFoundError):
            _ = other.scorer
        BulkLoader(other.graph, other.vectors, other.embedder, progress=False).load_records(
            [TripleRecord("Heat", "directed_by", "Michael Mann", 1)], LoadSummary())
        with pytest.raises(CheckpointError, match="trained on KG"):
            _ = other.scorer
    finally:
        other.drop()
        other.close()


def test_service_scores_as_the_benchmark_does(kg: Callable[..., Engine], checkpoint: Path, prepared: Any) -> None:
    """Engine.ask's scorer (features from the engine's stores, entity terms from its projected table) gives a
    checkpoint the same scores as the trainer's evaluation (prepared features, the benchmark's path)."""
    from engine.scoring.select import adaptive_top_p
    from engine.scoring.evaluate import score_examples

    eng = kg(scorer=str(checkpoint))
    _, data, _ = prepared
    svc = eng.scorer
    s = eng.config.scoring
    for ex in data.examples[::9]:
        nb = data.neighbourhoods[ex["nb"]]
        q_emb = data.q_emb[ex["q"]]
        got = svc.score(data.questions[ex["q"]], [int(e) for e in nb.nodes[nb.anchors]], q_emb=q_emb, hops=ex["hops"],
                        max_edges=10_000)
        (logits, _, _), = score_examples(svc.model, data, [ex])
        sel = adaptive_top_p(torch.from_numpy(logits), p=s.p, tau=s.tau, k_min=s.k_min, k_max=s.k_max).numpy()
        want = torch.sigmoid(torch.from_numpy(logits[sel])).numpy()
        assert got.report.edges == nb.num_edges
        assert np.allclose([t.score for t in got.triples], want, atol=1e-5)
        heads = [t.head.eid for t in got.triples]
        assert heads == [int(nb.nodes[nb.heads[i]]) for i in sel]
    # the service projected each entity once, into its table
    assert 0 < len(svc._term_rows) <= svc._terms_used


def test_answer_candidates_prefer_path_ends() -> None:
    # anchor 0 -> film 1 (0.9) -> director 2 (0.8); a weak side triple 1 -> 3 (0.1)
    heads, tails = np.array([1, 1, 1]), np.array([0, 2, 3])
    conf = np.array([0.9, 0.8, 0.1])
    cands = answer_candidates(heads, tails, conf, [0, 1, 2], [0])
    assert cands[0][0] == 2 and cands[0][1] == pytest.approx(0.72)
    assert dict(cands)[1] < 0.2  # the film leads on to the director
    # a relation walk that ends on the side entity 3 and not on the director turns the order round
    prior = np.array([0.0, 0.05, 0.01, 0.95])
    walked = answer_candidates(heads, tails, conf, [0, 1, 2], [0], prior=prior)
    assert walked[0][0] == 3 and walked[0][1] == pytest.approx(0.9 * 0.1 * 0.95)
    assert dict(walked)[2] == pytest.approx(0.72 * 0.01)


# ---------------------------------------------------------------------------------------------------------
# Engine.ask with and without a checkpoint
# ---------------------------------------------------------------------------------------------------------

PATTERN = {"triples": [["Film 03", "directed_by", "UNKNOWN director 1"]]}


def test_ask_without_checkpoint_is_unchanged(kg: Callable[..., Engine]) -> None:
    eng = kg()
    ans = eng.ask("who directed Film 03", pattern=PATTERN, k=1)
    assert ans.ok and ans.scored is None and ans.answer_source == "pattern"
    assert [a.entity.name for a in ans.answers] == ["Di Park"]
    with pytest.raises(ConfigError):  # neither LLM nor pattern nor scorer
        eng.ask("who directed [Film 03]")
    with pytest.raises(ConfigError, match="no scorer checkpoint"):
        eng.score("who directed [Film 03]")


def test_ask_with_checkpoint_adds_scored_evidence(kg: Callable[..., Engine], checkpoint: Path) -> None:
    eng = kg(scorer=str(checkpoint))
    ans = eng.ask("who directed Film 03", pattern=PATTERN, k=1)
    assert ans.ok and ans.answer_source == "pattern" and ans.text.startswith("Di Park")
    sc = ans.scored
    assert sc is not None and sc.triples and sc.model == "DDEMLP"
    # anchors are the matched subgraph's entities; triples best first with QSRAG's confidence lines
    assert {a.name for a in sc.anchors} == {"Film 03", "Di Park"}
    scores = [t.score for t in sc.triples]
    assert scores == sorted(scores, reverse=True) and all(0.0 <= s <= 1.0 for s in scores)
    assert len(sc.triples) <= eng.config.scoring.k_max
    assert "[confidence: " in ans.evidence and 'graph [1]: [("Film 03", "directed_by", "Di Park")]' in ans.evidence
    assert "scoring" in ans.timings and "scoring_fetch" in ans.timings
    data = ans.to_dict()
    assert data["scored"]["neighbourhood"]["edges"] == sc.report.edges and data["answer_source"] == "pattern"


def test_ask_falls_back_to_the_scorer(kg: Callable[..., Engine], checkpoint: Path) -> None:
    eng = kg(scorer=str(checkpoint))
    # neither LLM nor pattern: the scorer retrieves from the linked entity and extracts the answer
    ans = eng.ask("who directed [Film 05]")
    assert ans.ok and ans.answer_source == "scorer" and ans.pattern is None
    assert [x.name for x in ans.scored.linked] == ["Film 05"] and ans.scored.linked[0].distance < 0.05
    names = [a.entity.name for a in ans.scored_answers]
    assert "Flo Brandt" in names[:3], names[:5]
    assert any("extracted from the triple scorer" in w for w in ans.warnings)


def test_ask_with_llm_reads_scored_triples(kg: Callable[..., Engine], checkpoint: Path, llm_server: Any) -> None:
    llm_server.reply('{"triples": [["Film 03", "directed_by", "UNKNOWN director 1"]]}').reply("Di Park")
    eng = kg(llm=LLMConfig(base_url=llm_server.base_url, model="test-model", max_retries=1, timeout=10.0),
             scorer=str(checkpoint))
    ans = eng.ask("who directed Film 03", k=1)
    assert ans.ok and ans.answer_source == "llm" and ans.text == "Di Park"
    prompt = llm_server.prompts[-1]
    assert "scored triples (confidence from the triple scorer):" in prompt and "[confidence: " in prompt
    assert ans.scored.triples[0].as_tuple()[0] in prompt


def test_read_qa_formats(tmp_path: Path) -> None:
    metaqa = tmp_path / "qa.txt"
    metaqa.write_text("who directed [Heat]\tMichael Mann\nwhat did [A] and [B] do\tx|y\n", encoding="utf-8")
    recs = read_qa(metaqa)
    assert recs[0].topics == ["Heat"] and recs[0].answers == ["Michael Mann"] and recs[1].topics == ["A", "B"]
    jl = tmp_path / "qa.jsonl"
    jl.write_text('{"question": "q", "topics": ["Heat"], "answers": ["Michael Mann"], '
                  '"triples": [["Heat", "directed_by", "Michael Mann"]]}\n', encoding="utf-8")
    assert read_qa(jl)[0].triples == [("Heat", "directed_by", "Michael Mann")]
    paths = tmp_path / "paths.txt"
    paths.write_text("directed_by\n\n", encoding="utf-8")
    recs = read_qa(metaqa, relation_paths=paths)
    assert recs[0].relation_path == ["directed_by"] and recs[1].relation_path is None
    assert read_qa(metaqa, relation_paths=[["a", "b"], None])[0].relation_path == ["a", "b"]
    jl.write_text('{"question": "q", "topics": ["Heat"], "answers": ["x"], "relation_path": ["r1", "r2"]}\n',
                  encoding="utf-8")
    assert read_qa(jl)[0].relation_path == ["r1", "r2"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "topics": []}\n', encoding="utf-8")
    from engine import MalformedInputError

    with pytest.raises(MalformedInputError, match="bad.jsonl:1"):
        read_qa(bad)
