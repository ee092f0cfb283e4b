"""Directional Distance Encoding (DDE), from SubgraphRAG (Li, Miao, Li, "Simple is Effective: The Roles of Graphs
and Large Language Models in Knowledge-Graph-Based Retrieval-Augmented Generation", ICLR 2025), §3.2."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:  # pragma: no cover
    from engine.scoring.question_graph import BatchedGraphs

__all__ = ["DDE", "QueryGatedDDE", "log_scale", "mean_aggregate"]


def mean_aggregate(x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """``out[v] = mean{x[u] | edge u -> v}`` (one message per edge); a node with no incoming edge gets 0."""
    out = torch.zeros(num_nodes, x.shape[1], dtype=x.dtype, device=x.device)
    out.index_add_(0, dst, x.index_select(0, src))
    deg = torch.zeros(num_nodes, dtype=x.dtype, device=x.device)
    deg.index_add_(0, dst, torch.ones_like(dst, dtype=x.dtype))
    return out / deg.clamp_(min=1).unsqueeze(1)


def log_scale(s: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """``1 + log(s + eps) / log(1 / eps)``: DDE shares in ``[0, 1]`` mapped onto ``[0, 1]`` by their logarithm.

    Mean aggregation divides the topic share by every degree on the way, so two or three hops out the
    shares of relevant entities are 0.001-0.01 and those of entities reached through a hub (a genre, a
    year) ten times smaller. As a raw input next to unit-norm text embeddings such a gap needs weights in
    the hundreds, which Adam (steps of about ``lr`` per weight) reaches only after 10^5 steps; on a log scale
    the gap is a fixed difference (0.24 vs 0.48 for the example) that the first layer reads at once.
    ``0 -> 0``, ``eps -> 0.08``, ``1 -> 1``, monotone.
    """
    return torch.log(s + eps).div_(math.log(1.0 / eps)).add_(1.0).clamp_(min=0.0)


class DDE(nn.Module):
    r"""Directional Distance Encoding of each entity relative to the topic entities (no parameters).

    .. math::
        \mathbf{s}^{(0)}_e = [1, 0] \text{ if } e \in \mathcal{T}_q \text{ else } [0, 1]

        \mathbf{s}^{(l+1)}_e = \mathrm{MEAN}\{\mathbf{s}^{(l)}_{e'} \mid (e', r, e) \in \mathcal{G}\}
        \qquad \text{(forward: over heads of the triples whose tail is } e)

        \mathbf{s}^{(r,l+1)}_e = \mathrm{MEAN}\{\mathbf{s}^{(r,l)}_{e'} \mid (e, r, e') \in \mathcal{G}\},
        \quad \mathbf{s}^{(r,0)} = \mathbf{s}^{(0)} \qquad \text{(reverse: over tails of the triples whose head is } e)

        \mathbf{s}_e = [\mathbf{s}^{(0)}_e \,\|\, \mathbf{s}^{(1)}_e \| \dots \| \mathbf{s}^{(L)}_e
        \,\|\, \mathbf{s}^{(r,1)}_e \| \dots \| \mathbf{s}^{(r,L_r)}_e]

    The mean counts one message per triple (parallel triples count several times) and a node without
    incoming messages gets 0, as PyG's ``aggr="mean"``. ``s^(0)`` is prepended only with
    ``include_initial=True`` (the paper's formula); the authors' public code leaves it out,
    which is the default here. A triple's structural feature is ``[s_h || s_t]``.

    ``mixed=True`` appends the rounds that change direction: every sequence of forward (``f``) and reverse
    (``r``) rounds up to ``max(L, L_r)`` long that has both, e.g. ``s^(fr)`` (a forward round, then a
    reverse one over its output) and ``s^(rf)`` for two rounds. The paper's pools are Freebase, where a
    relation and its inverse are both stored (``film.film.directed_by`` / ``film.director.film``), so its
    pure forward and pure reverse rounds still follow paths that alternate between the two. On a KG that
    stores one direction only (MetaQA: film -> director, film -> genre) the films that share a director with
    the topic film (topic -> director <- film) are reached by no pure-direction round: only ``s^(fr)`` marks
    them.

    Args:
        rounds: forward rounds L (default 2).
        reverse_rounds: reverse rounds L_r (default: same as ``rounds``).
        include_initial: prepend ``s^(0)``.
        mixed: append the direction-changing sequences (default False: the paper's features only).

    Shapes:
        - **input:** ``num_nodes``, ``edge_index [2, E]`` (head -> tail), ``topic`` as indices ``[T]`` or a
          bool mask ``[N]``
        - **output:** ``[N, out_dim]`` with ``out_dim = 2 * (L + L_r) (+ 2) (+ 2 * mixed sequences)``; with
          ``L = L_r = 2`` and ``mixed``: ``[s^(0)? || f || ff || r || rr || fr || rf]``
    """

    def __init__(self, rounds: int = 2, reverse_rounds: int | None = None, include_initial: bool = False,
                 mixed: bool = False) -> None:
        super().__init__()
        if rounds < 0 or (reverse_rounds is not None and reverse_rounds < 0):
            raise ValueError("DDE rounds must be >= 0")
        self.rounds = rounds
        self.reverse_rounds = rounds if reverse_rounds is None else reverse_rounds
        self.include_initial = include_initial
        self.mixed = mixed

    def mixed_sequences(self) -> list[str]:
        """The direction-changing round sequences ``mixed`` adds, in output order (``"fr"``, ``"rf"``, ...)."""
        if not self.mixed:
            return []
        longest = max(self.rounds, self.reverse_rounds)
        return [s for n in range(1, longest + 1) for s in _sequences(n) if "f" in s and "r" in s]

    @property
    def out_dim(self) -> int:
        return (2 * (self.rounds + self.reverse_rounds) + (2 if self.include_initial else 0)
                + 2 * len(self.mixed_sequences()))

    def forward(self, num_nodes: int, edge_index: torch.Tensor, topic: torch.Tensor,
                dtype: torch.dtype = torch.float32) -> torch.Tensor:
        device = edge_index.device
        if topic.dtype == torch.bool:
            is_topic = topic
        else:
            is_topic = torch.zeros(num_nodes, dtype=torch.bool, device=device)
            is_topic[topic.long()] = True
        s0 = torch.stack([is_topic, ~is_topic], dim=1).to(dtype)
        head, tail = edge_index[0], edge_index[1]
        parts = [s0] if self.include_initial else []
        s = s0
        for _ in range(self.rounds):
            s = mean_aggregate(s, head, tail, num_nodes)
            parts.append(s)
        s = s0
        for _ in range(self.reverse_rounds):
            s = mean_aggregate(s, tail, head, num_nodes)
            parts.append(s)
        seqs = self.mixed_sequences()
        if seqs:
            # each sequence extends its prefix by one round; prefixes are computed once
            memo: dict[str, torch.Tensor] = {"": s0}

            def seq(key: str) -> torch.Tensor:
                if key not in memo:
                    prev = seq(key[:-1])
                    memo[key] = (mean_aggregate(prev, head, tail, num_nodes) if key[-1] == "f"
                                 else mean_aggregate(prev, tail, head, num_nodes))
                return memo[key]

            parts += [seq(k) for k in seqs]
        if not parts:
            return s0.new_zeros(num_nodes, 0)
        return torch.cat(parts, dim=1)

    def extra_repr(self) -> str:
        return (f"rounds={self.rounds}, reverse_rounds={self.reverse_rounds}, include_initial={self.include_initial}, "
                f"mixed={self.mixed}")


class QueryGatedDDE(nn.Module):
    r"""DDE whose messages are gated by the question's interest in each triple's relation (learned).

    Plain DDE carries no relation type: a film that shares an actor with the topic film and one that only
    shares its genre differ by how much the hub dilutes the topic share, not by the relation walked. Here
    round ``l`` of every sequence scales the message along a triple of relation ``r`` by

    .. math::
        g_l(q, r) = \sigma\big((W^{(l)}_q \mathbf{q})^\top (W^{(l)}_r \mathbf{r}) / \sqrt{g} + b_l\big)

    (QSRAG's query-relation alignment term, see :mod:`engine.scoring.models.qrgat`, used as a gate on SubgraphRAG's DDE
    propagation), and divides by the plain in-degree as DDE's mean does: ``s^{(l)}_v = sum_{u -> v} g_l(q, r_{uv})
    s^{(l-1)}_u / deg(v)``. Only the topic share is propagated; every sequence of forward (``f``) and reverse (``r``)
    rounds of length 1 to ``rounds`` is kept (``f, r, ff, fr, rf, rr`` for 2), log-scaled (:func:`log_scale`). Gates
    start near 0.9 (``b_l = 2``), i.e. close to the ungated DDE.

    Shapes: a :class:`~engine.scoring.question_graph.BatchedGraphs` -> ``[N, out_dim]``,
    ``out_dim = 2 + 4 + ... + 2^rounds``.
    """

    def __init__(self, emb_dim: int, rounds: int = 2, gate_dim: int = 32) -> None:
        super().__init__()
        if rounds < 1:
            raise ValueError("gated DDE needs at least one round")
        self.rounds, self.gate_dim = rounds, gate_dim
        self.gate_q = nn.Linear(emb_dim, rounds * gate_dim)
        self.gate_r = nn.Linear(emb_dim, rounds * gate_dim, bias=False)
        self.gate_bias = nn.Parameter(torch.empty(rounds))
        self.seqs = [s for n in range(1, rounds + 1) for s in _sequences(n)]
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.gate_q.reset_parameters()
        self.gate_r.reset_parameters()
        nn.init.constant_(self.gate_bias, 2.0)

    @property
    def out_dim(self) -> int:
        return len(self.seqs)

    def gates(self, b: BatchedGraphs, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """``[R, rounds]`` gate of every relation row (each row belongs to one question)."""
        r_rows = b.rel_emb.shape[0]
        gq = self.gate_q(b.q_emb.to(dtype)).index_select(0, b.rel_batch)
        gr = self.gate_r(b.rel_emb.to(dtype))
        logit = (gq * gr).view(r_rows, self.rounds, self.gate_dim).sum(-1) / math.sqrt(self.gate_dim)
        return torch.sigmoid(logit + self.gate_bias)

    def forward(self, b: BatchedGraphs, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        n = b.num_nodes
        head, tail = b.edge_index[0], b.edge_index[1]
        gate = self.gates(b, dtype).index_select(0, b.edge_rel)  # [E, rounds]
        ones = torch.ones(head.shape[0], dtype=dtype, device=head.device)
        deg_t = torch.zeros(n, dtype=dtype, device=head.device).index_add_(0, tail, ones).clamp_(min=1)
        deg_h = torch.zeros(n, dtype=dtype, device=head.device).index_add_(0, head, ones).clamp_(min=1)
        memo: dict[str, torch.Tensor] = {"": b.is_topic.to(dtype)}

        def seq(key: str) -> torch.Tensor:
            if key not in memo:
                prev, g = seq(key[:-1]), gate[:, len(key) - 1]
                src, dst, deg = (head, tail, deg_t) if key[-1] == "f" else (tail, head, deg_h)
                memo[key] = torch.zeros(n, dtype=dtype, device=head.device).index_add_(
                    0, dst, prev.index_select(0, src) * g) / deg
            return memo[key]

        return log_scale(torch.stack([seq(k) for k in self.seqs], dim=1))


def _sequences(n: int) -> list[str]:
    out = [""]
    for _ in range(n):
        out = [s + c for s in out for c in "fr"]
    return out
