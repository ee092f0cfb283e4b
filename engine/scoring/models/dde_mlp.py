"""SubgraphRAG's triple scorer: an MLP over text embeddings and DDE (the paper and DDE:
:mod:`engine.scoring.models.dde`)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from engine.scoring.models.dde import DDE, QueryGatedDDE, log_scale
from engine.scoring.models.query_walk import QueryWalk
from engine.scoring.models.triple_scorer import TripleScorer
from engine.scoring.question_graph import BatchedGraphs, QuestionGraph

__all__ = ["DDEMLP"]


class DDEMLP(TripleScorer):
    r"""SubgraphRAG triple scorer: an MLP classifier on text embeddings plus Directional Distance Encoding.

    .. math::
        \mathrm{score}(h, r, t \mid q) = \mathrm{MLP}([\mathbf{z}_q \| \mathbf{z}_h \| \mathbf{z}_r \| \mathbf{z}_t
        \| \mathbf{s}_h \| \mathbf{s}_t])

    with ``MLP = Linear(4d + 2k -> hidden) -> ReLU -> Dropout -> [Linear(hidden -> hidden) -> ReLU -> Dropout]
    * (num_layers - 1) -> Linear(hidden -> 1)`` and ``s`` the :class:`~engine.scoring.DDE` features
    (``k = dde.out_dim`` plus the gated DDE's, 8 with the defaults). Entities without text share one learned vector
    (``nameless``), as the reference code's ``nn.Embedding(1, d)``.

    The first layer is evaluated by blocks, exactly: ``W [z_q||z_h||z_r||z_t||s_h||s_t] =
    W_q z_q + (W_h z_h + W_sh s_h) + W_r z_r + (W_t z_t + W_st s_t)``; the head/tail terms are computed once
    per node and the query term once per relation row, then gathered per triple. The parameters are the
    plain ``Linear(4d + 2k, hidden)`` of the reference; only the arithmetic is cheaper (nodes instead of
    triples, and no ``[E, 4d + 2k]`` input is ever built).

    Ablations of the paper: ``dde_rounds=0, include_initial=False`` is the text-only MLP;
    ``dde_rounds=0, include_initial=True`` is MLP + one-hot topic indicator.

    Args:
        emb_dim: text embedding size d (entities, relations and question share it).
        hidden: hidden width (default d, as the reference).
        num_layers: number of hidden layers (default 1).
        dropout: dropout after each hidden ReLU (default 0.0: the reference has none).
        dde_rounds / dde_reverse_rounds / include_initial / dde_mixed: see :class:`~engine.scoring.DDE`
            (``dde_mixed`` is its ``mixed``: the direction-changing rounds a one-way KG needs).
        dde_log: feed the MLP :func:`~engine.scoring.models.dde.log_scale` of the DDE (default False: the raw
            shares, as the paper). Three hops out the raw shares are 0.001-0.01, too small for the MLP to
            learn from in a bounded number of steps.
        dde_gated / gate_dim: append :class:`~engine.scoring.models.dde.QueryGatedDDE` features (DDE rounds whose
            messages are gated by a learned question-relation score, ``gate_dim`` wide; default off): the
            structure then says *which relations* lead from the topic to an entity, not only how far.
        walk / walk_rounds / walk_gate_dim: the question's relation walk
        (:class:`~engine.scoring.models.query_walk.QueryWalk`,
            default off): where a max-product walk of learned (round, direction, relation) gates from the topic
            ends, as two more DDE-like node features, and which triples it crosses at each round, as
            ``walk_rounds + 1`` triple features read by a ``Linear(walk_rounds + 1 -> hidden)`` beside the first
            layer.

    Shapes:
        - **input:** a :class:`QuestionGraph` or :class:`BatchedGraphs` (``E`` triples in total)
        - **output:** logits ``[E]``
    """

    def __init__(
        self,
        emb_dim: int,
        hidden: int | None = None,
        num_layers: int = 1,
        dropout: float = 0.0,
        dde_rounds: int = 2,
        dde_reverse_rounds: int | None = None,
        include_initial: bool = False,
        dde_mixed: bool = False,
        dde_log: bool = False,
        dde_gated: bool = False,
        gate_dim: int = 32,
        walk: bool = False,
        walk_rounds: int = 3,
        walk_gate_dim: int = 32,
    ) -> None:
        super().__init__()
        hidden = emb_dim if hidden is None else hidden
        if num_layers < 1:
            raise ValueError("num_layers must be >= 1")
        self._remember_config(emb_dim=emb_dim, hidden=hidden, num_layers=num_layers, dropout=dropout,
                              dde_rounds=dde_rounds, dde_reverse_rounds=dde_reverse_rounds,
                              include_initial=include_initial, dde_mixed=dde_mixed, dde_log=dde_log,
                              dde_gated=dde_gated, gate_dim=gate_dim, walk=walk, walk_rounds=walk_rounds,
                              walk_gate_dim=walk_gate_dim)
        self.emb_dim = emb_dim
        self.dde = DDE(dde_rounds, dde_reverse_rounds, include_initial, mixed=dde_mixed)
        self.dde_log = dde_log
        self.gated = QueryGatedDDE(emb_dim, max(dde_rounds, 1), gate_dim) if dde_gated else None
        self.walk = QueryWalk(emb_dim, walk_rounds, walk_gate_dim) if walk else None
        self.struct_dim = (self.dde.out_dim + (self.gated.out_dim if self.gated is not None else 0)
                           + (QueryWalk.node_dim if self.walk is not None else 0))
        self.nameless = nn.Parameter(torch.empty(emb_dim))
        self.first = nn.Linear(4 * emb_dim + 2 * self.struct_dim, hidden)
        self.hidden_layers = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(num_layers - 1))
        self.out = nn.Linear(hidden, 1)
        self.walk_edge = nn.Linear(self.walk.edge_dim, hidden, bias=False) if self.walk is not None else None
        #: ``a^(L)`` of the last forward, ``[N]`` (the auxiliary loss and answer extraction read it); None
        #: without a walk
        self.walk_end: torch.Tensor | None = None
        self.dropout = nn.Dropout(dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # About unit norm, like the normalized text embeddings it stands in for.
        nn.init.normal_(self.nameless, std=1.0 / math.sqrt(self.emb_dim))
        for lin in [self.first, *self.hidden_layers, self.out]:
            lin.reset_parameters()
        if self.gated is not None:
            self.gated.reset_parameters()
        self._reset_walk()

    def node_features(self, batch: BatchedGraphs) -> torch.Tensor:
        """Text embeddings with the shared learned vector in the rows of nameless entities: ``[N, d]``."""
        emb = batch.node_emb.to(self.nameless.dtype)
        return torch.where(batch.has_text.unsqueeze(1), emb, self.nameless)

    def structure(self, b: BatchedGraphs, dtype: torch.dtype) -> torch.Tensor:
        """The DDE of every node as the MLP reads it (log-scaled with ``dde_log``): ``[N, k]``."""
        return self._structure(b, dtype)[0]

    def _structure(self, b: BatchedGraphs, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(node structure [N, k], the walk's triple features [E, walk_rounds + 1] or None)``."""
        s = self.dde(b.num_nodes, b.edge_index, b.is_topic, dtype)
        s = log_scale(s) if self.dde_log else s
        if self.gated is not None:
            s = torch.cat([s, self.gated(b, dtype)], dim=1)
        node, edge = self._walk_features(b, dtype)
        return (s, None) if node is None else (torch.cat([s, node], dim=1), edge)

    def forward(self, graph: QuestionGraph | BatchedGraphs, edges: torch.Tensor | None = None) -> torch.Tensor:
        """Logits ``[E]``; with ``edges`` (indices into the batch's triples) only those triples' ``[len(edges)]``.

        The DDE always runs over the whole graph (it is the structure); with ``edges`` the text and MLP terms
        are computed only for the nodes those triples touch, which is what makes training on sampled
        negatives cheap (the per-node projection is most of an epoch's cost)."""
        b = self._prepare(graph)
        d, k = self.emb_dim, self.struct_dim
        dtype = self.nameless.dtype
        s, walk_edge = self._structure(b, dtype)
        w = self.first.weight
        w_q, w_h, w_r, w_t = w[:, :d], w[:, d:2 * d], w[:, 2 * d:3 * d], w[:, 3 * d:4 * d]
        w_sh, w_st = w[:, 4 * d:4 * d + k], w[:, 4 * d + k:]
        head, tail, edge_rel = b.edge_index[0], b.edge_index[1], b.edge_rel
        text = self._table_terms(b)
        if edges is not None:
            head, tail = head.index_select(0, edges), tail.index_select(0, edges)
            edge_rel = edge_rel.index_select(0, edges)
            walk_edge = walk_edge.index_select(0, edges) if walk_edge is not None else None
            nodes, inv = torch.unique(torch.cat([head, tail]), return_inverse=True)
            head, tail = inv[:edges.shape[0]], inv[edges.shape[0]:]
            s = s.index_select(0, nodes)
            has_text = b.has_text.index_select(0, nodes)
            emb = b.node_emb.index_select(0, nodes).to(dtype)
            text = text.index_select(0, nodes) if text is not None else None
        else:
            has_text, emb = b.has_text, b.node_emb.to(dtype)
        if text is None:
            # One matmul for both roles of every node: [N, d + k] -> [N, 2 * hidden].
            w_node = torch.cat([torch.cat([w_h, w_sh], 1), torch.cat([w_t, w_st], 1)], 0)
            x = torch.where(has_text.unsqueeze(1), emb, self.nameless)
            node = F.linear(torch.cat([x, s], 1), w_node)
        else:
            # text terms from the entity table (the shared vector's where there is no text) + the DDE terms
            node = text.add_(F.linear(s, torch.cat([w_sh, w_st], 0))) if k else text
        as_head, as_tail = node.chunk(2, dim=1)
        # Each relation row belongs to one question, so the query term (and the bias) folds into it.
        query = F.linear(b.q_emb.to(dtype), w_q, self.first.bias)
        rel = F.linear(b.rel_emb.to(dtype), w_r).add_(query.index_select(0, b.rel_batch))
        h = as_head.index_select(0, head).add_(as_tail.index_select(0, tail)).add_(rel.index_select(0, edge_rel))
        if walk_edge is not None:
            h = h.add_(self.walk_edge(walk_edge))  # type: ignore[misc]
        return self._rest(h)

    def entity_terms(self, emb: torch.Tensor) -> torch.Tensor:
        """``[W_h e || W_t e]``: an entity's text term in the head and the tail role, ``[M, 2 * hidden]``."""
        d, w = self.emb_dim, self.first.weight
        return F.linear(emb, torch.cat([w[:, d:2 * d], w[:, 3 * d:4 * d]], 0))

    def _rest(self, h: torch.Tensor) -> torch.Tensor:
        h = self.dropout(F.relu_(h))  # h is always a fresh tensor here
        for lin in self.hidden_layers:
            h = self.dropout(F.relu_(lin(h)))
        return self.out(h).squeeze(-1)

    def triple_inputs(self, graph: QuestionGraph | BatchedGraphs) -> torch.Tensor:
        """The literal MLP input ``[E, 4d + 2k (+ walk_rounds + 1)]`` (for inspection and tests; ``forward``
        never builds it); the walk's triple features, with ``walk``, come last."""
        b = self._prepare(graph)
        x = self.node_features(b)
        s, walk_edge = self._structure(b, x.dtype)
        head, tail = b.edge_index[0], b.edge_index[1]
        parts = [b.q_emb.to(x.dtype)[b.triple_batch], x[head], b.rel_emb.to(x.dtype)[b.edge_rel], x[tail],
                 s[head], s[tail]]
        return torch.cat(parts + ([walk_edge] if walk_edge is not None else []), dim=1)

    def forward_dense(self, graph: QuestionGraph | BatchedGraphs) -> torch.Tensor:
        """The same logits as :meth:`forward`, computed from :meth:`triple_inputs` as the reference does."""
        x = self.triple_inputs(graph)
        if self.walk_edge is None:
            return self._rest(self.first(x))
        m = self.walk.edge_dim  # type: ignore[union-attr]
        return self._rest(self.first(x[:, :-m]) + self.walk_edge(x[:, -m:]))
