"""Which scored triples become evidence: fixed top-K, or QSRAG's adaptive top-p (its Algorithm 1)."""

from __future__ import annotations

import torch

__all__ = ["top_k", "adaptive_top_p"]


def _rank(scores: torch.Tensor) -> torch.Tensor:
    # Stable: equal scores keep index order, so a selection is reproducible.
    return torch.sort(scores, descending=True, stable=True).indices


def top_k(scores: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the ``k`` highest scores, best first (ties broken by index); fewer if there are fewer.

    Shapes: **scores** ``[E]`` -> ``[min(k, E)]`` long.
    """
    if k < 0:
        raise ValueError("k must be >= 0")
    return _rank(scores.detach().reshape(-1))[:k]


def adaptive_top_p(
    scores: torch.Tensor,
    p: float = 0.9,
    tau: float | None = None,
    k_min: int = 50,
    k_max: int = 200,
) -> torch.Tensor:
    r"""QSRAG's adaptive evidence filtering (the QSRAG paper's Appendix B.1, Algorithm 1; see
    :mod:`engine.scoring.models.qrgat`).

    With logits ``l`` (``scores``): keep ``I = {i | sigmoid(l_i) > tau}`` (all when ``tau`` is None; the
    paper never gives ``tau``), take ``softmax`` over the survivors' logits only, sort it descending, find
    the smallest prefix ``k_A + 1`` whose cumulative mass exceeds ``p`` (``k_A = N - 1`` if none does), and
    return the first ``min(max(k_A + 1, k_min), k_max, N)`` survivors, best first. So the result never has
    more than ``k_max`` triples, and fewer than ``k_min`` only when fewer survive the pre-filter.

    Defaults: ``p = 0.9``, ``[k_min, k_max] = [50, 200]`` (the paper's main text; its appendix says 50-300).

    Shapes: **scores** ``[E]`` logits -> indices ``[k_final]`` long, best first.
    """
    if not 0.0 < p <= 1.0:
        raise ValueError("p must lie in (0, 1]")
    if k_min < 0 or k_max < k_min:
        raise ValueError("need 0 <= k_min <= k_max")
    logits = scores.detach().reshape(-1)
    if tau is None:
        passed = torch.arange(logits.numel(), device=logits.device)
    else:
        passed = torch.nonzero(torch.sigmoid(logits) > tau).flatten()
    n = int(passed.numel())
    if n == 0:
        return passed
    kept = logits.index_select(0, passed)
    order = _rank(kept)
    mass = torch.softmax(kept.index_select(0, order).double(), dim=0).cumsum(0)
    over = torch.nonzero(mass > p).flatten()
    k_a = int(over[0]) if over.numel() else n - 1
    k_final = min(max(k_a + 1, k_min), k_max, n)
    return passed.index_select(0, order[:k_final])
