"""The one way a process forgets what a change made stale: every cache derived from a KG follows its version stamp.

The KG's version node (``(:IsoragKGVersion {kg})``) holds a *stamp* that moves after every write to the KG is
visible: when a change set's batch commits in Neo4j, and again when the vectors it made stale are written to Milvus
(a load, an adoption and a repair move it when they are done). It also holds the Milvus timestamp of that last
vector write.

A :class:`VersionWatch` is shared by everything of one engine that caches the KG (the relation catalog, the relation
vectors and "has types" of the retriever, the scorer's entity and relation vectors). Each cache keeps what it
computed under the watch's *generation* and throws it away when the generation moves. :meth:`VersionWatch.check`
reads the stamp (one small read, at the start of a retrieval or a scoring) and starts a new generation when it moved,
whoever moved it; it then tells the vector store the timestamp of the last vector write, so that what the caches read
next from Milvus includes it. :meth:`VersionWatch.forget` starts one after a write through this process.

A value is kept only under the generation read *before* it was computed (:meth:`VersionWatch.keep`): a value read
while a change lands is either thrown away at once or kept under the old generation, which the next check ends. So
no cache holds values computed before a change under a stamp from after it.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Generic, Mapping, TypeVar

_T = TypeVar("_T")


class VersionWatch:
    """The version stamp of one KG as this process last read it, and the generation of its caches."""

    def __init__(self, read: Callable[[], Mapping[str, Any]] | None) -> None:
        self._read = read
        self._lock = threading.Lock()
        self.stamp: int | None = None  # the stamp last read (None: not read since the last forget)
        self.generation = 0  # moves with the stamp and with forget(): caches keep what they computed under one
        self._observers: list[Callable[[int], None]] = []

    def on_vector_writes(self, observe: Callable[[int], None]) -> None:
        """Call ``observe(ts)`` with the Milvus timestamp of the KG's last vector write whenever the stamp moves
        (:meth:`engine.stores.vectors.VectorStore.observe`)."""
        with self._lock:
            self._observers.append(observe)

    def check(self, value: Mapping[str, Any] | None = None) -> Mapping[str, Any] | None:
        """Read the KG's version (``seq``, ``at``, ``stamp``...; None for a graph without versions; ``value``: one
        read already, by the caller) and start a new generation when its stamp moved since the last check."""
        if self._read is None:
            return None
        v = value if value is not None else self._read()
        stamp = int(v.get("stamp") or 0)
        with self._lock:
            moved = stamp != self.stamp
            if moved:
                self.stamp = stamp
                self.generation += 1
            observers = list(self._observers) if moved else []
        ts = int(v.get("vectors_ts") or 0)
        for observe in observers:
            observe(ts)
        return v

    def forget(self) -> None:
        """Start a new generation now (after a write through this process); the next check reads the stamp anew."""
        with self._lock:
            self.stamp = None
            self.generation += 1

    def keep(self, generation: int) -> bool:
        """Whether a value computed after reading ``generation`` may be kept (no change started another since)."""
        return generation == self.generation


class Cached(Generic[_T]):
    """One value derived from the KG (the relation catalog, whether it has types...), computed at first use and
    again in every new generation of its :class:`VersionWatch`."""

    def __init__(self, watch: VersionWatch, compute: Callable[[], _T]) -> None:
        self.watch, self._compute = watch, compute
        self._value: _T | None = None
        self._generation: int | None = None

    def get(self, refresh: bool = False) -> _T:
        """The value of this generation (``refresh``: computed again in any case)."""
        generation = self.watch.generation
        if refresh or self._generation != generation:
            value = self._compute()
            if self.watch.keep(generation):
                self._value, self._generation = value, generation
            return value
        return self._value  # type: ignore[return-value]  # computed in this generation

    def clear(self) -> None:
        self._value, self._generation = None, None


__all__ = ["VersionWatch", "Cached"]
