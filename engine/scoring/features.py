"""The scorers' features: entity and relation embeddings from Milvus by id, cached per process (docs/triple-scorer.md).

:class:`FeatureStore` keeps an LRU of entity vectors (a preallocated matrix plus an id -> row map, so a
neighbourhood's features are one gather), fetches the missing ones from Milvus in batches, and holds the KG's
relation table (every relation type's vector, fetched once). :meth:`FeatureStore.question_graph` turns a
:class:`~engine.scoring.neighbourhood.Neighbourhood`, a question embedding and optional labels into the
:class:`~engine.scoring.question_graph.QuestionGraph` the models read. Entities without text (nameless, or without a
vector in Milvus) are flagged; the models put their shared learned vector there.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from engine.scoring.neighbourhood import Neighbourhood
from engine.stores.version import VersionWatch

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import GraphReader, VectorIndex

__all__ = ["DEFAULT_CACHE_ENTITIES", "FeatureStore"]

#: Entity vectors kept per process: 200k x 384 float32 is 300 MB.
DEFAULT_CACHE_ENTITIES = 200_000


class FeatureStore:
    """Entity / relation vectors of one KG under one embedding model, from a
    :class:`~engine.stores.vectors.VectorStore`.

    ``capacity`` entity vectors are cached (least recently used evicted). Thread-safe.
    """

    def __init__(self, vectors: VectorIndex, graph: GraphReader, dim: int,
                 capacity: int = DEFAULT_CACHE_ENTITIES, watch: VersionWatch | None = None) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.vectors, self.graph, self.dim, self.capacity = vectors, graph, int(dim), int(capacity)
        #: what the cache follows (engine.stores.version): the graph store's when it has one
        self.watch = watch or getattr(graph, "watch", None) or VersionWatch(getattr(graph, "version", None))
        self._generation = self.watch.generation  # the generation the cached vectors were read in
        self._rows: OrderedDict[int, int] = OrderedDict()  # eid -> row of _mat; order = recency
        self._missing: set[int] = set()  # eids Milvus has no vector for
        self._mat = np.zeros((0, self.dim), dtype=np.float32)
        self._free: list[int] = []
        self._relations: tuple[tuple[str, ...], np.ndarray, np.ndarray] | None = None
        self._lock = threading.RLock()
        self.fetched = 0  # vectors read from Milvus (for reports)

    def __len__(self) -> int:
        return len(self._rows)

    def clear(self) -> None:
        """Forget every cached vector (the KG changed: an entity re-embedded, a relation gone)."""
        with self._lock:
            self._rows.clear()
            self._missing.clear()
            self._free = list(range(self._mat.shape[0] - 1, -1, -1))
            self._relations = None

    def check_version(self) -> None:
        """Read the KG's version stamp (one small read) and clear the cache when it moved since the cache was filled,
        whichever process changed the KG (:class:`engine.stores.version.VersionWatch`)."""
        self.watch.check()
        self._follow()

    def _follow(self) -> int:
        """Clear the cache when the watch's generation moved; returns the generation (under the lock)."""
        with self._lock:
            generation = self.watch.generation
            if generation != self._generation:
                self.clear()
                self._generation = generation
            return generation

    # -- entities ----------------------------------------------------------------------------------------
    def _grow(self, need: int) -> None:
        have = self._mat.shape[0]
        size = min(self.capacity, max(need, 2 * have, 1024))
        if size > have:
            self._mat = np.concatenate([self._mat, np.zeros((size - have, self.dim), np.float32)])
            self._free.extend(range(size - 1, have - 1, -1))

    def _store(self, eid: int, vec: np.ndarray) -> None:
        if not self._free:
            self._grow(len(self._rows) + 1)
        if not self._free:  # full: evict the least recently used
            _, row = self._rows.popitem(last=False)
            self._free.append(row)
        row = self._free.pop()
        self._mat[row] = vec
        self._rows[eid] = row

    def prefetch(self, eids: Sequence[int] | np.ndarray) -> int:
        """Fetch the vectors of ``eids`` not cached yet (batched by Milvus primary key); returns how many."""
        return len(self._fetch(eids))

    def _fetch(self, eids: Sequence[int] | np.ndarray) -> dict[int, np.ndarray]:
        """Read the vectors of ``eids`` not cached yet and cache them, unless the KG's version moved while they were
        read (they are returned all the same: the caller's answer uses them once)."""
        with self._lock:
            generation = self._follow()
            want = [int(e) for e in np.unique(np.asarray(eids, dtype=np.int64))
                    if int(e) not in self._rows and int(e) not in self._missing]
            if not want:
                return {}
            got = {int(e): np.asarray(v, dtype=np.float32)
                   for e, v in self.vectors.get_vectors("entities", want).items()}
            self.fetched += len(got)
            if self.watch.keep(generation):
                for eid in want:
                    v = got.get(eid)
                    if v is None:
                        self._missing.add(eid)
                    else:
                        self._store(eid, v)
            return got

    def entity_vectors(self, eids: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``([N, d] float32, [N] bool has_vector)`` for ``eids``; rows without a vector are zero."""
        eids = np.asarray(eids, dtype=np.int64)
        with self._lock:
            got = self._fetch(eids)
            out = np.zeros((eids.shape[0], self.dim), dtype=np.float32)
            ok = np.zeros(eids.shape[0], dtype=bool)
            rows = self._rows
            idx, pos = [], []
            for i, e in enumerate(eids.tolist()):
                r = rows.get(e)
                if r is not None:
                    rows.move_to_end(e)
                    idx.append(r)
                    pos.append(i)
                elif e in got:  # read now, not kept (the KG changed meanwhile)
                    out[i] = got[e]
                    ok[i] = True
            if idx:
                out[pos] = self._mat[idx]
                ok[pos] = True
            return out, ok

    # -- relations ---------------------------------------------------------------------------------------
    def relation_table(self, refresh: bool = False) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
        """``(types sorted, [R, d] vectors, [R] bool has_vector)`` over the KG's relation catalog (fetched once)."""
        with self._lock:
            generation = self._follow()
            if self._relations is None or refresh:
                catalog = self.graph.relation_catalog(refresh=refresh)
                by_type = {ri.type: ri.rid for ri in catalog.values()}
                types = tuple(sorted(by_type))
                got = self.vectors.get_vectors("relations", list(by_type.values())) if by_type else {}
                mat = np.zeros((len(types), self.dim), dtype=np.float32)
                ok = np.zeros(len(types), dtype=bool)
                for i, t in enumerate(types):
                    v = got.get(by_type[t])
                    if v is not None:
                        mat[i] = v
                        ok[i] = True
                if not self.watch.keep(generation):  # the KG changed while they were read: not kept
                    return types, mat, ok
                self._relations = (types, mat, ok)
            return self._relations

    # -- graphs --------------------------------------------------------------------------------------------
    def question_graph(self, nb: Neighbourhood, q_emb: np.ndarray, labels: np.ndarray | None = None) -> Any:
        """The :class:`~engine.scoring.question_graph.QuestionGraph` of ``nb`` for a question embedded as ``q_emb``."""
        import torch

        from engine.scoring.question_graph import QuestionGraph

        node_emb, has_vec = self.entity_vectors(nb.nodes)
        types, rel_mat, _ = self.relation_table()
        if tuple(nb.relation_types) != types:
            # fetched before the catalog changed: map by type name
            pos = {t: i for i, t in enumerate(types)}
            remap = np.asarray([pos.get(t, 0) for t in nb.relation_types], dtype=np.int64)
            rels = remap[nb.rels] if nb.num_edges else nb.rels
        else:
            rels = nb.rels
        return QuestionGraph(
            num_nodes=nb.num_nodes,
            edge_index=torch.from_numpy(np.stack([nb.heads, nb.tails]).astype(np.int64).reshape(2, -1)),
            edge_rel=torch.from_numpy(np.asarray(rels, dtype=np.int64)),
            node_emb=torch.from_numpy(node_emb),
            has_text=torch.from_numpy(has_vec & ~nb.nameless),
            rel_emb=torch.from_numpy(rel_mat) if rel_mat.shape[0] else torch.zeros(1, self.dim),
            q_emb=torch.as_tensor(np.asarray(q_emb, dtype=np.float32)),
            topic=torch.from_numpy(nb.anchors.astype(np.int64)),
            labels=None if labels is None else torch.as_tensor(np.asarray(labels, dtype=np.float32)),
        )
