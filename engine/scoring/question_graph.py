"""The scorers' input: one question's fetched neighbourhood, and a disjoint union of several.

A :class:`QuestionGraph` holds the directed candidate triples ``(head, relation, tail)`` of one question in
local indices, with the text embeddings of its entities, relations and question. :func:`batch_graphs` joins
several into a :class:`BatchedGraphs` so that one forward pass scores the triples of many questions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import torch

from engine._errors import InputError

__all__ = ["QuestionGraph", "BatchedGraphs", "batch_graphs"]


@dataclass
class QuestionGraph:
    """One question's neighbourhood, as directed triples over local node indices.

    Shapes:
        - **edge_index** ``[2, E]`` long, row 0 = head, row 1 = tail, values in ``[0, num_nodes)``
        - **edge_rel** ``[E]`` long, rows of ``rel_emb``
        - **node_emb** ``[N, d]``; rows where ``has_text`` is False are ignored (may be zero)
        - **has_text** ``[N]`` bool; False -> the model's shared learned vector for nameless entities
        - **rel_emb** ``[R, d]`` (may be the whole KG's relation table: only used rows are kept when batching)
        - **q_emb** ``[d]``
        - **topic** ``[T]`` long, local indices of the topic (anchor) entities
        - **labels** ``[E]`` float 0/1 targets, or None
        - **node_rows** ``[N]`` long rows of the entity table attached to the model
          (:meth:`~engine.scoring.models.triple_scorer.TripleScorer.attach_entity_table`), or None; with both,
          an eval-mode model reads each node's text term from the table instead of projecting ``node_emb`` again
        - **node_labels** ``[N]`` float 0/1, the answers (for the relation walk's auxiliary training term), or None
        - **q_walk** ``[d]``: the question with its topic mentions masked
          (:func:`~engine.scoring.models.query_walk.mask_mentions`), read by the relation walk's gates; None: they
          read ``q_emb``
    """

    num_nodes: int
    edge_index: torch.Tensor
    edge_rel: torch.Tensor
    node_emb: torch.Tensor
    has_text: torch.Tensor
    rel_emb: torch.Tensor
    q_emb: torch.Tensor
    topic: torch.Tensor
    labels: torch.Tensor | None = None
    node_rows: torch.Tensor | None = None
    node_labels: torch.Tensor | None = None
    q_walk: torch.Tensor | None = None

    @property
    def num_edges(self) -> int:
        return int(self.edge_index.shape[1])

    def to(self, device: torch.device | str) -> QuestionGraph:
        return replace(self, **{f.name: _to(getattr(self, f.name), device) for f in fields(self)})

    def validate(self) -> None:
        """Check shapes, dtypes and index ranges; raise :class:`~engine.InputError` on the first problem."""
        n, ei = self.num_nodes, self.edge_index
        _check(ei.dim() == 2 and ei.shape[0] == 2, f"edge_index must be [2, E], got {tuple(ei.shape)}")
        e = ei.shape[1]
        _check(not ei.is_floating_point() and not self.edge_rel.is_floating_point(),
               "edge_index and edge_rel must be integer tensors")
        _check(tuple(self.edge_rel.shape) == (e,), f"edge_rel must be [E={e}], got {tuple(self.edge_rel.shape)}")
        _check(self.node_emb.dim() == 2 and self.node_emb.shape[0] == n,
               f"node_emb must be [N={n}, d], got {tuple(self.node_emb.shape)}")
        _check(tuple(self.has_text.shape) == (n,) and self.has_text.dtype == torch.bool,
               "has_text must be a bool tensor [N]")
        _check(self.rel_emb.dim() == 2, f"rel_emb must be [R, d], got {tuple(self.rel_emb.shape)}")
        _check(self.q_emb.dim() == 1, f"q_emb must be [d], got {tuple(self.q_emb.shape)}")
        _check(self.topic.dim() == 1 and not self.topic.is_floating_point(), "topic must be a 1-D integer tensor")
        if e:
            _check(int(ei.min()) >= 0 and int(ei.max()) < n, f"edge_index values must lie in [0, {n})")
            _check(int(self.edge_rel.min()) >= 0 and int(self.edge_rel.max()) < self.rel_emb.shape[0],
                   f"edge_rel values must lie in [0, {self.rel_emb.shape[0]})")
        if self.topic.numel():
            _check(int(self.topic.min()) >= 0 and int(self.topic.max()) < n, f"topic values must lie in [0, {n})")
        if self.labels is not None:
            _check(tuple(self.labels.shape) == (e,), f"labels must be [E={e}], got {tuple(self.labels.shape)}")
        if self.node_rows is not None:
            _check(tuple(self.node_rows.shape) == (n,) and not self.node_rows.is_floating_point(),
                   f"node_rows must be an integer tensor [N={n}]")
        if self.node_labels is not None:
            _check(tuple(self.node_labels.shape) == (n,),
                   f"node_labels must be [N={n}], got {tuple(self.node_labels.shape)}")
        if self.q_walk is not None:
            _check(tuple(self.q_walk.shape) == tuple(self.q_emb.shape),
                   f"q_walk must be shaped as q_emb {tuple(self.q_emb.shape)}, got {tuple(self.q_walk.shape)}")


@dataclass
class BatchedGraphs:
    """A disjoint union of :class:`QuestionGraph` s: node, triple and relation rows are concatenated.

    Each question keeps only the relation rows its triples use, so every row of ``rel_emb`` belongs to one
    question (``rel_batch``); models fold per-question terms into per-relation rows this way.

    Shapes (``B`` questions, ``N`` nodes, ``E`` triples, ``R`` relation rows in total):
        - **edge_index** ``[2, E]``, **edge_rel** ``[E]``, **triple_batch** ``[E]`` (question of each triple)
        - **node_emb** ``[N, d]``, **has_text** ``[N]``, **is_topic** ``[N]`` bool, **node_batch** ``[N]``
        - **rel_emb** ``[R, d]``, **rel_batch** ``[R]``
        - **q_emb** ``[B, d]``, **topic** ``[T]`` (global node indices)
        - **node_ptr**, **edge_ptr** ``[B + 1]`` offsets; **labels** ``[E]`` or None
        - **node_rows** ``[N]`` entity-table rows, or None (see :class:`QuestionGraph`)
        - **node_labels** ``[N]`` answers, or None (see :class:`QuestionGraph`)
        - **q_walk** ``[B, d]`` masked questions when every graph has one, else None (see :class:`QuestionGraph`)
    """

    num_graphs: int
    num_nodes: int
    edge_index: torch.Tensor
    edge_rel: torch.Tensor
    node_emb: torch.Tensor
    has_text: torch.Tensor
    rel_emb: torch.Tensor
    rel_batch: torch.Tensor
    q_emb: torch.Tensor
    topic: torch.Tensor
    is_topic: torch.Tensor
    node_batch: torch.Tensor
    triple_batch: torch.Tensor
    node_ptr: torch.Tensor
    edge_ptr: torch.Tensor
    labels: torch.Tensor | None = None
    node_rows: torch.Tensor | None = None
    node_labels: torch.Tensor | None = None
    q_walk: torch.Tensor | None = None

    @property
    def num_edges(self) -> int:
        return int(self.edge_index.shape[1])

    def to(self, device: torch.device | str) -> BatchedGraphs:
        return replace(self, **{f.name: _to(getattr(self, f.name), device) for f in fields(self)})

    def split(self, per_triple: torch.Tensor) -> list[torch.Tensor]:
        """Split a per-triple tensor ``[E, ...]`` (e.g. logits) into one tensor per question."""
        return list(torch.split(per_triple, torch.diff(self.edge_ptr).tolist()))


def batch_graphs(graphs: Sequence[QuestionGraph], device: torch.device | str | None = None) -> BatchedGraphs:
    """Join question graphs into one disjoint union (node, triple and relation indices are offset)."""
    if not graphs:
        raise InputError("batch_graphs needs at least one QuestionGraph")
    dims = None
    for g in graphs:
        g.validate()
        d = (g.node_emb.shape[1], g.rel_emb.shape[1], g.q_emb.shape[0])
        _check(dims is None or d == dims, f"embedding dimensions differ within a batch: {d} vs {dims}")
        dims = d
    with_labels = [g.labels is not None for g in graphs]
    _check(all(with_labels) or not any(with_labels), "either every graph in a batch has labels or none has")

    node_counts = [g.num_nodes for g in graphs]
    edge_counts = [g.num_edges for g in graphs]
    dev = graphs[0].edge_index.device
    node_off = _offsets(node_counts)
    rel_rows, edge_rel, rel_counts = [], [], []
    r_off = 0
    for g in graphs:
        used, inverse = torch.unique(g.edge_rel, return_inverse=True)
        rel_rows.append(g.rel_emb[used])
        edge_rel.append(inverse.long() + r_off)
        rel_counts.append(int(used.numel()))
        r_off += int(used.numel())

    def counts_to_batch(counts: list[int]) -> torch.Tensor:
        return torch.repeat_interleave(torch.arange(len(counts), device=dev), torch.tensor(counts, device=dev))

    num_nodes = sum(node_counts)
    topic = torch.cat([g.topic.long().to(dev) + o for g, o in zip(graphs, node_off)])
    is_topic = torch.zeros(num_nodes, dtype=torch.bool, device=dev)
    is_topic[topic] = True
    out = BatchedGraphs(
        num_graphs=len(graphs),
        num_nodes=num_nodes,
        edge_index=_cat([g.edge_index.long() + o for g, o in zip(graphs, node_off)], dim=1),
        edge_rel=_cat(edge_rel),
        node_emb=_cat([g.node_emb for g in graphs]),
        has_text=_cat([g.has_text for g in graphs]),
        rel_emb=_cat(rel_rows),
        rel_batch=counts_to_batch(rel_counts),
        q_emb=torch.stack([g.q_emb for g in graphs]),
        topic=topic,
        is_topic=is_topic,
        node_batch=counts_to_batch(node_counts),
        triple_batch=counts_to_batch(edge_counts),
        node_ptr=torch.tensor([0, *torch.tensor(node_counts).cumsum(0).tolist()], device=dev),
        edge_ptr=torch.tensor([0, *torch.tensor(edge_counts).cumsum(0).tolist()], device=dev),
        labels=_cat([g.labels.float() for g in graphs]) if all(with_labels) else None,  # type: ignore[union-attr]
        node_rows=(_cat([g.node_rows.long() for g in graphs])  # type: ignore[union-attr]
                   if all(g.node_rows is not None for g in graphs) else None),
        node_labels=(_cat([g.node_labels.float() for g in graphs])  # type: ignore[union-attr]
                     if all(g.node_labels is not None for g in graphs) else None),
        q_walk=(torch.stack([g.q_walk for g in graphs])  # type: ignore[misc]
                if all(g.q_walk is not None for g in graphs) else None),
    )
    return out.to(device) if device is not None else out


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise InputError(message)


def _to(value: Any, device: torch.device | str) -> Any:
    return value.to(device) if isinstance(value, torch.Tensor) else value


def _cat(tensors: list[torch.Tensor], dim: int = 0) -> torch.Tensor:
    # A single question (the inference path) keeps its tensors without a copy.
    return tensors[0] if len(tensors) == 1 else torch.cat(tensors, dim=dim)


def _offsets(counts: list[int]) -> list[int]:
    out, total = [], 0
    for c in counts:
        out.append(total)
        total += c
    return out
