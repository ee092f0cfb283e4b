"""Supervision for the triple scorers: the triples on shortest topic <-> answer paths (SubgraphRAG's weak supervision),
or, when a question's relation path is known (MetaQA's question types name it), the triples on the walks
topic -r1- x -r2- ... -rn- answer that follow it."""

from __future__ import annotations

from typing import Literal, Sequence

import torch

from engine._errors import InputError

__all__ = ["shortest_path_labels", "bfs_distances", "relation_path_labels", "path_labels_with_fallback"]

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
            dist = lengths[i, a0:a0 + chunk]
            ok = (dist > 0) & (dist < inf)
            if not bool(ok.any()):
                continue
            dist = dist[ok].unsqueeze(1)
            on = (d_t_u[i] + 1 + d_a_v[ok] == dist) | (d_t_v[i] + 1 + d_a_u[ok] == dist)
            labels |= on.any(0)
    return labels


def relation_path_labels(
    num_nodes: int,
    edge_index: torch.Tensor,
    edge_rel: torch.Tensor,
    topic: torch.Tensor,
    answers: torch.Tensor,
    path: Sequence[int],
) -> torch.Tensor:
    """Mark the triples on the walks topic -r1- x1 -r2- x2 ... -rn- answer that follow relation ids ``path``.

    Each step may take a triple either way (a KG may store one direction only, as MetaQA does), and the
    topic entities are dropped from the set reached at every step (MetaQA's own convention for its answers:
    "films that share an actor with [X]" never come back to X). A forward pass collects the entities reachable
    after each step, a backward pass from the answers reached at the end keeps the steps that lead to one.

    Far smaller than the shortest-path labels on a hub-rich KG: a 3-hop MetaQA question has a median of 17
    such triples against 93 on shortest paths (most of them detours through genre, year or tag hubs).
    Answers the path does not reach contribute nothing (see :func:`path_labels_with_fallback`).

    Shapes: **edge_index** ``[2, E]``, **edge_rel** ``[E]``, **topic** ``[T]``, **answers** ``[A]`` -> ``[E]`` bool.
    """
    device = edge_index.device
    e = edge_index.shape[1]
    labels = torch.zeros(e, dtype=torch.bool, device=device)
    topic = topic.reshape(-1).long().to(device)
    answers = answers.reshape(-1).long().to(device)
    if e == 0 or topic.numel() == 0 or answers.numel() == 0 or not len(path):
        return labels
    for name, idx in (("topic", topic), ("answers", answers)):
        if int(idx.min()) < 0 or int(idx.max()) >= num_nodes:
            raise InputError(f"{name} indices must lie in [0, {num_nodes})")
    u, v = edge_index[0].long(), edge_index[1].long()
    rel = edge_rel.long()
    is_topic = torch.zeros(num_nodes, dtype=torch.bool, device=device)
    is_topic[topic] = True
    reached = [is_topic]
    steps = []
    for r in path:
        on = rel == int(r)
        steps.append(on)
        nxt = torch.zeros(num_nodes, dtype=torch.bool, device=device)
        nxt[v[on & reached[-1][u]]] = True
        nxt[u[on & reached[-1][v]]] = True
        reached.append(nxt & ~is_topic)
    back = torch.zeros(num_nodes, dtype=torch.bool, device=device)
    back[answers] = True
    back &= reached[-1]
    for i in range(len(path) - 1, -1, -1):
        fwd = steps[i] & reached[i][u] & back[v]  # walked head -> tail
        rev = steps[i] & reached[i][v] & back[u]  # walked tail -> head
        labels |= fwd | rev
        back = torch.zeros(num_nodes, dtype=torch.bool, device=device)
        back[u[fwd]] = True
        back[v[rev]] = True
    return labels


def path_labels_with_fallback(
    num_nodes: int,
    edge_index: torch.Tensor,
    edge_rel: torch.Tensor,
    topic: torch.Tensor,
    answers: torch.Tensor,
    path: Sequence[int],
) -> torch.Tensor:
    """:func:`relation_path_labels`, plus the shortest topic <-> answer paths of the answers the relation path
    does not reach (a gap in the KG, or an answer the dataset found another way), so that every answer in the
    neighbourhood still has labelled triples to be found by."""
    labels = relation_path_labels(num_nodes, edge_index, edge_rel, topic, answers, path)
    answers = torch.unique(answers.reshape(-1).long().to(edge_index.device))
    if answers.numel() == 0:
        return labels
    touched = torch.zeros(num_nodes, dtype=torch.bool, device=edge_index.device)
    touched[edge_index[0][labels].long()] = True
    touched[edge_index[1][labels].long()] = True
    missed = answers[~touched[answers]]
    if missed.numel():
        labels |= shortest_path_labels(num_nodes, edge_index, topic, missed)
    return labels
