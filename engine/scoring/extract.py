"""An answer from scored triples, without an LLM (the scorer as the retriever, DESIGN §5).

Over the selected triples (undirected), a breadth-first walk from the anchors gives each entity its distance
and a path confidence ``conf(v) = max conf(u) * s(u, v)`` over the selected triples from the previous layer
(``conf = 1`` at the anchors, ``s`` the triple's sigmoid confidence). The answer of a multi-hop question is
where the confident paths *end*, so an entity's answer score is

    answer(v) = conf(v) * prod over selected triples (v, w) leading one layer further of (1 - s(v, w))

(a film on the way to its director scores low, the director high). Anchors are never answers.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np

__all__ = ["answer_candidates"]


def answer_candidates(
    heads: np.ndarray,
    tails: np.ndarray,
    confidence: np.ndarray,
    selected: Sequence[int] | np.ndarray,
    anchors: Sequence[int] | np.ndarray,
) -> list[tuple[int, float]]:
    """``[(local node, answer score)]``, best first, for the triples ``selected`` (indices into the arrays).

    Shapes: **heads**, **tails**, **confidence** ``[E]`` (local nodes; sigmoid scores); **anchors** ``[A]``.
    """
    adj: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for i in np.asarray(selected, dtype=np.int64).tolist():
        h, t, s = int(heads[i]), int(tails[i]), float(confidence[i])
        if h == t:
            continue
        adj[h].append((t, s))
        adj[t].append((h, s))
    anchor_set = {int(a) for a in np.asarray(anchors).tolist()}
    dist: dict[int, int] = {a: 0 for a in anchor_set}
    conf: dict[int, float] = {a: 1.0 for a in anchor_set}
    layer = sorted(anchor_set)
    depth = 0
    while layer:
        nxt: dict[int, float] = {}
        for u in layer:
            cu = conf[u]
            for v, s in adj.get(u, ()):
                if v in dist:
                    continue
                c = cu * s
                if c > nxt.get(v, -1.0):
                    nxt[v] = c
        depth += 1
        for v, c in nxt.items():
            dist[v] = depth
            conf[v] = c
        layer = sorted(nxt)
    out = []
    for v, d in dist.items():
        if v in anchor_set:
            continue
        end = 1.0
        for w, s in adj.get(v, ()):
            if dist.get(w, -1) == d + 1:
                end *= 1.0 - s
        out.append((v, conf[v] * end))
    out.sort(key=lambda x: (-x[1], x[0]))
    return out
