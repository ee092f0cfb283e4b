"""Names looked up in process: the entity names a graph read replica holds (:mod:`engine.retrieval.replica`),
exactly and folded (:func:`engine.linking.names.fold_name`), for the linker of plain text (:mod:`.text`) to find a
question's names without a round trip to Neo4j.

The folded forms of the replica's names are indexed here at first use (one pass over its names: about 0.2 s for
43,000 names, 16 bytes a name); a text's exact names are those of its folded matches written as it is. The index is
kept as long as the replica object lives (a new version of the KG is a new replica, indexed anew). What the replica
does not hold, aliases and near spellings, is still asked of Neo4j's full-text index: the linker does so whenever
the in-process look-up leaves a name of the text unknown (:func:`engine.linking.text.needs_fulltext`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from engine.linking.names import fold_name
from engine.linking.search import EntityNames

__all__ = ["LocalNames", "NameSource", "local_names"]


class NameSource(Protocol):
    """What :class:`LocalNames` reads of a replica (:class:`engine.retrieval.replica.GraphReplica`)."""

    n: int
    eids: np.ndarray

    def name(self, i: int) -> str: ...

    def key_of(self, i: int) -> str: ...


class LocalNames:
    """The exact and folded names of one replica's entities (module docstring)."""

    def __init__(self, source: NameSource) -> None:
        self.source = source
        self._folded: tuple[np.ndarray, np.ndarray] | None = None  # (sorted hashes of folded names, entity numbers)
        self._lock = threading.Lock()

    def _index(self) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            if self._folded is None:
                src = self.source
                # (Python's string hash: stable within the process, which is all an in-process index needs)
                hashes = np.fromiter((hash(fold_name(src.name(i))) for i in range(src.n)), dtype=np.int64,
                                     count=src.n)
                order = np.argsort(hashes, kind="stable")
                self._folded = (hashes[order], order.astype(np.int64))
            return self._folded

    def lookup(self, texts: Sequence[str]) -> tuple[list[list[int]], list[list[int]], dict[int, EntityNames]]:
        """What :func:`engine.linking.search.lookup_names` returns for ``texts`` as both its lists, read in process:
        per text the entities whose name folds alike (where Neo4j's full-text index gives near spellings), per text
        the entities named exactly so, and their names and keys (no aliases: the replica holds none)."""
        src = self.source
        hashes, idx = self._index()
        folded = [fold_name(t) for t in texts]
        want = np.fromiter((hash(f) for f in folded), dtype=np.int64, count=len(folded))
        los = np.searchsorted(hashes, want, "left")
        his = np.searchsorted(hashes, want, "right")
        by_text: list[list[int]] = [[] for _ in texts]
        by_name: list[list[int]] = [[] for _ in texts]
        names: dict[int, EntityNames] = {}
        for k, (t, f, lo, hi) in enumerate(zip(texts, folded, los.tolist(), his.tolist())):
            if not f or lo == hi:  # (most spans of a question are no name)
                continue
            for i in sorted(idx[lo:hi].tolist()):
                name = src.name(i)
                if fold_name(name) != f:  # (another name with the same hash)
                    continue
                eid = int(src.eids[i])
                if eid not in names:
                    names[eid] = EntityNames(eid, name, src.key_of(i))
                by_text[k].append(eid)
                if name == t:
                    by_name[k].append(eid)
        return by_text, by_name, names


_BY_SOURCE: weakref.WeakKeyDictionary[Any, LocalNames] = weakref.WeakKeyDictionary()
_BY_SOURCE_LOCK = threading.Lock()


def local_names(source: NameSource) -> LocalNames:
    """The :class:`LocalNames` of a replica, one per replica object (its folded index built once)."""
    with _BY_SOURCE_LOCK:
        got = _BY_SOURCE.get(source)
        if got is None:
            got = _BY_SOURCE[source] = LocalNames(source)
        return got
