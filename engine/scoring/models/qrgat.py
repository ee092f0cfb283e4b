"""QSRAG's triple scorer: query-relational graph attention (QR-GAT; Xu, Guo, Zhang, Fu, "Query-Aware Graph
Attention for Precise Subgraph Retrieval in Knowledge-Augmented Reasoning", §4)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal, cast

import torch
import torch.nn.functional as F
from torch import nn

from engine.scoring.models.dde import DDE, QueryGatedDDE
from engine.scoring.models.query_walk import QueryWalk
from engine.scoring.models.triple_scorer import TripleScorer
from engine.scoring.question_graph import BatchedGraphs, QuestionGraph

__all__ = ["QRGAT", "QRGATConv"]

_pyg_softmax: Callable[..., torch.Tensor] | None = None


def segment_softmax(logits: torch.Tensor, index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """Softmax of ``logits [E, H]`` over the edges that share ``index`` (their receiving node)."""
    global _pyg_softmax
    if _pyg_softmax is None:  # torch_geometric takes seconds to import: only when a QR-GAT first runs
        from torch_geometric.utils import softmax

        _pyg_softmax = softmax
    return _pyg_softmax(logits, index, num_nodes=num_nodes)


class QRGATConv(nn.Module):
    r"""One query-relational graph attention layer (QR-GAT, the QSRAG paper's equations in §4.2).

    For an edge ``j -> i`` with relation embedding ``r_ij`` and question embedding ``q``:

    .. math::
        \mathbf{z}_i = W_s \mathbf{h}_i, \qquad \mathbf{z}_j = W_t \mathbf{h}_j

        \alpha_{ij} = \mathrm{softmax}_j\big(\mathbf{a}^\top \mathrm{LeakyReLU}(\mathbf{z}_i + \mathbf{z}_j
        + W_e \mathbf{r}_{ij}) + (W_q \mathbf{q})^\top (W_r \mathbf{r}_{ij})\big)

        \mathbf{h}'_i = \mathrm{LayerNorm}\big(\big\|_{k=1}^{H} \textstyle\sum_{j \in \mathcal{N}(i)}
        \alpha^{k}_{ij} \mathbf{z}^{k}_j\big)

    per head ``k`` (each head has its own slice of ``W_s, W_t, W_e, W_q, W_r`` and of ``a``). The softmax
    runs over the incoming edges of ``i``. ``query_attn=False`` drops the query term (the paper's
    "w/o Query-Attn"). Relation-level terms (``W_e r``, ``(W_q q)^T W_r r``) are computed once per relation
    row and gathered per edge.

    Shapes:
        - **input:** node features ``[N, in_dim]`` (or the projections ``(z_s, z_t)``, each ``[N, H * C]``),
          ``edge_index [2, E]`` (row 0 = sender ``j``, row 1 = receiver ``i``), ``edge_rel [E]``,
          ``rel_emb [R, rel_dim]``, ``rel_batch [R]``, ``q_emb [B, q_dim]``
        - **output:** ``[N, H * C]`` (and the attention ``[E, H]`` with ``return_attention=True``)
    """

    def __init__(
        self,
        in_dim: int,
        rel_dim: int,
        q_dim: int,
        heads: int = 4,
        head_dim: int = 64,
        negative_slope: float = 0.2,
        attn_dropout: float = 0.0,
        query_attn: bool = True,
    ) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.negative_slope = negative_slope
        self.query_attn = query_attn
        width = heads * head_dim
        self.lin_s = nn.Linear(in_dim, width, bias=False)  # W_s, on the receiver i
        self.lin_t = nn.Linear(in_dim, width, bias=False)  # W_t, on the sender j; also the message
        self.lin_e = nn.Linear(rel_dim, width, bias=False)
        self.att = nn.Parameter(torch.empty(heads, head_dim))
        self.lin_q = nn.Linear(q_dim, width, bias=False) if query_attn else None
        self.lin_r = nn.Linear(rel_dim, width, bias=False) if query_attn else None
        self.norm = nn.LayerNorm(width)
        self.attn_dropout = nn.Dropout(attn_dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.lin_s, self.lin_t, self.lin_e, self.lin_q, self.lin_r):
            if lin is not None:
                nn.init.xavier_uniform_(lin.weight)
        nn.init.xavier_uniform_(self.att.view(1, self.heads, self.head_dim))
        self.norm.reset_parameters()

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.lin_s(x), self.lin_t(x)

    def forward(
        self,
        x: torch.Tensor | tuple[torch.Tensor, torch.Tensor],
        edge_index: torch.Tensor,
        edge_rel: torch.Tensor,
        rel_emb: torch.Tensor,
        rel_batch: torch.Tensor,
        q_emb: torch.Tensor,
        return_attention: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        z_s, z_t = x if isinstance(x, tuple) else self.project(x)
        n, hh, c = z_s.shape[0], self.heads, self.head_dim
        src, dst = edge_index[0], edge_index[1]
        z_j = z_t.view(n, hh, c).index_select(0, src)  # [E, H, C]
        pre = z_s.view(n, hh, c).index_select(0, dst)
        pre.add_(z_j).add_(self.lin_e(rel_emb).view(-1, hh, c).index_select(0, edge_rel))
        logits = (F.leaky_relu_(pre, self.negative_slope) * self.att).sum(-1)  # [E, H]
        if self.lin_q is not None and self.lin_r is not None:
            # Each relation row belongs to one question: the bilinear query term is a per-row scalar per head.
            q_proj = self.lin_q(q_emb).view(-1, hh, c).index_select(0, rel_batch)
            plus = (q_proj * self.lin_r(rel_emb).view(-1, hh, c)).sum(-1)  # [R, H]
            logits = logits + plus.index_select(0, edge_rel)
        alpha = segment_softmax(logits, dst, n)
        msg = z_j.mul_(self.attn_dropout(alpha).unsqueeze(-1)).view(-1, hh * c)
        out = self.norm(msg.new_zeros(n, hh * c).index_add_(0, dst, msg))  # 2-D index_add_: the fast path
        return (out, alpha) if return_attention else out

    def extra_repr(self) -> str:
        return f"heads={self.heads}, head_dim={self.head_dim}, query_attn={self.query_attn}"


class QRGAT(TripleScorer):
    r"""QSRAG's triple scorer: bidirectional QR-GAT encoder and a two-layer MLP (the QSRAG paper, §4).

    .. math::
        \mathbf{h}^{(0)}_i = \mathrm{Dropout}([\mathbf{e}_i \| \mathbf{q} \| \mathbf{p}_i]), \qquad
        \mathbf{h}_i = [\mathbf{h}^{\rightarrow (L)}_i \| \mathbf{h}^{\leftarrow (L)}_i]

        s(h, r, t) = W_2\, \mathrm{ReLU}(W_1 [\mathbf{q} \| \mathbf{h}_h \| \mathbf{r} \| \mathbf{h}_t])

    ``p_i`` is, as in the paper, the one-hot topic indicator (``[1, 0]`` topic, ``[0, 1]`` other);
    ``positional="dde"`` uses SubgraphRAG's DDE features with that indicator prepended instead, and
    ``"none"`` drops it. The forward stack passes messages head -> tail, the reverse stack tail -> head;
    each has ``num_layers`` :class:`QRGATConv` layers with ``heads`` heads of ``hidden // heads``
    channels, with dropout between layers.

    Choices the paper leaves open, all configurable:
        - widths, depth, heads, dropout: defaults ``hidden=256``, ``num_layers=2``, ``heads=4``,
          ``dropout=0.1``; the scorer's hidden width defaults to ``hidden``, with the same dropout after its ReLU.
        - ``add_self_loops=True``: every node also attends to itself through a learned "self" relation
          vector, as in GAT/GATv2, which the paper builds on; without it a node's own text never reaches its
          representation (the scorer sees ``h_h`` and ``h_t``, not ``e_h`` and ``e_t``).
        - no residual connection and no nonlinearity between layers (none is stated).
        - ``cross_directions=False``: the two stacks run apart and meet only in ``h = [h-> || h<-]``. With
          ``True`` every layer after the first reads both stacks' previous outputs (``[h-> || h<-]``), so a
          path that changes direction is followed: on a KG that stores one direction only (MetaQA:
          film -> director) the films sharing the topic film's director are two hops away along
          ``topic -> director <- film``, which neither stack alone can walk. The paper's Freebase pools store
          a relation and its inverse, so its stacks need no crossing there.

    ``dde_gated=True`` appends :class:`~engine.scoring.models.dde.QueryGatedDDE` features to ``p`` (DDE rounds gated
    by a learned question-relation score, ``gate_dim`` wide): which relations lead from the topic to a node.
    ``walk=True`` appends the question's relation walk (:class:`~engine.scoring.models.query_walk.QueryWalk`,
    ``walk_rounds`` rounds): where it ends, to ``p``, and which triples it crosses, to the scorer's first layer (a
    ``Linear(walk_rounds + 1 -> score_hidden)`` beside ``W_1``).

    Ablations (paper §5, Table 5): ``query_init=False`` removes ``q`` from ``h^(0)``, ``query_attn=False``
    the bilinear attention term, ``query_score=False`` the ``q`` in the scorer.

    In eval mode (or with ``dropout=0``) the first layer and the scorer's first layer are computed by blocks
    (``W [e || q || p] = W_e e + W_q q + W_p p``: the query part once per question, the node part once per
    node for all four first-layer projections in one matmul), which gives the same numbers as the literal
    formula at a fraction of the cost.

    Shapes:
        - **input:** a :class:`QuestionGraph` or :class:`BatchedGraphs` (``E`` triples in total)
        - **output:** logits ``[E]``
    """

    def __init__(
        self,
        emb_dim: int,
        hidden: int = 256,
        num_layers: int = 2,
        heads: int = 4,
        dropout: float = 0.1,
        attn_dropout: float = 0.0,
        score_hidden: int | None = None,
        negative_slope: float = 0.2,
        positional: Literal["topic", "dde", "none"] = "topic",
        dde_rounds: int = 2,
        add_self_loops: bool = True,
        cross_directions: bool = False,
        dde_mixed: bool = False,
        query_init: bool = True,
        query_attn: bool = True,
        query_score: bool = True,
        dde_gated: bool = False,
        gate_dim: int = 32,
        walk: bool = False,
        walk_rounds: int = 3,
        walk_gate_dim: int = 32,
    ) -> None:
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
        if num_layers < 1:
            raise ValueError("num_layers must be >= 1")
        if positional not in ("topic", "dde", "none"):
            raise ValueError(f"positional must be 'topic', 'dde' or 'none', not {positional!r}")
        score_hidden = hidden if score_hidden is None else score_hidden
        self._remember_config(emb_dim=emb_dim, hidden=hidden, num_layers=num_layers, heads=heads, dropout=dropout,
                              attn_dropout=attn_dropout, score_hidden=score_hidden, negative_slope=negative_slope,
                              positional=positional, dde_rounds=dde_rounds, add_self_loops=add_self_loops,
                              cross_directions=cross_directions, dde_mixed=dde_mixed, query_init=query_init,
                              query_attn=query_attn, query_score=query_score,
                              dde_gated=dde_gated, gate_dim=gate_dim, walk=walk, walk_rounds=walk_rounds,
                              walk_gate_dim=walk_gate_dim)
        self.emb_dim, self.hidden = emb_dim, hidden
        self.positional = positional
        self.query_init, self.query_score = query_init, query_score
        self.cross_directions = cross_directions
        self.dde = DDE(dde_rounds, include_initial=True, mixed=dde_mixed) if positional == "dde" else None
        self.pos_dim = {"topic": 2, "dde": self.dde.out_dim if self.dde else 0, "none": 0}[positional]
        self.gated = QueryGatedDDE(emb_dim, max(dde_rounds, 1), gate_dim) if dde_gated else None
        if self.gated is not None:
            self.pos_dim += self.gated.out_dim
        self.walk = QueryWalk(emb_dim, walk_rounds, walk_gate_dim) if walk else None
        if self.walk is not None:
            self.pos_dim += QueryWalk.node_dim
        in_dim = emb_dim + (emb_dim if query_init else 0) + self.pos_dim

        def stack() -> nn.ModuleList:
            return nn.ModuleList(
                QRGATConv(in_dim if i == 0 else (2 * hidden if cross_directions else hidden), emb_dim, emb_dim, heads,
                          hidden // heads, negative_slope, attn_dropout, query_attn)
                for i in range(num_layers))

        self.forward_convs = stack()
        self.reverse_convs = stack()
        self.nameless = nn.Parameter(torch.empty(emb_dim))
        self.self_rel = nn.Parameter(torch.empty(emb_dim)) if add_self_loops else None
        self.score1 = nn.Linear((emb_dim if query_score else 0) + 4 * hidden + emb_dim, score_hidden)
        self.score2 = nn.Linear(score_hidden, 1)
        self.walk_edge = nn.Linear(self.walk.edge_dim, score_hidden, bias=False) if self.walk is not None else None
        #: ``a^(L)`` of the last forward, ``[N]`` (the auxiliary loss and answer extraction read it); None
        #: without a walk
        self.walk_end: torch.Tensor | None = None
        self.dropout = nn.Dropout(dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        std = 1.0 / math.sqrt(self.emb_dim)  # about unit norm, like normalized text embeddings
        nn.init.normal_(self.nameless, std=std)
        if self.self_rel is not None:
            nn.init.normal_(self.self_rel, std=std)
        for conv in [*self.forward_convs, *self.reverse_convs]:
            conv.reset_parameters()
        if self.gated is not None:
            self.gated.reset_parameters()
        self._reset_walk()
        self.score1.reset_parameters()
        self.score2.reset_parameters()

    # -- inputs -------------------------------------------------------------------------------------------

    def node_features(self, batch: BatchedGraphs) -> torch.Tensor:
        """Entity text embeddings with the shared learned vector for nameless entities: ``[N, d]``."""
        emb = batch.node_emb.to(self.nameless.dtype)
        return torch.where(batch.has_text.unsqueeze(1), emb, self.nameless)

    def position(self, batch: BatchedGraphs) -> torch.Tensor:
        """``p``: ``[N, pos_dim]`` (with ``dde_gated``, the gated DDE features appended; with ``walk``, the
        walk's node features)."""
        return self._positions(batch)[0]

    def _positions(self, batch: BatchedGraphs) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(p [N, pos_dim], the walk's triple features [E, walk_rounds + 1] or None)``."""
        p = self._position(batch)
        if self.gated is not None:
            p = torch.cat([p, self.gated(batch, self.nameless.dtype)], dim=1)
        node, edge = self._walk_features(batch, self.nameless.dtype)
        return (p, None) if node is None else (torch.cat([p, node], dim=1), edge)

    def _position(self, batch: BatchedGraphs) -> torch.Tensor:
        dtype = self.nameless.dtype
        if self.dde is not None:
            return self.dde(batch.num_nodes, batch.edge_index, batch.is_topic, dtype)
        if self.positional == "topic":
            return torch.stack([batch.is_topic, ~batch.is_topic], dim=1).to(dtype)
        return batch.node_emb.new_zeros(batch.num_nodes, 0, dtype=dtype)

    def _first_projections(self, x: torch.Tensor | None, p: torch.Tensor, b: BatchedGraphs,
                           dense: bool) -> list[torch.Tensor]:
        """``[z_s, z_t]`` of the first forward layer, then of the first reverse layer (each ``[N, hidden]``).
        ``x``: :meth:`node_features` of ``b``, or None to make them only where they are read (not when the
        attached entity table gives the text terms)."""
        lins = self._first_linears()
        dtype = self.nameless.dtype
        q = b.q_emb.to(dtype)
        text = None if dense else self._table_terms(b)
        if x is None and text is None:
            x = self.node_features(b)
        if dense:
            assert x is not None
            parts = [x, q.index_select(0, b.node_batch)] if self.query_init else [x]
            h0 = self.dropout(torch.cat([*parts, p], dim=1))
            return [lin(h0) for lin in lins]
        d = self.emb_dim
        w = torch.cat([lin.weight for lin in lins], 0)  # [4 * hidden, in_dim]
        w_pos = w[:, w.shape[1] - self.pos_dim:]
        if text is None:
            assert x is not None
            z = F.linear(torch.cat([x, p], 1), torch.cat([w[:, :d], w_pos], 1))
        else:
            # text terms from the entity table (the shared vector's where there is no text) + the position terms
            z = text.add_(F.linear(p, w_pos)) if self.pos_dim else text
        if self.query_init:
            zq = F.linear(q, w[:, d:2 * d])
            z = z.add_(zq) if b.num_graphs == 1 else z.add_(zq.index_select(0, b.node_batch))
        return list(z.chunk(4, dim=1))

    def _first_linears(self) -> list[nn.Linear]:
        """``W_s``, ``W_t`` of the first layer of the forward stack, then of the reverse one (a ModuleList's items
        are typed as plain Modules: cast to the layer they are)."""
        firsts = [cast(QRGATConv, convs[0]) for convs in (self.forward_convs, self.reverse_convs)]
        return [m for conv in firsts for m in (conv.lin_s, conv.lin_t)]

    def entity_terms(self, emb: torch.Tensor) -> torch.Tensor:
        """An entity's text term in the four first-layer projections (``W_s``, ``W_t`` of both stacks),
        ``[M, 4 * hidden]``."""
        lins = self._first_linears()
        return F.linear(emb, torch.cat([lin.weight[:, :self.emb_dim] for lin in lins], 0))

    # -- forward ------------------------------------------------------------------------------------------

    def forward(self, graph: QuestionGraph | BatchedGraphs, return_attention: bool = False,
                edges: torch.Tensor | None = None,
                ) -> torch.Tensor | tuple[torch.Tensor, dict[str, list[tuple[torch.Tensor, torch.Tensor]]]]:
        """Logits ``[E]``; with ``return_attention=True`` also ``{"forward"|"reverse": [(edge_index, alpha)]}``,
        one entry per layer, where ``edge_index`` is the message-passing graph (self-loops included) and
        ``alpha`` its ``[E', H]`` attention. With ``edges`` (indices into the batch's triples) only those
        triples are scored (message passing still runs over the whole graph)."""
        b = self._prepare(graph)
        p, walk_edge = self._positions(b)
        dense = self.training and self.dropout.p > 0
        z = self._first_projections(self.node_features(b) if dense else None, p, b, dense)
        dtype, device = self.nameless.dtype, self.nameless.device

        edge_index, edge_rel, rel_emb, rel_batch = b.edge_index, b.edge_rel, b.rel_emb.to(dtype), b.rel_batch
        if self.self_rel is not None:
            loops = torch.arange(b.num_nodes, device=device)
            edge_index = torch.cat([edge_index, loops.expand(2, -1)], dim=1)
            edge_rel = torch.cat([edge_rel, b.rel_emb.shape[0] + b.node_batch])
            rel_emb = torch.cat([rel_emb, self.self_rel.expand(b.num_graphs, -1)])
            rel_batch = torch.cat([rel_batch, torch.arange(b.num_graphs, device=device)])
        q = b.q_emb.to(dtype)

        attention: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {"forward": [], "reverse": []}
        stacks = (("forward", self.forward_convs, edge_index), ("reverse", self.reverse_convs, edge_index.flip(0)))
        # layer 0 reads the projections of h^(0); later layers the previous output (of both stacks if crossing)
        inputs: list[torch.Tensor | tuple[torch.Tensor, torch.Tensor]] = [(z[0], z[1]), (z[2], z[3])]
        outputs: list[torch.Tensor] = []
        for i in range(len(self.forward_convs)):
            if i:
                if self.cross_directions:
                    both = self.dropout(torch.cat(outputs, dim=1))
                    inputs = [both, both]
                else:
                    inputs = [self.dropout(h) for h in outputs]
            outputs = []
            for (name, convs, ei), h in zip(stacks, inputs):
                res = convs[i](h, ei, edge_rel, rel_emb, rel_batch, q, return_attention=return_attention)
                if return_attention:
                    res, alpha = res
                    attention[name].append((ei, alpha))
                outputs.append(res)
        logits = self._score(torch.cat(outputs, dim=1), b, dtype, edges, walk_edge)
        return (logits, attention) if return_attention else logits

    def _score(self, h: torch.Tensor, b: BatchedGraphs, dtype: torch.dtype,
               edges: torch.Tensor | None = None, walk_edge: torch.Tensor | None = None) -> torch.Tensor:
        """``W2 ReLU(W1 [q || h_h || r || h_t] (+ W_w walk))`` by blocks: node terms per node, query term per
        relation row."""
        d, width = self.emb_dim, 2 * self.hidden
        w = self.score1.weight
        off = d if self.query_score else 0
        w_h, w_r, w_t = w[:, off:off + width], w[:, off + width:off + width + d], w[:, off + width + d:]
        node = F.linear(h, torch.cat([w_h, w_t], 0))
        as_head, as_tail = node.chunk(2, dim=1)
        rel = F.linear(b.rel_emb.to(dtype), w_r, self.score1.bias)
        if self.query_score:
            rel = rel.add_(F.linear(b.q_emb.to(dtype), w[:, :d]).index_select(0, b.rel_batch))
        head, tail, edge_rel = b.edge_index[0], b.edge_index[1], b.edge_rel
        if edges is not None:
            head, tail = head.index_select(0, edges), tail.index_select(0, edges)
            edge_rel = edge_rel.index_select(0, edges)
            walk_edge = walk_edge.index_select(0, edges) if walk_edge is not None else None
        pre = as_head.index_select(0, head).add_(as_tail.index_select(0, tail)).add_(rel.index_select(0, edge_rel))
        if walk_edge is not None:
            pre = pre.add_(self.walk_edge(walk_edge))  # type: ignore[misc]
        return self.score2(self.dropout(F.relu_(pre))).squeeze(-1)
