"""A question-conditioned relation walk from the topic entities: which triples a walk of the question's
relation path crosses, and which entities it ends on (a structural feature for both scorers).

DDE (SubgraphRAG) says how far an entity lies from the topic; the gated DDE
(:class:`~engine.scoring.models.dde.QueryGatedDDE`) weighs the relations on the way, but its mean aggregation divides by
every in-degree, so an answer that is a hub (a language, a genre, a year: most MetaQA 3-hop answers) receives a share a
thousand times smaller than a rare entity reached by a wrong relation. Here the propagation is a max-product (Viterbi)
walk instead, as in TransferNet's relation-following (Shi et al., EMNLP 2021) and QSRAG's query-relation alignment
(QSRAG, see :mod:`engine.scoring.models.qrgat`): a hub reached by the right path scores as high as any other entity
reached by it.

For round ``l = 1..L``, direction ``d`` (forward along a triple, head -> tail, or reverse) and relation ``r``:

.. math::
    g_{l,d}(q, r) = \\sigma\\big((W^{(l,d)}_q q)^\\top (W^{(l,d)}_r r) / \\sqrt{g} + b_{l,d}\\big), \\qquad
    \\rho_l(q) = \\sigma(w_l^\\top q + c_l)

(the relation gate and the *stay* gate: a question of fewer hops than ``L`` stays where it is for the other
rounds). The forward pass marks where a walk can be after each round,

.. math::
    a^{(0)}_v = [v \\in \\mathcal{T}_q], \\qquad
    a^{(l)}_v = \\max\\big(\\rho_l a^{(l-1)}_v,\\ \\max_{(u, r, v)} g_{l,f}(r) a^{(l-1)}_u,\\
                \\max_{(v, r, u)} g_{l,r}(r) a^{(l-1)}_u\\big)

(the best product of gates over walks from a topic entity), the backward pass where a walk can still go,
``beta^(L) = 1`` and ``beta^(l-1)`` by the same rule run against the direction, and a triple's feature at round
``l`` is the best complete walk that crosses it then:

.. math::
    w^{(l)}_{(h, r, t)} = \\max\\big(a^{(l-1)}_h\\, g_{l,f}(r)\\, \\beta^{(l)}_t,\\
                              a^{(l-1)}_t\\, g_{l,r}(r)\\, \\beta^{(l)}_h\\big)

A walk never comes back to a topic entity once it has left (``a^(l)`` and ``beta^(l)`` are 0 on the topic
entities for ``l >= 1``): "the actors of the films whose writers also wrote X" are not X's own actors, which a
walk X -> writer -> X -> actor would mark (MetaQA's answers leave them out, and a walk through the question's
own entity rarely answers it); a question of fewer hops moves first and stays after.

The gates read the question with its topic mentions masked (:func:`mask_mentions`, ``BatchedGraphs.q_walk``;
the full question's embedding when none is given): "who acted in the films directed by the director of
[Bride of Re-Animator]" then embeds as the relation template it is, not as a film title, and the gates learn
from far fewer questions (MetaQA 3-hop, the walk alone: Hits@1 of its end 0.92 masked, 0.81 not).

Outputs: per node ``a^(L)`` (where the question's walk ends: its answers) as ``[a, log_scale(a)]``, per triple
``[w^(1) .. w^(L), log_scale(max_l w^(l))]``. Everything is differentiable (the max passes its gradient to the
best walk), so the gates are learned from the triple labels through the scorer, and directly from the answers
with :func:`walk_answer_loss` (the training's auxiliary term; answers are what any QA training set has).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from engine.scoring.models.dde import log_scale

if TYPE_CHECKING:
    from engine.scoring.question_graph import BatchedGraphs

__all__ = ["QueryWalk", "walk_answer_loss", "mask_mentions"]

_BRACKETED = re.compile(r"\[[^\[\]]+\]")
#: what a masked mention becomes (a pronoun keeps the sentence a sentence for the text encoder)
MASK = "it"


def mask_mentions(question: str, mentions: Sequence[str] = (), placeholder: str = MASK) -> str:
    """``question`` with its entity mentions replaced by ``placeholder``: bracketed spans (``[Heat]``, MetaQA's
    marking of the topic) and every case-insensitive whole-word occurrence of ``mentions`` (longest first).

    >>> mask_mentions("who directed [Heat]")
    'who directed it'
    >>> mask_mentions("films starring Tom Hanks and Meg Ryan", ["Tom Hanks", "meg ryan"])
    'films starring it and it'
    """
    out = _BRACKETED.sub(placeholder, question)
    for m in sorted({m.strip() for m in mentions if m and m.strip()}, key=len, reverse=True):
        out = re.sub(r"(?<!\w)" + re.escape(m) + r"(?!\w)", placeholder, out, flags=re.IGNORECASE)
    return out


def _max_into(values: torch.Tensor, index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """``out[v] = max{values[e] | index[e] = v}``, 0 where nothing arrives (values are >= 0)."""
    out = values.new_zeros(num_nodes)
    return out.scatter_reduce(0, index, values, reduce="amax", include_self=True)


class QueryWalk(nn.Module):
    """The question's relation walk (module docstring). ``rounds`` is ``L``, ``gate_dim`` the width ``g`` of the
    bilinear relation gates.

    Shapes: a :class:`~engine.scoring.question_graph.BatchedGraphs` -> ``(node [N, 2], edge [E, L + 1], end [N])``,
    ``end`` being ``a^(L)`` itself.
    """

    def __init__(self, emb_dim: int, rounds: int = 3, gate_dim: int = 32, gate_hidden: int = 0) -> None:
        super().__init__()
        if rounds < 1:
            raise ValueError("the relation walk needs at least one round")
        self.rounds, self.gate_dim, self.gate_hidden = rounds, gate_dim, gate_hidden
        # the question side of the gates: linear, or an MLP with one hidden layer (gate_hidden > 0), which
        # reads "which relation at which round" out of a sentence embedding far better (module docstring)
        self.gate_q = (nn.Sequential(nn.Linear(emb_dim, gate_hidden), nn.ReLU(),
                                     nn.Linear(gate_hidden, 2 * rounds * gate_dim))
                       if gate_hidden > 0 else nn.Linear(emb_dim, 2 * rounds * gate_dim))
        self.gate_r = nn.Linear(emb_dim, 2 * rounds * gate_dim, bias=False)
        self.gate_bias = nn.Parameter(torch.empty(2 * rounds))
        self.stay = nn.Linear(emb_dim, rounds)
        self.reset_parameters()

    node_dim = 2

    @property
    def edge_dim(self) -> int:
        return self.rounds + 1

    def reset_parameters(self) -> None:
        for m in self.gate_q.modules():
            if isinstance(m, nn.Linear):
                m.reset_parameters()
        self.gate_r.reset_parameters()
        # every gate starts at 0.5: nothing is preferred until the labels say which relations to follow
        nn.init.zeros_(self.gate_bias)
        self.stay.reset_parameters()
        nn.init.zeros_(self.stay.bias)

    def gates(self, b: BatchedGraphs, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
        """``([R, L, 2] relation gates (forward, reverse), [B, L] stay gates)``."""
        rows = b.rel_emb.shape[0]
        q = (b.q_walk if b.q_walk is not None else b.q_emb).to(dtype)
        gq = self.gate_q(q).index_select(0, b.rel_batch)
        gr = self.gate_r(b.rel_emb.to(dtype))
        logit = (gq * gr).view(rows, 2 * self.rounds, self.gate_dim).sum(-1) / math.sqrt(self.gate_dim)
        rel = torch.sigmoid(logit + self.gate_bias).view(rows, self.rounds, 2)
        return rel, torch.sigmoid(self.stay(q))

    def forward(self, b: BatchedGraphs, dtype: torch.dtype = torch.float32,
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n = b.num_nodes
        head, tail = b.edge_index[0], b.edge_index[1]
        rel_gate, stay_gate = self.gates(b, dtype)
        g = rel_gate.index_select(0, b.edge_rel)  # [E, L, 2]
        stay = stay_gate.index_select(0, b.node_batch)  # [N, L]

        off_topic = (~b.is_topic).to(dtype)  # a walk does not come back to a topic entity

        def step(x: torch.Tensor, gf: torch.Tensor, gr: torch.Tensor, st: torch.Tensor, back: bool) -> torch.Tensor:
            # forward pass: along a triple head -> tail with gf, tail -> head with gr; backward: the reverse
            src_f, dst_f = (tail, head) if back else (head, tail)
            out = torch.maximum(_max_into(x.index_select(0, src_f) * gf, dst_f, n),
                                _max_into(x.index_select(0, dst_f) * gr, src_f, n))
            return torch.maximum(out, st * x)

        a = [b.is_topic.to(dtype)]
        for i in range(self.rounds):
            a.append(step(a[-1], g[:, i, 0], g[:, i, 1], stay[:, i], back=False) * off_topic)
        beta = [off_topic]
        for i in reversed(range(1, self.rounds)):
            beta.append(step(beta[-1], g[:, i, 0], g[:, i, 1], stay[:, i], back=True) * off_topic)
        beta.reverse()  # beta[l - 1] = where a walk at round l can still go, l = 1..L (beta^(L) = 1 off the topic)
        edge = torch.stack([
            torch.maximum(a[i].index_select(0, head) * g[:, i, 0] * beta[i].index_select(0, tail),
                          a[i].index_select(0, tail) * g[:, i, 1] * beta[i].index_select(0, head))
            for i in range(self.rounds)], dim=1)
        end = a[-1]
        best = edge.amax(dim=1, keepdim=True) if edge.shape[0] else edge.new_zeros(0, 1)
        node = torch.stack([end, log_scale(end)], dim=1)
        return node, torch.cat([edge, log_scale(best)], dim=1), end

    def extra_repr(self) -> str:
        return f"rounds={self.rounds}, gate_dim={self.gate_dim}, gate_hidden={self.gate_hidden}"


def walk_answer_loss(end: torch.Tensor, b: BatchedGraphs, hard_min: int = 10, hard_ratio: int = 2) -> torch.Tensor:
    """Auxiliary loss on where the walk ends, against the answers (``b.node_labels``): per question, the mean
    BCE of ``a^(L)`` over its answers + over its hardest non-answers (the ``max(hard_min, hard_ratio * answers)``
    with the highest ``a^(L)``) + over all its non-answers; topic entities left out; averaged over the
    questions with an answer in their neighbourhood.

    The hard term is what makes the gates sharp: a question has a few answers among thousands of entities,
    and a mean over all non-answers hardly feels the ten wrong ones the walk ends on with 0.99 (a relation
    left open at one round). MetaQA, the walk trained alone for 5 epochs: 3-hop Hits@1 of its end 0.92 with
    the hard term, 0.65 with the two means alone."""
    if b.node_labels is None:
        raise ValueError("walk_answer_loss needs node_labels (the answers) in the batch")
    y = b.node_labels.to(end.dtype)
    per = F.binary_cross_entropy(end.clamp(1e-6, 1.0 - 1e-6), y, reduction="none")
    keep = ~b.is_topic
    pos_mask, neg_mask = keep & (y > 0), keep & (y <= 0)
    terms = []
    ptr = b.node_ptr.tolist()
    for i in range(b.num_graphs):
        sl = slice(ptr[i], ptr[i + 1])
        pos, neg = per[sl][pos_mask[sl]], per[sl][neg_mask[sl]]
        if pos.numel() == 0:
            continue
        term = pos.mean()
        if neg.numel():
            k = min(neg.numel(), max(hard_min, hard_ratio * pos.numel()))
            # the hardest non-answers are those with the highest end, i.e. the largest BCE terms
            term = term + neg.topk(k).values.mean() + neg.mean()
        terms.append(term)
    if not terms:
        return end.new_zeros(())
    return torch.stack(terms).mean()
