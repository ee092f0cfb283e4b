"""The in-process graph read replica: a KG's adjacency in numpy arrays, so that matching needs no round trip.

Neo4j stays the store of record; the replica is a read cache of one version of one KG, part of the matching stage.
It holds, for the KG's entities (ids, names, keys, entity types) and for each direction, a CSR adjacency whose
rows are entities and whose row segments are sorted by relationship type, then by the other end: the relationships
of one entity, of one type, in one direction are one contiguous slice (two binary searches in a short row), and
the memory is O(entities + relationships) whatever the number of relation types (a separate CSR per type would
cost an index over every entity for each of thousands of types).

* **Built** by one streamed read (``cypher/replica_stream.cypher``: one row per entity with its outgoing
  relationships) at first use per KG and process, in a background thread while queries take the one-statement
  path, or loaded from a file under ``$ISORAG_HOME/replicas/<kg>/`` written by an earlier build of the same KG
  version.
* **Fresh**: it is stamped with the KG's version (:func:`version_key`: the KG's identity when it has one, its
  sequence number, its stamp, which moves with every committed batch of a change set, and its time). A query reads
  the version first (as it always did) and uses the replica only when the stamps are equal; a build reads the
  version before and after its stream and is kept only when nothing was committed in between. A replica of an
  older version is never used: a newer one is built in the background and queries go to Cypher meanwhile.
* **Bounded**: a KG whose replica would exceed ``graph_cache_mb`` (estimated from its counts before the read,
  measured after) gets none; its queries take the one-statement path.

The expansions it answers (:class:`ReplicaExpansions`) are those of the Cypher expansion path, row for row (see
:class:`engine.retrieval.matcher.ExpansionSource`): the best-first search, its bound, its tie-break, the
injective modes, narrowing, the degree cap and the deadline are the matcher's own, whichever source it reads.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol, Sequence

import numpy as np

from engine._config import isorag_home
from engine._cypher import cypher
from engine._errors import DeadlineExceeded, IsoragError

if TYPE_CHECKING:  # pragma: no cover
    from engine.retrieval.matcher import Fetch, SearchStats

log = logging.getLogger(__name__)

__all__ = ["GraphReplica", "ReplicaExpansions", "ReplicaState", "VersionKey", "drop_replica_files", "forget_replica",
           "graph_location", "keep_beside", "replica_for", "replica_state", "version_file", "version_key"]

#: bytes estimated per entity (id, offsets, name and key text, hash index) and per relationship (both directions),
#: for the guard that decides before a build whether the replica would fit
EST_ENTITY_BYTES = 96
EST_RELATIONSHIP_BYTES = 12
#: a build whose KG changed while it read is tried again this many times before it waits for the next query
BUILD_TRIES = 3
#: seconds between two tries of a build that found the KG changing
BUILD_PAUSE_S = 0.05
#: file format of the saved replicas (a file of another format is ignored and rebuilt)
FILE_FORMAT = 3


# ---------------------------------------------------------------------------------------------------------------
# versions
# ---------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VersionKey:
    """What a replica is stamped with: the KG and the version it was built on."""

    kg: str
    identity: str
    seq: int
    stamp: int
    at: str

    def digest(self, where: str) -> str:
        """A file name for this version of the KG at ``where`` (the Neo4j URI and database)."""
        text = "\x1f".join((where, self.kg, self.identity, str(self.seq), str(self.stamp), self.at))
        return hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()


def version_key(kg: str, version: Mapping[str, Any]) -> VersionKey:
    """The replica's key for a KG version as :meth:`engine.stores.graph.GraphStore.version` reads it: its identity
    (when the version node records one), sequence number, stamp and time. The one place that reads those fields."""
    ident = version.get("kg_id", version.get("identity"))
    return VersionKey(kg, "" if ident is None else str(ident), int(version.get("seq") or 0),
                      int(version.get("stamp") or 0), str(version.get("at") or ""))


class StreamingReader(Protocol):
    """What a build reads: the KG's version and one streamed read (:class:`engine.stores.graph.GraphStore`)."""

    @property
    def kg(self) -> str: ...

    def version(self) -> dict[str, Any]: ...

    def read(self, query: Any, **params: Any) -> list[dict[str, Any]]: ...

    def read_stream(self, query: str, consume: Any, **params: Any) -> Any: ...


# ---------------------------------------------------------------------------------------------------------------
# the arrays
# ---------------------------------------------------------------------------------------------------------------
_ARRAYS = ("eids", "name_off", "name_blob", "key_idx", "key_off", "key_blob", "flags", "etype_off", "etype_tid",
           "adj_ptr", "adj_type", "adj_nbr", "adj_out", "name_hash", "name_hash_idx")
#: flags: the entity has a description (its vector is not the embedding of its name alone)
FLAG_DESCRIPTION = 1


def _name_hash(names: Iterable[bytes]) -> np.ndarray:
    return np.fromiter((int.from_bytes(hashlib.blake2b(n, digest_size=8).digest(), "little") for n in names),
                       dtype=np.uint64)


class GraphReplica:
    """One version of one KG's graph, in arrays (see the module docstring). Read-only once built.

    Entities are numbered 0..n-1 in eid order (``eids`` is sorted); ``adj_*`` is the CSR of each entity's
    relationships, both directions in one row (``adj_ptr`` row offsets, ``adj_type`` relationship type index into
    :attr:`types`, ``adj_nbr`` the other end, ``adj_out`` whether it starts at the row's entity; a self-loop is
    one entry that starts there), each row sorted by (type, other end). One row serves an undirected expansion
    without a concatenation; a directed one masks it by ``adj_out``."""

    def __init__(self, key: VersionKey, types: Sequence[str], arrays: Mapping[str, np.ndarray],
                 build_s: float = 0.0, source: str = "neo4j", vectors_settled: bool = False) -> None:
        self.key = key
        #: Milvus held the vectors of this version's entity texts when it was built (no change set's vector work
        #: was pending): an entity's stored vector may then stand for its name's embedding (:meth:`name_vector_ids`)
        self.vectors_settled = vectors_settled
        self.types = list(types)
        self.type_index = {t: i for i, t in enumerate(self.types)}
        for name in _ARRAYS:
            setattr(self, name, arrays[name])
        self.eids: np.ndarray
        self.name_off: np.ndarray
        self.name_blob: np.ndarray
        self.key_idx: np.ndarray
        self.key_off: np.ndarray
        self.key_blob: np.ndarray
        self.flags: np.ndarray
        self.etype_off: np.ndarray
        self.etype_tid: np.ndarray
        self.adj_ptr: np.ndarray
        self.adj_type: np.ndarray
        self.adj_nbr: np.ndarray
        self.adj_out: np.ndarray
        self.name_hash: np.ndarray
        self.name_hash_idx: np.ndarray
        self.build_s = build_s
        self.source = source  # "neo4j" (streamed) or "file"
        self.n = int(len(self.eids))
        self.m = int(np.count_nonzero(self.adj_out))

    # -- size ---------------------------------------------------------------------------------------------
    @property
    def nbytes(self) -> int:
        """Bytes of its arrays (and of its type names)."""
        return int(sum(getattr(self, a).nbytes for a in _ARRAYS)) + sum(len(t) + 50 for t in self.types)

    @property
    def mb(self) -> float:
        return round(self.nbytes / 2**20, 3)

    def info(self) -> dict[str, Any]:
        """What a result or ``stats`` reports of it."""
        return {"mb": self.mb, "entities": self.n, "relationships": self.m, "types": len(self.types),
                "seq": self.key.seq, "stamp": self.key.stamp, "build_s": round(self.build_s, 3), "from": self.source,
                "vectors_settled": self.vectors_settled}

    # -- entities -----------------------------------------------------------------------------------------
    def index(self, eids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Entity numbers of ``eids`` (-1 for an eid the replica lacks)."""
        q = np.asarray(eids, dtype=np.int64)
        if not len(q) or not self.n:
            return np.full(len(q), -1, dtype=np.int64)
        pos = np.searchsorted(self.eids, q)
        pos[pos >= self.n] = 0
        return np.where(self.eids[pos] == q, pos, -1)

    def _text(self, off: np.ndarray, blob: np.ndarray, i: int) -> str:
        return bytes(blob[off[i]:off[i + 1]]).decode("utf-8")

    def name(self, i: int) -> str:
        return self._text(self.name_off, self.name_blob, i)

    def key_of(self, i: int) -> str:
        """The entity's source key (stored only where it differs from its name)."""
        j = int(np.searchsorted(self.key_idx, i))
        if j < len(self.key_idx) and int(self.key_idx[j]) == i:
            return self._text(self.key_off, self.key_blob, j)
        return self.name(i)

    def entities(self, eids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """eid -> ``{eid, key, name}`` for the eids it holds (as :meth:`engine.stores.graph.GraphStore.entities`)."""
        idx = self.index(eids)
        out: dict[int, dict[str, Any]] = {}
        if not len(idx):
            return out
        kpos = np.searchsorted(self.key_idx, idx) if len(self.key_idx) else np.zeros(len(idx), dtype=np.int64)
        off, blob, koff, kblob, kidx = self.name_off, self.name_blob, self.key_off, self.key_blob, self.key_idx
        nk = len(kidx)
        for eid, i, j in zip(eids, idx.tolist(), kpos.tolist()):
            if i < 0:
                continue
            name = blob[off[i]:off[i + 1]].tobytes().decode("utf-8")
            key = (kblob[koff[j]:koff[j + 1]].tobytes().decode("utf-8") if j < nk and kidx[j] == i else name)
            out[int(eid)] = {"eid": int(eid), "key": key, "name": name}
        return out

    def entities_by_name(self, names: Sequence[str]) -> list[dict[str, Any]]:
        """``{name, eid, key}`` of the entities with exactly these names (several may share one)."""
        out: list[dict[str, Any]] = []
        for text in dict.fromkeys(names):
            h = _name_hash([text.encode("utf-8")])[0]
            lo = int(np.searchsorted(self.name_hash, h, side="left"))
            hi = int(np.searchsorted(self.name_hash, h, side="right"))
            for i in sorted(int(x) for x in self.name_hash_idx[lo:hi]):
                if self.name(i) == text:
                    out.append({"name": text, "eid": int(self.eids[i]), "key": self.key_of(i)})
        return out

    def has_description(self, i: int) -> bool:
        return bool(self.flags[i] & FLAG_DESCRIPTION)

    def name_vector_ids(self, texts: Sequence[str]) -> dict[str, int]:
        """For each text that is exactly the name of an entity embedded from its name alone (no description), one
        such entity: its stored vector is the text's embedding (the load embedded that very text). Empty unless
        the vectors were settled when the replica was built."""
        if not self.vectors_settled:
            return {}
        out: dict[str, int] = {}
        for r in self.entities_by_name(texts):
            if r["name"] not in out and not self.has_description(int(self.index([r["eid"]])[0])):
                out[r["name"]] = r["eid"]
        return out

    def entities_of_types(self, tids: Sequence[int], limit: int) -> list[int]:
        """eids of the entities of any of these entity types, lowest first, at most ``limit``
        (as ``cypher/entities_of_types.cypher``)."""
        if not len(tids) or not len(self.etype_tid):
            return []
        hit = np.isin(self.etype_tid, np.asarray(list(tids), dtype=np.int64))
        owner = np.repeat(np.arange(self.n), np.diff(self.etype_off))
        idx = np.unique(owner[hit])  # entity numbers ascend with eids
        return [int(e) for e in self.eids[idx[:limit]]]

    # -- adjacency ----------------------------------------------------------------------------------------
    def row(self, i: int, forward: bool | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The relationships at entity ``i`` as (types, other ends, starts at ``i``): outgoing for ``forward``
        True, incoming for False, both for None (a self-loop once, as Neo4j matches it)."""
        a, b = int(self.adj_ptr[i]), int(self.adj_ptr[i + 1])
        ty, nb, out = self.adj_type[a:b], self.adj_nbr[a:b], self.adj_out[a:b]
        if forward is None:
            return ty, nb, out
        keep = out if forward else (~out | (nb == i))
        return ty[keep], nb[keep], out[keep]

    def type_mask(self, types: Iterable[str] | None) -> np.ndarray | None:
        """A boolean per type index: the types asked for (``None``: every type, no mask)."""
        if types is None:
            return None
        mask = np.zeros(len(self.types) + 1, dtype=bool)
        for t in types:
            j = self.type_index.get(t)
            if j is not None:
                mask[j] = True
        return mask

    def entity_mask(self, eids: Sequence[int]) -> np.ndarray:
        mask = np.zeros(self.n + 1, dtype=bool)
        idx = self.index(eids)
        mask[idx[idx >= 0]] = True
        return mask

    # -- files --------------------------------------------------------------------------------------------
    def save(self, path: Path) -> None:
        """Write the replica to ``path`` (an uncompressed ``.npz``; written aside, then renamed)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        meta = np.frombuffer(repr({"format": FILE_FORMAT, "key": self.key.__dict__, "types": self.types,
                                   "build_s": self.build_s, "settled": self.vectors_settled}).encode("utf-8"),
                             dtype=np.uint8)
        with open(tmp, "wb") as f:
            np.savez(f, meta=meta, **{a: getattr(self, a) for a in _ARRAYS})
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path, key: VersionKey) -> "GraphReplica | None":
        """The replica saved at ``path`` if it is of version ``key`` and of this format; else None."""
        import ast

        try:
            with np.load(path, allow_pickle=False) as z:
                meta = ast.literal_eval(bytes(z["meta"]).decode("utf-8"))
                if meta.get("format") != FILE_FORMAT or VersionKey(**meta["key"]) != key:
                    return None
                arrays = {a: z[a] for a in _ARRAYS}
        except (OSError, ValueError, KeyError, SyntaxError, TypeError) as e:
            log.info("replica file %s not used: %s", path, e)
            return None
        return cls(key, meta["types"], arrays, float(meta.get("build_s") or 0.0), source="file",
                   vectors_settled=bool(meta.get("settled")))


# ---------------------------------------------------------------------------------------------------------------
# building
# ---------------------------------------------------------------------------------------------------------------
class ReplicaTooLarge(IsoragError):
    """The KG's replica would exceed the memory guard (``graph_cache_mb``)."""


class _TornRead(Exception):
    """The stream met an entity that a committing transaction was deleting (its properties read as null): the read
    mixes two versions, like one that a change set committed into."""


class _Collector:
    """What the streamed read fills, row by row (compact arrays, not Python lists of a million ints)."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit = limit_bytes
        self.eids = array("q")
        self.names: list[bytes] = []
        self.keys: dict[int, bytes] = {}
        self.flags = bytearray()
        self.tid_count = array("q")
        self.tids = array("q")
        self.head = array("q")
        self.type_code = array("l")
        self.tail = array("q")
        self.type_of: dict[str, int] = {}
        self.text_bytes = 0

    def consume(self, records: Iterable[Any]) -> "_Collector":
        eids, names, keys, flags = self.eids, self.names, self.keys, self.flags
        tid_count, tids, head, code, tail, type_of = (self.tid_count, self.tids, self.head, self.type_code,
                                                      self.tail, self.type_of)
        for rec in records:
            eid, name, key, desc, ts, out = rec[0], rec[1], rec[2], rec[3], rec[4], rec[5]
            if eid is None:
                raise _TornRead
            i = len(eids)
            eids.append(eid)
            nb = (name if name is not None else (key or str(eid))).encode("utf-8")
            names.append(nb)
            kb = (key or "").encode("utf-8")
            if kb != nb:
                keys[i] = kb
                self.text_bytes += len(kb)
            self.text_bytes += len(nb)
            flags.append(FLAG_DESCRIPTION if desc else 0)
            tid_count.append(len(ts))
            tids.extend(ts)
            for rtype, t in out:
                if t is None:
                    raise _TornRead
                c = type_of.get(rtype)
                if c is None:
                    c = type_of[rtype] = len(type_of)
                head.append(i)
                code.append(c)
                tail.append(t)
            if not (i & 0xFFF) and self.estimate() > self.limit:
                raise ReplicaTooLarge(f"over {self.limit / 2**20:.0f} MB after {i + 1:,} entities")
        return self

    def estimate(self) -> int:
        return len(self.eids) * 48 + self.text_bytes + len(self.head) * 12

    def replica(self, key: VersionKey, build_s: float) -> GraphReplica:
        n = len(self.eids)
        raw_eids = np.frombuffer(self.eids, dtype=np.int64) if n else np.zeros(0, np.int64)
        order = np.argsort(raw_eids, kind="stable")
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n)
        eids = raw_eids[order]
        names = [self.names[j] for j in order.tolist()]
        # relationship types sorted by name: a type's index orders as its name
        types = sorted(self.type_of)
        pos = {t: j for j, t in enumerate(types)}
        recode = np.zeros(len(types) + 1, dtype=np.int64)
        for t, c in self.type_of.items():
            recode[c] = pos[t]
        head = rank[np.frombuffer(self.head, dtype=np.int64)] if len(self.head) else np.zeros(0, np.int64)
        code = recode[np.frombuffer(self.type_code, dtype=np.dtype("l"))] if len(self.type_code) \
            else np.zeros(0, np.int64)
        tail_eid = np.frombuffer(self.tail, dtype=np.int64) if len(self.tail) else np.zeros(0, np.int64)
        tail = np.searchsorted(eids, tail_eid)
        ok = tail < n
        ok[ok] = eids[tail[ok]] == tail_eid[ok]  # (the statement reads tails of the same KG: all found)
        head, code, tail = head[ok], code[ok], tail[ok]
        idx_t = np.int32 if n < 2**31 else np.int64
        type_t = np.int16 if len(types) < 2**15 else np.int32
        arrays: dict[str, np.ndarray] = {"eids": eids}
        arrays["name_off"], arrays["name_blob"] = _texts(names)
        key_items = sorted((int(rank[i]), kb) for i, kb in self.keys.items())
        arrays["key_idx"] = np.asarray([i for i, _ in key_items], dtype=idx_t)
        arrays["key_off"], arrays["key_blob"] = _texts([kb for _, kb in key_items])
        arrays["flags"] = np.frombuffer(bytes(self.flags), dtype=np.uint8)[order] if n else np.zeros(0, np.uint8)
        raw_counts = np.frombuffer(self.tid_count, dtype=np.int64) if n else np.zeros(0, np.int64)
        raw_tids = np.frombuffer(self.tids, dtype=np.int64) if len(self.tids) else np.zeros(0, np.int64)
        owner = rank[np.repeat(np.arange(n), raw_counts)]  # entity number of each type id, in eid order below
        arrays["etype_tid"] = raw_tids[np.argsort(owner, kind="stable")]
        off = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(raw_counts[order], out=off[1:])
        arrays["etype_off"] = off
        # each relationship in its head's row (starts there) and, unless a self-loop, in its tail's row
        loop = head == tail
        rows = np.concatenate([head, tail[~loop]])
        other = np.concatenate([tail, head[~loop]])
        codes = np.concatenate([code, code[~loop]])
        starts = np.concatenate([np.ones(len(head), dtype=bool), np.zeros(int((~loop).sum()), dtype=bool)])
        o = np.lexsort((~starts, other, codes, rows))
        arrays["adj_ptr"] = _offsets(rows[o], n, idx_t)
        arrays["adj_type"] = codes[o].astype(type_t)
        arrays["adj_nbr"] = other[o].astype(idx_t)
        arrays["adj_out"] = starts[o]
        hashes = _name_hash(names)
        ho = np.argsort(hashes, kind="stable")
        arrays["name_hash"] = hashes[ho]
        arrays["name_hash_idx"] = ho.astype(idx_t)
        return GraphReplica(key, types, arrays, build_s)


def _texts(items: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    off = np.zeros(len(items) + 1, dtype=np.int64)
    if items:
        np.cumsum(np.fromiter((len(b) for b in items), dtype=np.int64, count=len(items)), out=off[1:])
    return off, np.frombuffer(b"".join(items), dtype=np.uint8).copy()


def _offsets(rows: np.ndarray, n: int, dtype: Any) -> np.ndarray:
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n)[:n] if len(rows) else np.zeros(n, np.int64), out=ptr[1:])
    return ptr.astype(dtype if ptr[-1] < 2**31 else np.int64)


def estimate_bytes(graph: StreamingReader) -> int:
    """What the KG's replica would take, from its counts (one small read)."""
    row = graph.read(cypher("replica_size"), kg=graph.kg)
    if not row:
        return 0
    return int(row[0]["entities"] or 0) * EST_ENTITY_BYTES + int(row[0]["relationships"] or 0) * EST_RELATIONSHIP_BYTES


def build_replica(graph: StreamingReader, limit_bytes: int) -> GraphReplica | None:
    """The KG's replica, read from Neo4j by one streamed read and stamped with the version read before it; None
    when a change set was under way as it began, or a batch was committed while it read (the arrays may mix two
    versions: the version moved, or a row named an entity that was being deleted).

    Neo4j's reads are not snapshots, and a reader can see a committing transaction's changes in part: its stamp
    on the version node already, some of its relationships not yet. So a version equal before and after the stream
    does not prove the stream saw one version. What does: a change set marks itself under way (``cs_done`` false)
    in a transaction of its own before its first batch, and done in another after its last; a stream that began
    while none was under way and ended on the version it began on cannot have seen any of a batch's changes,
    since a change set's mark is visible before any of its batches is written.

    Raises :class:`ReplicaTooLarge` when it would exceed ``limit_bytes``."""
    t0 = time.perf_counter()
    before = version_key(graph.kg, graph.version())
    state = graph.read(cypher("changes_state"), kg=graph.kg)
    if state and state[0].get("cs_done") is False:
        return None  # a change set is under way: its batches may be read in part
    settled = not state or not (state[0]["pending_entities"] or state[0]["pending_relations"])
    try:
        got: _Collector = graph.read_stream(cypher("replica_stream"), _Collector(limit_bytes).consume, kg=graph.kg)
    except _TornRead:
        return None
    after = version_key(graph.kg, graph.version())
    if after != before:
        return None
    rep = got.replica(before, time.perf_counter() - t0)
    rep.vectors_settled = settled
    if rep.nbytes > limit_bytes:
        raise ReplicaTooLarge(f"{rep.mb:.1f} MB, over the limit of {limit_bytes / 2**20:.0f} MB")
    rep.build_s = time.perf_counter() - t0
    return rep


# ---------------------------------------------------------------------------------------------------------------
# the expansions the matcher asks for
# ---------------------------------------------------------------------------------------------------------------
class ReplicaExpansions:
    """:class:`engine.retrieval.matcher.ExpansionSource` over a replica: the rows of the Cypher expansion path,
    from arrays. A deadline is checked before each batch (a batch takes microseconds to milliseconds)."""

    name = "replica"

    def __init__(self, replica: GraphReplica) -> None:
        self.replica = replica

    def fetch(self, f: Fetch, deadline: float, stats: SearchStats, memo: dict[str, Any]) -> dict[int, list[list[Any]]]:
        if time.monotonic() > deadline:
            raise DeadlineExceeded("the query deadline expired during graph search")
        rep = self.replica
        types = rep.types
        cmask: np.ndarray | None = None
        if f.cands is not None:
            masks: dict[str, np.ndarray] = memo.setdefault("cands", {})
            cmask = masks.get(f.step.dst)
            if cmask is None:
                cmask = masks[f.step.dst] = rep.entity_mask(f.cands)
        tmasks: dict[tuple[str, ...] | None, np.ndarray | None] = memo.setdefault("types", {})
        idx = rep.index([r["h"] for r in f.rows]).tolist()
        closing = rep.index([r["t"] for r in f.rows]).tolist() if f.step.closes else None
        out: dict[int, list[list[Any]]] = {}
        for j, r in enumerate(f.rows):
            i = idx[j]
            if i < 0:
                continue
            want = r["types"]
            tk = None if want is None else tuple(want)
            if tk in tmasks:
                tmask = tmasks[tk]
            else:
                tmask = tmasks[tk] = rep.type_mask(want)
            ty, nb, starts = rep.row(i, f.forward)
            keep: np.ndarray | None = None
            if tmask is not None:
                keep = tmask[ty]
            if closing is not None:
                hit = nb == closing[j]
                keep = hit if keep is None else keep & hit
            elif cmask is not None:
                hit = cmask[nb]
                keep = hit if keep is None else keep & hit
            if keep is not None:
                ty, nb, starts = ty[keep], nb[keep], starts[keep]
            if f.cap is not None and len(nb) > f.cap:
                ty, nb, starts = ty[:f.cap], nb[:f.cap], starts[:f.cap]
            if not len(nb):
                out[r["id"]] = []
                continue
            out[r["id"]] = [[types[a], b, c] for a, b, c in zip(ty.tolist(), starts.tolist(),
                                                                  rep.eids[nb].tolist())]
        return out

    def neighbours(self, rows: list[dict[str, Any]], cap: int, deadline: float,
                   stats: SearchStats) -> dict[int, list[int]]:
        if time.monotonic() > deadline:
            raise DeadlineExceeded("the query deadline expired during graph search")
        rep = self.replica
        out: dict[int, list[int]] = {}
        for r in rows:
            idx = [i for i in rep.index(r["cands"]).tolist() if i >= 0]
            tmask = rep.type_mask(r["types"])
            found: list[np.ndarray] = []
            for i in idx:
                ty, nb, _ = rep.row(i, None)
                found.append(nb if tmask is None else nb[tmask[ty]])
            uniq = np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)
            out[r["id"]] = rep.eids[uniq[:cap]].tolist()
        return out


# ---------------------------------------------------------------------------------------------------------------
# the replicas of this process
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class ReplicaState:
    """Where a KG's replica stands in this process: ``ready`` (fresh for the version asked), ``building``,
    ``too large`` (over the guard), ``off`` (``graph_cache_mb`` is 0), ``unavailable`` (the graph store cannot
    stream) or ``failed`` (the last build's error, in ``why``)."""

    state: str
    why: str = ""
    mb: float | None = None


class _Slot:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.replica: GraphReplica | None = None
        self.thread: threading.Thread | None = None
        self.too_large: tuple[VersionKey, str] | None = None
        self.failed: tuple[VersionKey, str] | None = None


_SLOTS: dict[tuple[str, str], _Slot] = {}
_SLOTS_LOCK = threading.Lock()


def graph_location(graph: Any) -> str:
    """The Neo4j server and database a graph store reads (a replica belongs to one)."""
    uri = getattr(graph, "uri", "")
    settings = getattr(graph, "settings", None)
    return f"{uri}#{getattr(settings, 'database', None) or ''}"



def _slot(graph: Any) -> _Slot:
    k = (graph_location(graph), graph.kg)
    with _SLOTS_LOCK:
        s = _SLOTS.get(k)
        if s is None:
            s = _SLOTS[k] = _Slot()
        return s


def replica_dir(kg: str) -> Path:
    """Where the replicas of a KG are saved: ``$ISORAG_HOME/replicas/<kg>/``."""
    return isorag_home() / "replicas" / kg


def version_file(graph: Any, key: VersionKey, suffix: str = ".npz") -> Path:
    """The file of what is kept of ``graph``'s KG at version ``key`` under ``replica_dir``: the replica's
    (``.npz``) or another table of the same version beside it (its own ``suffix``, e.g. ``.names.npz``). A replica
    saved for a newer version removes the files of the others."""
    return replica_dir(key.kg) / f"{key.digest(graph_location(graph))}{suffix}"


def _file(graph: Any, key: VersionKey) -> Path:
    return version_file(graph, key)


def replica_for(graph: Any, key: VersionKey, limit_mb: int, *, wait: bool = False) -> tuple[GraphReplica | None,
                                                                                          ReplicaState]:
    """The replica of ``graph``'s KG at version ``key`` when this process holds it (or its file does), else None
    and its state. A missing or older replica starts a build in the background (``wait``: and waits for it)."""
    if limit_mb <= 0:
        return None, ReplicaState("off")
    if not callable(getattr(graph, "read_stream", None)):
        return None, ReplicaState("unavailable", "the graph store cannot stream its adjacency")
    slot = _slot(graph)
    with slot.lock:
        rep = slot.replica
        if rep is not None and rep.key == key:
            if rep.nbytes <= limit_mb * 2**20:
                return rep, ReplicaState("ready", mb=rep.mb)
            return None, ReplicaState("too large", f"{rep.mb:.1f} MB over graph_cache_mb={limit_mb}", rep.mb)
        if slot.too_large is not None and slot.too_large[0] == key:
            return None, ReplicaState("too large", slot.too_large[1])
        thread = slot.thread
        if thread is None or not thread.is_alive():
            thread = slot.thread = threading.Thread(target=_build, args=(graph, slot, limit_mb), daemon=True,
                                                    name=f"isorag-replica-{key.kg}")
            thread.start()
    if wait:
        thread.join()
        with slot.lock:
            rep = slot.replica
            if rep is not None and rep.key == key:
                return rep, ReplicaState("ready", mb=rep.mb)
            if slot.too_large is not None and slot.too_large[0] == key:
                return None, ReplicaState("too large", slot.too_large[1])
            if slot.failed is not None:
                return None, ReplicaState("failed", slot.failed[1])
    return None, ReplicaState("building")


def replica_state(graph: Any) -> dict[str, Any] | None:
    """What this process holds of ``graph``'s KG: its replica's :meth:`GraphReplica.info`, or None."""
    slot = _slot(graph)
    with slot.lock:
        return slot.replica.info() if slot.replica is not None else None


def _build(graph: Any, slot: _Slot, limit_mb: int) -> None:
    """The background build: from the file of the current version when there is one, else streamed from Neo4j."""
    limit = limit_mb * 2**20
    key: VersionKey | None = None
    try:
        for _ in range(BUILD_TRIES):
            key = version_key(graph.kg, graph.version())
            path = _file(graph, key)
            rep = GraphReplica.load(path, key) if path.exists() else None
            if rep is None:
                if estimate_bytes(graph) > limit:
                    raise ReplicaTooLarge(f"estimated over the limit of {limit_mb} MB")
                rep = build_replica(graph, limit)
                if rep is None:  # a change set under way, or one committed while it read: read it again
                    time.sleep(BUILD_PAUSE_S)
                    continue
                _save(graph, rep)
            with slot.lock:
                slot.replica, slot.failed, slot.too_large = rep, None, None
            log.info("graph replica of KG %r (version %s): %s", graph.kg, rep.key.seq, rep.info())
            return
    except ReplicaTooLarge as e:
        with slot.lock:
            if key is not None:
                slot.too_large = (key, str(e))
        return
    except Exception as e:  # noqa: BLE001 - a failed build leaves queries on Cypher; the next query retries
        log.warning("graph replica of KG %r not built: %s", getattr(graph, "kg", "?"), e)
        with slot.lock:
            if key is not None:
                slot.failed = (key, f"{type(e).__name__}: {e}")


def _save(graph: Any, rep: GraphReplica) -> None:
    """Save the replica beside the KG's others and remove the files of other versions (best effort; the tables of
    its own version kept beside it stay)."""
    path = _file(graph, rep.key)
    try:
        rep.save(path)
        mine = path.name[: -len(".npz")] + "."
        for other in path.parent.glob("*.npz"):
            if other != path and not other.name.startswith(mine):
                other.unlink(missing_ok=True)
    except OSError as e:
        log.info("graph replica not saved to %s: %s", path, e)


#: what else this process keeps beside a KG's replica, each forgotten with it (:func:`keep_beside`)
_BESIDE: list[Callable[[Any], None]] = []


def keep_beside(forget: Callable[[Any], None]) -> None:
    """Register what a module keeps beside the replicas (``forget(graph)`` forgets it for ``graph``'s KG; the table
    of name vectors, :mod:`engine.retrieval.name_vectors`, registers itself so), for :func:`forget_replica`."""
    if forget not in _BESIDE:
        _BESIDE.append(forget)


def forget_replica(graph: Any) -> None:
    """Forget this process's replica of ``graph``'s KG and what is kept beside it (:func:`keep_beside`; the files
    stay: the next use loads its version's file)."""
    slot = _slot(graph)
    with slot.lock:
        slot.replica = None
        slot.too_large = slot.failed = None
    for forget in list(_BESIDE):
        forget(graph)


def drop_replica_files(graph: Any) -> None:
    """Forget ``graph``'s KG: this process's replica and the files of every version (when the KG is dropped)."""
    import shutil

    forget_replica(graph)
    shutil.rmtree(replica_dir(graph.kg), ignore_errors=True)
