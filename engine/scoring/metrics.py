"""Retrieval metrics over scored triples, as SubgraphRAG and QSRAG report them: triple recall@K and answer recall@K."""

from __future__ import annotations

import math
from typing import Iterable

import torch

from engine.scoring.select import top_k

__all__ = ["triple_recall_at_k", "answer_recall_at_k", "answer_ceiling_at_k"]


def triple_recall_at_k(scores: torch.Tensor, labels: torch.Tensor, k: int) -> float:
    """``|top-K ∩ target| / |target|``: the share of target (label 1) triples among the K best scored.

    NaN when there is no target triple (callers skip such questions, as SubgraphRAG does).
    Shapes: **scores**, **labels** ``[E]``.
    """
    target = labels.detach().reshape(-1) > 0.5
    total = int(target.sum())
    if total == 0:
        return math.nan
    hit = int(target.index_select(0, top_k(scores, k).to(target.device)).sum())
    return hit / total


def answer_recall_at_k(scores: torch.Tensor, edge_index: torch.Tensor, answers: torch.Tensor, k: int) -> float:
    """``|answers among the entities (heads or tails) of the top-K triples| / |answers|``.

    Answers are node indices (duplicates count once); NaN when there are none.
    Shapes: **scores** ``[E]``, **edge_index** ``[2, E]``, **answers** ``[A]``.
    """
    answers = torch.unique(answers.reshape(-1).long())
    if answers.numel() == 0:
        return math.nan
    chosen = top_k(scores, k).to(edge_index.device)
    covered = torch.unique(edge_index.index_select(1, chosen).reshape(-1))
    hit = int(torch.isin(answers.to(covered.device), covered).sum())
    return hit / int(answers.numel())


def answer_ceiling_at_k(heads: Iterable[int], tails: Iterable[int], answers: Iterable[int], k: int) -> int:
    """The most answers any choice of ``k`` triples can cover (the ceiling of answer recall@K's numerator).

    Every answer in the neighbourhood lies on at least one triple, and a triple covers at most two answers
    (when both its ends are answers). With ``m`` answers and ``nu`` the size of a maximum matching among the
    answer-answer triples, ``k`` triples cover at most ``min(m, k + min(k, nu))``: take matched pairs first
    (two answers per triple), then one new answer per triple. ``nu`` is exact (networkx's maximum matching,
    run only when some triple joins two answers).
    """
    ans = {int(a) for a in answers}
    m = len(ans)
    if m == 0 or k <= 0:
        return 0
    pairs = {(min(h, t), max(h, t)) for h, t in zip((int(x) for x in heads), (int(x) for x in tails))
             if h != t and h in ans and t in ans}
    nu = 0
    if pairs:
        import networkx as nx

        g = nx.Graph()
        g.add_edges_from(pairs)
        nu = len(nx.max_weight_matching(g, maxcardinality=True))
    return min(m, k + min(k, nu))
