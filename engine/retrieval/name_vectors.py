"""The table of name vectors kept beside the graph read replica: the stored vectors of the entities embedded from
their name alone, in process, so that a named pattern node whose text is such an entity's exact name takes its
vector without a round trip to Milvus.

* **What it holds**: for a replica built while no change set's vector work was pending (``vectors_settled``), the
  stored vector of every entity without a description (those :meth:`GraphReplica.name_vector_ids` may return), as
  float32 rows, with ``rows``: the row of each of the replica's entity numbers (-1 for an entity with a
  description, or one Milvus lacks). They are the very floats Milvus returns for a look-up by id, so a query that
  takes them gets the results it would get reading them.
* **Read** in a background thread after the replica is ready (queries keep reading Milvus meanwhile): one pass of
  a query iterator over the KG's entity collection (strong consistency), between two reads of the KG's version.
  A change set writes vectors only after it committed a batch, and a batch moves the version's stamp: a pass that
  began and ended on the replica's version saw no vector of another. Otherwise it is dropped and read again.
* **Keyed** by the replica's :class:`VersionKey` (and the vector collection it was read from): a table never serves
  another version; a newer replica gets a table of its own. It is saved beside the replica's file under
  ``$ISORAG_HOME/replicas/<kg>/`` (``<version>.names.npz``), loaded from there by a new process, and removed with
  the replica's files.
* **Bounded** by ``name_vector_cache_mb`` (0: no table): a table that would exceed it is not read, and its state
  says why.
"""

from __future__ import annotations

import ast
import hashlib
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from engine._errors import IsoragError
from engine.retrieval.replica import (FLAG_DESCRIPTION, GraphReplica, VersionKey, graph_location, keep_beside,
                                      version_file, version_key)

log = logging.getLogger(__name__)

__all__ = ["NameTableState", "NameVectorTable", "NameTableTooLarge", "forget_name_tables", "forgotten",
           "name_table_for", "read_name_table"]

#: file format of the saved tables (a file of another format is ignored and read again)
FILE_FORMAT = 1
#: rows read from Milvus per batch of the query iterator
READ_BATCH = 4_096
#: seconds after a failed read before a query starts another
RETRY_AFTER_S = 30.0


class NameTableTooLarge(IsoragError):
    """The table of name vectors would exceed its memory guard (``name_vector_cache_mb``)."""


def vector_source(vectors: Any) -> str:
    """The entity collection a table is read from (its server and name): a table is kept for one."""
    names = getattr(vectors, "names", None) or {}
    return f"{getattr(vectors, 'uri', '')}#{names.get('entities', '') if isinstance(names, Mapping) else ''}"


def file_suffix(source: str) -> str:
    """The suffix of a table's file beside its replica's: ``.names.<digest of its source>.npz`` (the KG's tables of
    two embedding models do not share a file)."""
    return f".names.{hashlib.blake2b(source.encode('utf-8'), digest_size=6).hexdigest()}.npz"


class NameVectorTable:
    """The stored vectors of one replica's entities embedded from their names (see the module docstring)."""

    def __init__(self, key: VersionKey, source: str, rows: np.ndarray, mat: np.ndarray, build_s: float = 0.0,
                 origin: str = "milvus") -> None:
        self.key, self.source = key, source
        #: the row of ``mat`` of each of the replica's entity numbers (-1: none)
        self.rows = rows
        self.mat = mat
        self.build_s = build_s
        self.origin = origin  # "milvus" (read) or "file"

    @property
    def nbytes(self) -> int:
        return int(self.rows.nbytes + self.mat.nbytes)

    @property
    def mb(self) -> float:
        return round(self.nbytes / 2**20, 3)

    @property
    def count(self) -> int:
        """Entities it holds a vector of."""
        return int(np.count_nonzero(self.rows >= 0))

    def info(self) -> dict[str, Any]:
        return {"mb": self.mb, "vectors": self.count, "build_s": round(self.build_s, 3), "from": self.origin}

    def vectors(self, replica: GraphReplica, eids: Sequence[int]) -> dict[int, np.ndarray]:
        """eid -> stored vector of the eids it holds (copies: the table may be dropped while they are in use).
        ``replica`` must be the one it was read for (the same key)."""
        if replica.key != self.key:
            raise ValueError(f"a name table of version {self.key.seq} asked with a replica of {replica.key.seq}")
        idx = replica.index(eids)
        ok = idx >= 0
        r = np.full(len(idx), -1, dtype=np.int64)
        r[ok] = self.rows[idx[ok]]
        have = np.flatnonzero(r >= 0)
        got = self.mat[r[have]]  # (fancy indexing: a new array)
        return {int(eids[j]): got[n] for n, j in enumerate(have.tolist())}

    # -- files --------------------------------------------------------------------------------------------
    def save(self, path: Path) -> None:
        """Write the table to ``path`` (an uncompressed ``.npz``; written aside, then renamed)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        meta = repr({"format": FILE_FORMAT, "key": self.key.__dict__, "source": self.source,
                     "build_s": self.build_s}).encode("utf-8")
        with open(tmp, "wb") as f:
            np.savez(f, meta=np.frombuffer(meta, dtype=np.uint8), rows=self.rows, mat=self.mat)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path, key: VersionKey, source: str, n: int) -> "NameVectorTable | None":
        """The table saved at ``path`` if it is of version ``key``, read from ``source``, of this format and of a
        replica of ``n`` entities; else None."""
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = ast.literal_eval(bytes(z["meta"]).decode("utf-8"))
                if meta.get("format") != FILE_FORMAT or VersionKey(**meta["key"]) != key \
                        or meta.get("source") != source:
                    return None
                rows, mat = z["rows"], z["mat"]
        except (OSError, ValueError, KeyError, SyntaxError, TypeError) as e:
            log.info("name table file %s not used: %s", path, e)
            return None
        if len(rows) != n or mat.dtype != np.float32 or mat.ndim != 2:
            return None
        return cls(key, source, rows, mat, float(meta.get("build_s") or 0.0), origin="file")


def read_name_table(graph: Any, vectors: Any, replica: GraphReplica, limit_bytes: int) -> NameVectorTable | None:
    """The stored vectors of ``replica``'s entities without a description, read from Milvus by one pass of a query
    iterator between two reads of the KG's version; None when the KG is not (or no longer) at the replica's version
    (the table may then hold vectors of another). Raises :class:`NameTableTooLarge` over ``limit_bytes``."""
    t0 = time.perf_counter()
    plain = (replica.flags & FLAG_DESCRIPTION) == 0
    count = int(np.count_nonzero(plain))
    dim = int(vectors.dim)
    idx_t = np.int32 if count < 2**31 else np.int64
    est = count * dim * 4 + replica.n * np.dtype(idx_t).itemsize
    if est > limit_bytes:
        raise NameTableTooLarge(f"{est / 2**20:.1f} MB for {count:,} name vectors, over the limit of "
                                f"{limit_bytes / 2**20:.0f} MB")
    if version_key(graph.kg, graph.version()) != replica.key:
        return None
    rows: np.ndarray = np.full(replica.n, -1, dtype=idx_t)
    rows[plain] = np.arange(count, dtype=idx_t)
    mat = np.zeros((count, dim), dtype=np.float32)
    filled = np.zeros(count, dtype=bool)
    for ids, vecs in vectors.iter_vectors("entities", READ_BATCH):
        at = replica.index(ids)
        ok = at >= 0
        r: np.ndarray = rows[at[ok]]
        keep = r >= 0
        mat[r[keep]] = vecs[ok][keep]
        filled[r[keep]] = True
    if version_key(graph.kg, graph.version()) != replica.key:
        return None
    if not filled.all():  # entities Milvus lacks: read by id (and not found) as before
        held = rows >= 0
        rows[held & ~filled[np.where(held, rows, 0)]] = -1
    return NameVectorTable(replica.key, vector_source(vectors), rows, mat, time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------------------------------
# the tables of this process
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class NameTableState:
    """Where the name table of a query's replica stands: ``ready``, ``building``, ``off``
    (``name_vector_cache_mb`` is 0), ``unsettled`` (the replica was built while a change set's vector work was
    pending: no stored vector stands for a name), ``unavailable`` (the vector store cannot iterate its rows),
    ``too large`` (over the guard) or ``failed`` (the last read's error, in ``why``)."""

    state: str
    why: str = ""
    mb: float | None = None

    def info(self, table: NameVectorTable | None) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state}
        if self.why:
            out["why"] = self.why
        if table is not None:
            out.update(table.info())
        elif self.mb is not None:
            out["mb"] = self.mb
        return out


class _Slot:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.table: NameVectorTable | None = None
        self.thread: threading.Thread | None = None
        self.too_large: tuple[VersionKey, str, int] | None = None  # (key, why, the limit it was over)
        self.failed: tuple[VersionKey, str, float] | None = None


_SLOTS: dict[tuple[str, str, str], _Slot] = {}
_SLOTS_LOCK = threading.Lock()
_FORGOTTEN = [0]  # how many times tables were forgotten in this process (what a holder of a table checks)


def forgotten() -> int:
    """A count that moves whenever :func:`forget_name_tables` runs: a caller that keeps a table it was given (to
    skip the look-up's lock) keeps it only while this count stays."""
    return _FORGOTTEN[0]


def _slot(graph: Any, source: str) -> _Slot:
    k = (graph_location(graph), graph.kg, source)
    with _SLOTS_LOCK:
        s = _SLOTS.get(k)
        if s is None:
            s = _SLOTS[k] = _Slot()
        return s


def name_table_for(graph: Any, vectors: Any, replica: GraphReplica, limit_mb: int, *,
                   wait: bool = False) -> tuple[NameVectorTable | None, NameTableState]:
    """The name table of ``replica`` when this process holds it, else None and its state; a missing one starts its
    read (from its file, else from Milvus) in the background (``wait``: and waits for it). A table of another
    version is dropped, never served."""
    if limit_mb <= 0:
        return None, NameTableState("off")
    if not replica.vectors_settled:
        return None, NameTableState("unsettled", "the replica was built while a change set's vector work was pending")
    if not callable(getattr(vectors, "iter_vectors", None)):
        return None, NameTableState("unavailable", "the vector store cannot iterate its rows")
    slot = _slot(graph, vector_source(vectors))
    key = replica.key
    for _ in range(3):  # (waiting: a read of an older replica may be under way, then this one's)
        with slot.lock:
            table = slot.table
            if table is not None and table.key == key:
                if table.nbytes <= limit_mb * 2**20:
                    return table, NameTableState("ready", mb=table.mb)
                return None, NameTableState("too large", f"{table.mb:.1f} MB over name_vector_cache_mb={limit_mb}",
                                            table.mb)
            if table is not None:
                slot.table = None  # of another version: never served, its memory given back
            over = slot.too_large
            if over is not None and over[0] == key and limit_mb <= over[2]:
                return None, NameTableState("too large", over[1])
            failed = slot.failed
            if failed is not None and failed[0] == key and time.monotonic() - failed[2] < RETRY_AFTER_S:
                return None, NameTableState("failed", failed[1])
            thread = slot.thread
            if thread is None or not thread.is_alive():
                thread = slot.thread = threading.Thread(target=_build, args=(graph, vectors, replica, slot, limit_mb),
                                                        daemon=True, name=f"isorag-names-{key.kg}")
                thread.start()
        if not wait:
            break
        thread.join()
    return None, NameTableState("building")


def _build(graph: Any, vectors: Any, replica: GraphReplica, slot: _Slot, limit_mb: int) -> None:
    """The background read: from the file of the replica's version when there is one, else from Milvus."""
    key = replica.key
    source = vector_source(vectors)
    try:
        path = version_file(graph, key, file_suffix(source))
        table = NameVectorTable.load(path, key, source, replica.n) if path.exists() else None
        if table is None:
            table = read_name_table(graph, vectors, replica, limit_mb * 2**20)
            if table is None:
                with slot.lock:
                    slot.failed = (key, "the KG changed while its name vectors were read", time.monotonic())
                return
            _save(path, table, file_suffix(source))
        with slot.lock:
            slot.table, slot.failed, slot.too_large = table, None, None
        log.info("name table of KG %r (version %s): %s", key.kg, key.seq, table.info())
    except NameTableTooLarge as e:
        with slot.lock:
            slot.too_large = (key, str(e), limit_mb)
    except Exception as e:  # noqa: BLE001 - a failed read leaves queries reading Milvus; a later query retries
        log.warning("name table of KG %r not read: %s", key.kg, e)
        with slot.lock:
            slot.failed = (key, f"{type(e).__name__}: {e}", time.monotonic())


def _save(path: Path, table: NameVectorTable, suffix: str) -> None:
    """Save the table beside its replica's file (best effort); those of other versions from its source go."""
    try:
        table.save(path)
        for other in path.parent.glob(f"*{suffix}"):
            if other != path:
                other.unlink(missing_ok=True)
    except OSError as e:
        log.info("name table not saved to %s: %s", path, e)


def forget_name_tables(graph: Any) -> None:
    """Forget this process's name tables of ``graph``'s KG (their files stay)."""
    where = graph_location(graph)
    with _SLOTS_LOCK:
        _FORGOTTEN[0] += 1
        slots = [s for k, s in _SLOTS.items() if k[0] == where and k[1] == graph.kg]
    for s in slots:
        with s.lock:
            s.table, s.too_large, s.failed = None, None, None


keep_beside(forget_name_tables)  # forgotten with the replica beside which they are kept
