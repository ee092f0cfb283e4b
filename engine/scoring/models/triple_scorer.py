"""The triple scorers' base class: ``forward(batch) -> one logit per candidate triple``, with the parts both
models share (their remembered constructor arguments for checkpoints, the entity-table cache, the relation walk)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from engine.scoring.models.query_walk import QueryWalk
from engine.scoring.question_graph import BatchedGraphs, QuestionGraph, batch_graphs

__all__ = ["TripleScorer"]


class TripleScorer(nn.Module):
    """Base of the triple scorers: ``forward(batch) -> logits [E_total]``, one logit per candidate triple.

    Subclasses record their constructor arguments with :meth:`_remember_config`, so a checkpoint can hold
    ``(type(model).__name__, model.config, model.state_dict())`` and rebuild the same model.
    """

    _config: dict[str, Any]
    _entity_table: tuple[torch.Tensor, tuple[int, ...]] | None = None
    #: the shared learned vector of entities without text (set by every subclass)
    nameless: nn.Parameter
    #: the relation walk and the Linear reading its triple features (subclasses built with ``walk=True``; else None)
    walk: QueryWalk | None
    walk_edge: nn.Linear | None

    def _remember_config(self, **kwargs: Any) -> None:
        self._config = dict(kwargs)

    # -- entity table: the question-independent part of the first layer, once per entity ------------------
    def entity_terms(self, emb: torch.Tensor) -> torch.Tensor:
        """The first layer's terms of entity text vectors ``[M, d] -> [M, P]`` (no question, no structure)."""
        raise NotImplementedError

    def _weights_version(self) -> tuple[int, ...]:
        return tuple(p._version for p in self.parameters())

    @torch.no_grad()
    def attach_entity_table(self, emb: torch.Tensor | None) -> None:
        """Project a table of entity text vectors ``[M, d]`` once (:meth:`entity_terms`), for graphs whose
        ``node_rows`` index it. Entity text terms do not depend on the question, so an eval-mode forward then
        gathers them instead of multiplying every node's ``d``-dim vector again (the largest matmul of both
        models). The numbers are the same. The table is dropped by ``train()`` and ignored once any weight
        changes (an optimizer step, ``load_state_dict``); ``None`` detaches it."""
        if emb is None:
            self._entity_table = None
            return
        param = next(self.parameters())
        table = self.entity_terms(emb.to(device=param.device, dtype=param.dtype))
        self._entity_table = (table, self._weights_version())

    def attach_entity_terms(self, terms: torch.Tensor | None) -> None:
        """Attach an already projected table (rows of :meth:`entity_terms`, e.g. grown incrementally by a
        service as new entities come), with the same rules as :meth:`attach_entity_table`."""
        self._entity_table = None if terms is None else (terms, self._weights_version())

    def _table_terms(self, b: BatchedGraphs) -> torch.Tensor | None:
        """The text terms of ``b``'s nodes from the attached table, when usable (eval mode, rows given, weights
        unchanged): its rows, and the terms of the shared learned vector (``self.nameless``) in the rows of
        nameless entities, written into those rows alone (a ``where`` over all of them was a whole extra pass
        over an ``[N, P]`` tensor, 4 ms of a 45 ms QR-GAT forward at 10k triples)."""
        if self._entity_table is None or b.node_rows is None or self.training:
            return None
        table, version = self._entity_table
        if version != self._weights_version():
            self._entity_table = None
            return None
        out = table.index_select(0, b.node_rows)
        nameless = ~b.has_text
        if bool(nameless.any()):
            out[nameless] = self.entity_terms(self.nameless.unsqueeze(0).to(out.dtype))
        return out

    # -- the question's relation walk (engine.scoring.models.query_walk), for models built with walk=True
    # --------------- A model that has one sets ``self.walk`` (a QueryWalk) and ``self.walk_edge`` (the Linear reading
    # its triple features) in its constructor, where their parameters fall in its initialisation order.
    def _walk_features(self, b: BatchedGraphs, dtype: torch.dtype) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The walk's node features ``[N, 2]`` and triple features ``[E, walk_rounds + 1]`` (``(None, None)``
        without a walk); where the walk ends is kept in ``self.walk_end`` for the auxiliary loss and answer
        extraction."""
        walk = getattr(self, "walk", None)
        if walk is None:
            return None, None
        node, edge, end = walk(b, dtype)
        self.walk_end = end
        return node, edge

    def _reset_walk(self) -> None:
        walk, walk_edge = getattr(self, "walk", None), getattr(self, "walk_edge", None)
        if walk is not None and walk_edge is not None:  # (set together)
            walk.reset_parameters()
            walk_edge.reset_parameters()

    def train(self, mode: bool = True) -> TripleScorer:
        if mode:
            self._entity_table = None
        return super().train(mode)

    @property
    def config(self) -> dict[str, Any]:
        return dict(self._config)

    def _prepare(self, graph: QuestionGraph | BatchedGraphs) -> BatchedGraphs:
        batch = batch_graphs([graph]) if isinstance(graph, QuestionGraph) else graph
        param = next(self.parameters(), None)
        if param is not None and batch.edge_index.device != param.device:
            batch = batch.to(param.device)
        return batch

    @torch.no_grad()
    def score(self, graph: QuestionGraph | BatchedGraphs) -> torch.Tensor:
        """Sigmoid confidences ``[E_total]`` in eval mode (the mode is restored afterwards)."""
        was_training = self.training
        self.eval()
        try:
            return torch.sigmoid(self(graph))
        finally:
            self.train(was_training)
