"""Weak supervision for the triple scorers: the triples on shortest topic <-> answer paths (DIGEST §1.1, §6.3)."""

from __future__ import annotations

from typing import Literal

import torch

from engine._errors import InputError

__all__ = ["shortest_path_labels", "bfs_distances"]

# Cap on the [sources, 2E] work matrix of one BFS chunk (elements).
_BFS_CHUNK_ELEMENTS = 1 << 23


def bfs_distances(num_nodes: int, edge_index: torch.Tensor, sources: torch.Tensor) -> torch.Tensor:
    """Hop distances from each source over the graph taken as undirected: ``[S, N]`` long.

    Unreachable nodes get ``num_nodes + 1`` (larger than any path; sums of two stay distinguishable).
    All sources advance together, one level per step over every edge, so the cost is
    ``O(levels * S * E)`` tensor work and no Python loop over nodes or edges.
    """
    inf = num_nodes + 1
    src = torch.cat([edge_index[0], edge_index[1]]).long()
    dst = torch.cat([edge_index[1], edge_index[0]]).long()
    sources = sources.reshape(-1).long()
    chunk = max(1, _BFS_CHUNK_ELEMENTS // max(1, src.numel()))
    out = []
    for part in torch.split(sources, chunk):
        s = part.numel()
        dist = torch.full((s, num_nodes), inf, dtype=torch.long, device=edge_index.device)
        rows = torch.arange(s, device=edge_index.device)
        dist[rows, part] = 0
        frontier = torch.zeros(s, num_nodes, dtype=torch.bool, device=edge_index.device)
        frontier[rows, part] = True
        level = 0
        while src.numel() and bool(frontier.any()):
            level += 1
            reached = torch.zeros(s, num_nodes, dtype=torch.int32, device=edge_index.device)
            reached.index_add_(1, dst, frontier[:, src].to(torch.int32))
            frontier = (reached > 0) & (dist == inf)
            dist[frontier] = level
        out.append(dist)
    if not out:
        return torch.empty(0, num_nodes, dtype=torch.long, device=edge_index.device)
    return torch.cat(out)


def shortest_path_labels(
    num_nodes: int,
    edge_index: torch.Tensor,
    topic: torch.Tensor,
    answers: torch.Tensor,
    mode: Literal["pair", "set"] = "pair",
) -> torch.Tensor:
    """Mark the triples that lie on a shortest path between a topic entity and an answer entity.

    Direction is ignored for the path search (a triple may be walked either way); every triple on any
    minimum-length path is marked, parallel triples between the same two nodes included. A triple
    ``(u, v)`` lies on a shortest path of length ``L`` between ``a`` and ``b`` iff
    ``dist_a(u) + 1 + dist_b(v) == L`` or ``dist_a(v) + 1 + dist_b(u) == L``.

    Modes:
        - ``"pair"`` (default, SubgraphRAG's labels): the union over every (topic, answer) pair of that
          pair's shortest paths, so an answer farther away than another still gets its path.
        - ``"set"``: only the paths of the minimum topic-set to answer-set distance.

    A pair with no path, or whose answer is the topic itself, contributes nothing. SubgraphRAG's code
    searches directed paths both ways (topic -> answer, answer -> topic); ignoring direction here can
    also mark paths that change direction midway.

    Shapes: **edge_index** ``[2, E]``, **topic** ``[T]``, **answers** ``[A]`` -> ``[E]`` bool.
    """
    if mode not in ("pair", "set"):
        raise ValueError(f"mode must be 'pair' or 'set', not {mode!r}")
    device = edge_index.device
    topic = torch.unique(topic.reshape(-1).long().to(device))
    answers = torch.unique(answers.reshape(-1).long().to(device))
    for name, idx in (("topic", topic), ("answers", answers)):
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= num_nodes):
            raise InputError(f"{name} indices must lie in [0, {num_nodes})")
    e = edge_index.shape[1]
    labels = torch.zeros(e, dtype=torch.bool, device=device)
    if e == 0 or topic.numel() == 0 or answers.numel() == 0:
        return labels
    u, v = edge_index[0].long(), edge_index[1].long()
    inf = num_nodes + 1

    if mode == "set":
        answers = answers[~torch.isin(answers, topic)]
        if answers.numel() == 0:
            return labels
        d_t = bfs_distances(num_nodes, edge_index, topic).min(0).values
        d_a = bfs_distances(num_nodes, edge_index, answers).min(0).values
        length = int(d_t.index_select(0, answers).min())
        if length >= inf:
            return labels
        return (d_t[u] + 1 + d_a[v] == length) | (d_t[v] + 1 + d_a[u] == length)

    d_t = bfs_distances(num_nodes, edge_index, topic)  # [T, N]
    d_a = bfs_distances(num_nodes, edge_index, answers)  # [A, N]
    d_t_u, d_t_v = d_t[:, u], d_t[:, v]  # [T, E]
    lengths = d_t[:, answers]  # [T, A]: each topic's distance to each answer
    chunk = max(1, _BFS_CHUNK_ELEMENTS // (2 * e))  # answers per step, to bound the [A, E] temporaries
    for a0 in range(0, answers.numel(), chunk):
        d_a_u, d_a_v = d_a[a0:a0 + chunk][:, u], d_a[a0:a0 + chunk][:, v]  # [c, E]
        for i in range(topic.numel()):
            length = lengths[i, a0:a0 + chunk]
            ok = (length > 0) & (length < inf)
            if not bool(ok.any()):
                continue
            length = length[ok].unsqueeze(1)
            on = (d_t_u[i] + 1 + d_a_v[ok] == length) | (d_t_v[i] + 1 + d_a_u[ok] == length)
            labels |= on.any(0)
    return labels
