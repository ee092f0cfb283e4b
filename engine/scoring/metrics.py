"""Retrieval metrics over scored triples (DIGEST §6.7): triple recall@K and answer recall@K."""

from __future__ import annotations

import math

import torch

from engine.scoring.select import top_k

__all__ = ["triple_recall_at_k", "answer_recall_at_k"]


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
