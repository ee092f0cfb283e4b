"""Sync: make a KG equal to a source file, streaming both, then apply the difference as a change set.

The KG is never held in client memory. Every entity key is hashed to its eid (:func:`engine.stores.graph.entity_id`),
and the eid space ``[0, 2**63)`` is cut into ``P`` equal ranges, so that each range holds about
:data:`PARTITION_TRIPLES` triples of the file or of the store, whichever is larger:

1. the file is read once (any format ``isorag load`` reads) and each record is spilled, pickled in blocks, to the
   partition file of its head's eid (a triple), of its tail's eid (the tail's key, so the tail is known to be in
   the file) or of its key's eid (an entity record: name and types);
2. partition by partition, the spill is read back and the store's entities and triples of the same eid range are
   read with one range seek each on the eid constraint's index (``cypher/sync_*_range.cypher``); the two sides are
   compared by ``(head eid, relationship type, tail eid)`` (integers: the store is not asked for key strings it
   does not need), and the differences are spilled as operations. A partition whose heads have more triples than
   two partitions' worth on either side (a hub entity) is compared in parts cut by the tails' eids, so that one
   part of each side is in memory at a time, however large the hub;
3. the counts are shown (``dry_run`` stops there); then the operations are applied by
   :func:`engine.changes.apply.apply_changes` in this order: triples removed, triples added, entities set, entities
   removed.

What the KG is made equal to is what a fresh load of the file gives: its triples, its entities (the keys its
triples and entity records name), each entity's name (the last name an entity record gives, else the key's default
name, as the loader names it), its types (united from its entity records, in order), and whether it has something
of its own: an entity that an entity record describes stays without triples; one that the file names in triples
only is made bare again (default name, no types, no description: ``SetEntity(key, reset=True)``) and leaves with
its last triple. An entity no longer in the file leaves with its last triple when it is bare, and is removed
(``RemoveEntity``) otherwise. Descriptions, which no file format carries, are kept on the entities the file
describes. A user's own nodes adopted in place and their own relationships are never compared, so never removed
(docs/security.md). A key that a merge made an alias is resolved to its target first, as a load resolves it.

Memory: one partition (or part) of each side at a time (about :data:`PARTITION_TRIPLES` triples; the report's
``peak_triples`` says how many were held at most), the spill buffers and the operations' counts. Run again after a
kill, a sync computes the difference anew against what the killed run left, so it ends where an uninterrupted run
would; run twice, the second finds nothing to change and applies nothing.
"""

from __future__ import annotations

import pickle
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Iterable, Iterator

from engine._cypher import cypher
from engine._errors import InputError
from engine._reports import Report, SkipLog
from engine.changes.ops import AddTriple, Op, RemoveEntity, RemoveTriple, SetEntity
from engine.changes.statements import stays_without_triples
from engine.stores.aliases import kg_aliases
from engine.stores.graph import GraphStore, entity_id, sanitize_relation
from loaders.bulk import default_name

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import TextEmbedder
    from engine.stores.vectors import VectorStore

#: triples (of the file or of the store, whichever has more) per partition: both sides of one partition in memory
#: take about 30 MB at this size
PARTITION_TRIPLES = 50_000
#: at most this many partitions (open spill files)
MAX_PARTITIONS = 512
#: a partition with more triples than this many partitions' worth on either side is compared in parts
HUB_FACTOR = 2
#: records kept per partition before its buffer is pickled to its spill file
_SPILL_BLOCK = 4096
_EID_SPACE = 1 << 63
#: the order operations are applied in (see the module docstring)
OP_KINDS = ("remove", "add", "set", "remove_entity")


@dataclass
class SyncReport(Report):
    """What a sync found and did. ``applied``: the apply's report as a dict (``None`` on a dry run or when there
    was nothing to change); ``version``: the KG's version after the sync."""

    SKIP_COUNT = "lines_skipped"

    path: str = ""
    kg: str = ""
    records: int = 0
    triples: int = 0
    partitions: int = 0
    store_triples: int = 0
    store_entities: int = 0
    peak_triples: int = 0  # the most triples of one side held at once (a partition, or a part of a hub's)
    triples_added: int = 0
    triples_removed: int = 0
    entities_set: int = 0
    entities_removed: int = 0
    entities_added: int = 0  # adoption re-sync: nodes adopted (a file's new entities come with its added triples)
    relations_added: int = 0  # adoption re-sync: relation types new to the catalog
    relations_removed: int = 0  # adoption re-sync: relation types no relationship uses any more
    lines_skipped: int = 0
    skip_reasons: dict[str, int] = field(default_factory=dict)
    skip_examples: list[str] = field(default_factory=list)
    dry_run: bool = False
    diff_s: float = 0.0
    apply_s: float = 0.0
    wall_s: float = 0.0
    version: int | None = None
    applied: dict[str, Any] | None = None

    @property
    def changes(self) -> int:
        return (self.triples_added + self.triples_removed + self.entities_set + self.entities_removed
                + self.entities_added + self.relations_added + self.relations_removed)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "changes": self.changes}

    def lines(self) -> list[str]:
        head = "would change" if self.dry_run else "changed"
        if self.path.startswith("neo4j:"):
            out = [
                f"re-sync of KG {self.kg!r} with its adopted nodes of label {self.path[6:]!r}",
                f"  {head}: entities adopted {self.entities_added:,}, renamed {self.entities_set:,}, given back or "
                f"deleted {self.entities_removed:,}; relation types +{self.relations_added:,} "
                f"-{self.relations_removed:,}",
            ]
        else:
            out = [
                f"sync {self.path} -> KG {self.kg!r}: {self.triples:,} triples in the file, {self.store_triples:,} "
                f"in the KG ({self.partitions} partition{'s' * (self.partitions != 1)}, diff {self.diff_s:.1f} s)",
                f"  {head}: triples +{self.triples_added:,} -{self.triples_removed:,}, entities set "
                f"{self.entities_set:,}, removed {self.entities_removed:,}",
            ]
        if self.dry_run:
            out.append("  dry run: nothing was written")
        elif self.changes:
            out.append(f"  applied in {self.apply_s:.1f} s; KG version {self.version}")
        else:
            out.append(f"  the KG is already in step: nothing applied (version {self.version})")
        if self.lines_skipped:
            out.append(f"  lines skipped {self.lines_skipped:,}")
        return out + self.skip_lines()


def partition_bounds(parts: int) -> list[tuple[int, int]]:
    """The eid range ``[lo, hi]`` (both included) of each of ``parts`` partitions: eid ``e`` is in partition
    ``e * parts >> 63``."""
    los = [-(-(p * _EID_SPACE) // parts) for p in range(parts)] + [_EID_SPACE]
    return [(los[p], los[p + 1] - 1) for p in range(parts)]


class Spill:
    """Per-partition spill files of pickled blocks (``sizes``: the items spilled to each)."""

    def __init__(self, folder: Path, name: str, parts: int) -> None:
        self.paths = [folder / f"{name}-{p:04d}.pickle" for p in range(parts)]
        self.sizes = [0] * parts
        self._files: list[BinaryIO | None] = [None] * parts
        self._bufs: list[list[Any]] = [[] for _ in range(parts)]

    def add(self, p: int, item: Any) -> None:
        buf = self._bufs[p]
        buf.append(item)
        self.sizes[p] += 1
        if len(buf) >= _SPILL_BLOCK:
            self._flush(p)

    def _flush(self, p: int) -> None:
        if not self._bufs[p]:
            return
        f = self._files[p]
        if f is None:
            f = self._files[p] = open(self.paths[p], "ab")  # closed in close()
        pickle.dump(self._bufs[p], f, protocol=pickle.HIGHEST_PROTOCOL)
        self._bufs[p] = []

    def close(self) -> None:
        for p in range(len(self.paths)):
            self._flush(p)
            f = self._files[p]
            if f is not None:
                f.close()
                self._files[p] = None

    def read(self, p: int) -> Iterator[Any]:
        path = self.paths[p]
        if not path.exists():
            return
        with path.open("rb") as f:
            while True:
                try:
                    block = pickle.load(f)
                except EOFError:
                    return
                yield from block

    def remove(self) -> None:
        for path in self.paths:
            path.unlink(missing_ok=True)


@dataclass
class _FileSide:
    """The file's side of one partition: its triples by (head eid, type, tail eid), the keys it names, those in
    triples, and its entity records (name, types, first line)."""

    triples: dict[tuple[int, str, int], tuple[str, str, str, int]] = field(default_factory=dict)
    keys: dict[int, str] = field(default_factory=dict)
    in_triples: set[int] = field(default_factory=set)
    info: dict[int, tuple[str | None, list[str], int]] = field(default_factory=dict)
    aliases: dict[int, list[str]] = field(default_factory=dict)  # the entity records' aliases, united in order

    def take(self, item: tuple[Any, ...], keep_triples: bool = True) -> None:
        kind = item[0]
        if kind == "T":
            _, he, rtype, te, h, r, t, line = item
            if keep_triples:
                self.triples.setdefault((he, rtype, te), (h, r, t, line))
            self.keys[he] = h
            self.in_triples.add(he)
        elif kind == "K":
            self.keys[item[1]] = item[2]
            self.in_triples.add(item[1])
        else:
            _, ke, key, name, types, line = item[:6]
            also = self.aliases.setdefault(ke, [])
            also.extend(a for a in (item[6] if len(item) > 6 else ()) if a not in also)
            self.keys[ke] = key
            old_name, old_types, first = self.info.get(ke, (None, [], line))
            for ty in types:
                if ty not in old_types:
                    old_types.append(ty)
            self.info[ke] = (name or old_name, old_types, first)  # the last name wins, as in a load


class Syncer:
    """Computes and applies the difference between a KG and a source file (see the module docstring)."""

    def __init__(self, graph: GraphStore, vectors: VectorStore | None, embedder: TextEmbedder | None, *,
                 progress: bool = True, spill_dir: str | Path | None = None,
                 partition_triples: int = PARTITION_TRIPLES) -> None:
        self.graph, self.vectors, self.embedder = graph, vectors, embedder
        self.kg = graph.kg
        self.progress = progress
        self.spill_dir = spill_dir
        self.partition_triples = max(1, int(partition_triples))
        self._types: dict[str, str] = {}  # relation name -> relationship type
        self._names: dict[str, str] = {}  # relationship type -> relation name (the catalog's)
        self._aliased: set[int] = set()  # eids of the entities that have aliases

    def _rtype(self, name: str) -> str:
        t = self._types.get(name)
        if t is None:
            t = self._types[name] = sanitize_relation(name)
        return t

    # -- 1: the file, spilled by partition ------------------------------------------------------------
    def _spill_file(self, records: Iterable[Any], spill: Spill, parts: int, report: SyncReport,
                    total: int | None, aliases: dict[str, str]) -> None:
        from tqdm import tqdm

        from loaders import TripleRecord

        kg, add, rtypes = self.kg, spill.add, self._types
        # bounded memos (cleared when full, which costs only recomputation or a repeated spill item): the eid of
        # recent keys (a key recurs in many triples), and the tails already spilled as keys of their range
        memo: dict[str, int] = {}
        tails: set[int] = set()
        limit = 500_000
        n = triples = 0
        with tqdm(total=total, desc="sync: read file", unit="rec", disable=not self.progress, file=sys.stderr,
                  dynamic_ncols=True, leave=False) as bar:
            for rec in records:
                n += 1
                if type(rec) is TripleRecord:
                    h, r, t = rec.head, rec.relation, rec.tail
                    if aliases:
                        h, t = aliases.get(h, h), aliases.get(t, t)
                    he = memo.get(h)
                    if he is None:
                        if len(memo) >= limit:
                            memo.clear()
                        he = memo[h] = entity_id(kg, h)
                    te = memo.get(t)
                    if te is None:
                        if len(memo) >= limit:
                            memo.clear()
                        te = memo[t] = entity_id(kg, t)
                    rt = rtypes.get(r) or self._rtype(r)
                    add((he * parts) >> 63, ("T", he, rt, te, h, r, t, rec.line))
                    if te not in tails:
                        if len(tails) >= limit:
                            tails.clear()
                        tails.add(te)
                        add((te * parts) >> 63, ("K", te, t))
                    triples += 1
                else:
                    key = aliases.get(rec.key, rec.key)
                    ke = entity_id(kg, key)
                    add((ke * parts) >> 63, ("E", ke, key, rec.name, tuple(rec.types), rec.line,
                                             tuple(rec.aliases)))
                if n % 10_000 == 0:
                    bar.update(10_000)
            bar.update(n % 10_000)
        report.records, report.triples = n, triples
        spill.close()

    # -- 2: one partition, both sides ----------------------------------------------------------------
    def _hub_limit(self) -> int:
        return HUB_FACTOR * self.partition_triples

    def _read_store(self, lo: int, hi: int) -> tuple[list[list[Any]], list[list[Any]]]:
        """The store's side of one partition: ``[eid, key, name, types, adopted, own, described, linked]`` of its
        entities and ``[head eid, type, tail eid]`` of its triples (at most one more than :meth:`_hub_limit`: more
        means a hub, compared in parts), each one list in one row."""
        g, kg = self.graph, self.kg
        return (g.read_one(cypher("sync_entities_range"), lo=lo, hi=hi, kg=kg),
                g.read_one(cypher("sync_triples_range"), lo=lo, hi=hi, tlo=0, thi=_EID_SPACE - 1, kg=kg,
                           limit=self._hub_limit() + 1))

    def _diff_partition(self, p: int, bounds: tuple[int, int], store: tuple[list[list[Any]], list[list[Any]]],
                        spill: Spill, folder: Path, out: dict[str, Spill], report: SyncReport) -> None:
        stored = {e[0]: e for e in store[0]}
        key_of = {eid: e[1] for eid, e in stored.items()}
        report.store_entities += len(stored)
        if spill.sizes[p] <= self._hub_limit() and len(store[1]) <= self._hub_limit():
            side = _FileSide()
            for item in spill.read(p):
                side.take(item)
            self._diff_triples(side.triples, store[1], key_of, out, report)
        else:
            side = self._diff_hub(p, bounds, spill, folder, key_of, out, report)
        self._diff_entities(side, stored, out, report)

    def _diff_hub(self, p: int, bounds: tuple[int, int], spill: Spill, folder: Path, key_of: dict[int, str],
                  out: dict[str, Spill], report: SyncReport) -> _FileSide:
        """A partition whose heads have too many triples (a hub), compared in parts cut by the tails' eids: the
        file's triples are spilled again by tail, the store's read part by part. Returns the file's side without
        its triples (its keys and entity records)."""
        lo, hi = bounds
        stored_n = int(self.graph.read_named("sync_triples_count", lo=lo, hi=hi, kg=self.kg)[0]["triples"])
        parts = max(2, -(-max(spill.sizes[p], stored_n) // self.partition_triples))
        by_tail = Spill(folder, f"hub-{p:04d}", parts)
        side = _FileSide()
        for item in spill.read(p):
            side.take(item, keep_triples=False)
            if item[0] == "T":
                by_tail.add((item[3] * parts) >> 63, item)
        by_tail.close()
        for q, (tlo, thi) in enumerate(partition_bounds(parts)):
            part = _FileSide()
            for item in by_tail.read(q):
                part.take(item)
            rows = self.graph.read_one(cypher("sync_triples_range"), lo=lo, hi=hi, tlo=tlo, thi=thi, kg=self.kg,
                                       limit=_EID_SPACE - 1)
            self._diff_triples(part.triples, rows, key_of, out, report)
            by_tail.paths[q].unlink(missing_ok=True)
        return side

    def _diff_triples(self, triples: dict[tuple[int, str, int], tuple[str, str, str, int]], rows: list[list[Any]],
                      key_of: dict[int, str], out: dict[str, Spill], report: SyncReport) -> None:
        """One partition (or part) of triples, both sides: what the file adds and what it removes."""
        report.store_triples += len(rows)
        report.peak_triples = max(report.peak_triples, len(triples), len(rows))
        removed = [(he, rtype, te) for he, rtype, te in rows if triples.pop((he, rtype, te), None) is None]
        for h, r, t, line in triples.values():
            out["add"].add(0, ("add", h, r, t, line))
        report.triples_added += len(triples)
        if removed:
            self._spill_removed(removed, key_of, out)
            report.triples_removed += len(removed)

    def _diff_entities(self, side: _FileSide, stored: dict[int, list[Any]], out: dict[str, Spill],
                       report: SyncReport) -> None:
        """One partition of entities, both sides: what the file names as a fresh load would make it, and the
        entities it no longer names."""
        for ke, key in side.keys.items():
            have = stored.get(ke)
            if ke in side.info:  # described by an entity record: something of its own
                name, types, line = side.info[ke]
                want_name = name or default_name(key)
                # the file's aliases replace the entity's (its name is never one of them)
                want_aliases = tuple(a for a in side.aliases.get(ke, []) if a != want_name)
                if have is None:  # (made here, or by an added triple: named, typed and given its own)
                    out["set"].add(0, ("set", key, want_name, tuple(types) or None, line, False,
                                       want_aliases or None))
                    report.entities_set += 1
                    continue
                set_name = have[2] != want_name or have[5] is not True  # (a set gives it its own, too)
                set_types = types != list(have[3] or [])
                set_aliases = list(want_aliases) != list(have[8] or [])
                if set_name or set_types or set_aliases:
                    out["set"].add(0, ("set", key, want_name if set_name else None,
                                       tuple(types) if set_types else None, line, False,
                                       want_aliases if set_aliases else None))
                    report.entities_set += 1
                continue
            if have is not None and have[8]:  # named in triples only: no alias of its own either
                out["set"].add(0, ("set", key, None, None, 0, False, ()))
                report.entities_set += 1
            if have is not None and not self._bare(key, have):  # named in triples only: bare, as a load makes it
                out["set"].add(0, ("set", key, None, None, 0, True))
                report.entities_set += 1
        for ke, e in stored.items():
            if ke in side.keys or e[4]:  # in the file, or a user's node adopted in place
                continue
            if not e[7] or stays_without_triples(e[1], e[2], "described" if e[6] else None, e[3], e[5],
                                                 ke in self._aliased):
                out["remove_entity"].add(0, ("remove_entity", e[1]))
            # (else it is bare and in triples, which all go: it leaves with its last one)
            report.entities_removed += 1

    def _bare(self, key: str, e: list[Any]) -> bool:
        """Whether a stored entity is what an added triple makes one: nothing of its own, its key's default name."""
        return not e[5] and e[2] == default_name(key) and not e[3] and not e[6]

    def _spill_removed(self, removed: list[tuple[int, str, int]], key_of: dict[int, str],
                       out: dict[str, Spill]) -> None:
        """Spill removed triples with their keys and relation names: the head is of this partition (its key is in
        ``key_of``); tails of other partitions are looked up by eid, in one read."""
        if not self._names:
            self._names = {ri.type: ri.name for ri in self.graph.relation_catalog(refresh=True).values()}
        need = sorted({te for _, _, te in removed if te not in key_of})
        keys = dict(key_of)
        for i in range(0, len(need), 10_000):
            keys.update((eid, row["key"]) for eid, row in self.graph.entities(need[i:i + 10_000]).items())
        for he, rtype, te in removed:
            out["remove"].add(0, ("remove", keys[he], self._names.get(rtype, rtype), keys[te], 0))

    # -- driver ---------------------------------------------------------------------------------------
    def diff(self, records: Iterable[Any], report: SyncReport, total: int | None, folder: Path) -> dict[str, Spill]:
        """Steps 1 and 2: the operations that make the KG equal to ``records``, spilled under ``folder``."""
        from tqdm import tqdm

        t0 = time.perf_counter()
        store_triples = self.graph.stats()["triples"]
        parts = max(1, min(MAX_PARTITIONS, -(-max(total or 0, store_triples) // self.partition_triples)))
        report.partitions = parts
        spill = Spill(folder, "file", parts)
        aliases = kg_aliases(self.graph)
        self._aliased = {entity_id(self.kg, t) for t in set(aliases.values())}
        self._spill_file(records, spill, parts, report, total, aliases)
        if report.records == 0:
            raise InputError(_nothing(report))
        out = {k: Spill(folder, f"ops-{k}", 1) for k in OP_KINDS}  # one kind of operation each, one partition
        bounds = partition_bounds(parts)
        # the store's side of the next partition is read (Neo4j's work, the socket) while this one is compared
        with ThreadPoolExecutor(1, thread_name_prefix="isorag-sync-read") as pool, \
                tqdm(total=parts, desc="sync: compare", unit="part", disable=not self.progress, file=sys.stderr,
                     dynamic_ncols=True, leave=False) as bar:
            ahead = pool.submit(self._read_store, *bounds[0])
            for p in range(parts):
                store = ahead.result()
                if p + 1 < parts:
                    ahead = pool.submit(self._read_store, *bounds[p + 1])
                self._diff_partition(p, bounds[p], store, spill, folder, out, report)
                del store
                spill.paths[p].unlink(missing_ok=True)
                bar.update(1)
        for o in out.values():
            o.close()
        report.diff_s = time.perf_counter() - t0
        return out

    def sync(self, records: Iterable[Any], report: SyncReport, *, total: int | None = None, dry_run: bool = False,
             strict: bool = False, batch_size: int | None = None) -> SyncReport:
        """Make the KG equal to ``records`` (see the module docstring); fills and returns ``report``."""
        t0 = time.perf_counter()
        folder = Path(tempfile.mkdtemp(prefix=f"isorag-sync-{self.kg}-", dir=self.spill_dir))
        try:
            out = self.diff(records, report, total, folder)
            report.dry_run = dry_run
            if not dry_run and report.changes:
                from engine.changes.apply import apply_changes

                t1 = time.perf_counter()
                kw: dict[str, Any] = {} if batch_size is None else {"batch_size": batch_size}
                applied = apply_changes(self.graph, self.vectors, self.embedder, _ops(out, report.path),
                                        strict=strict, progress=self.progress, source=f"sync {report.path}", **kw)
                report.apply_s = time.perf_counter() - t1
                report.applied = applied.to_dict()
                report.version = applied.version
            else:
                report.version = current_version(self.graph)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        report.wall_s = time.perf_counter() - t0
        return report


def _ops(out: dict[str, Spill], path: str) -> Iterator[Op]:
    """The spilled operations, in :data:`OP_KINDS` order."""
    for kind in OP_KINDS:
        for item in out[kind].read(0):
            if kind == "remove":
                yield RemoveTriple(item[1], item[2], item[3], line=item[4])
            elif kind == "add":
                yield AddTriple(item[1], item[2], item[3], line=item[4], path=path)
            elif kind == "set":
                aliases = item[6] if len(item) > 6 else None
                yield SetEntity(item[1], name=item[2], types=item[3], line=item[4], path=path, reset=item[5],
                                aliases=None if aliases is None else tuple(aliases))
            else:
                yield RemoveEntity(item[1])


def current_version(graph: GraphStore) -> int:
    """The KG's version sequence number now (0 before its first version)."""
    return int(graph.version()["seq"])


def _nothing(report: SyncReport) -> str:
    if report.lines_skipped:
        first = f"; first: {report.skip_examples[0]}" if report.skip_examples else ""
        return (f"{report.path}: nothing to sync from: every line was skipped ({report.lines_skipped:,} lines){first}"
                "; a sync never empties a KG (use drop)")
    return f"{report.path}: nothing to sync from: no triple or entity in it; a sync never empties a KG (use drop)"


def sync_file(graph: GraphStore, vectors: VectorStore | None, embedder: TextEmbedder | None, path: str | Path | None,
              fmt: str | None = None, *, dry_run: bool = False, strict: bool = False, progress: bool = True,
              spill_dir: str | Path | None = None, partition_triples: int = PARTITION_TRIPLES,
              batch_size: int | None = None, **options: Any) -> SyncReport:
    """Make the KG of ``graph`` equal to the source file ``path`` (any format ``isorag load`` reads; ``None`` for a
    ``tables`` source given as ``nodes=`` and ``edges=``); returns what it found and did. ``dry_run``: compute and count
    the difference, write nothing. ``strict``: a malformed line
    stops the sync before anything is written (the file is read whole before the first write anyway)."""
    from loaders import detect_format, open_source
    from loaders.bulk import count_lines

    if path is None:  # a tables source given as nodes= and edges= files
        fmt, shown = fmt or "tables", str(options.get("nodes") or "")
        total = None
    else:
        path = Path(path)
        fmt, shown = fmt or detect_format(path), str(path)
        total = count_lines(path) if fmt in ("hrt", "tsv", "csv", "nt", "jsonl") else None
    report = SyncReport(path=shown, kg=graph.kg)
    records = open_source(path, fmt, strict=strict, on_skip=SkipLog(keep=report.KEEP_SKIPPED, into=report), **options)
    syncer = Syncer(graph, vectors, embedder, progress=progress, spill_dir=spill_dir,
                    partition_triples=partition_triples)
    return syncer.sync(records, report, total=total, dry_run=dry_run, strict=strict, batch_size=batch_size)


__all__ = ["SyncReport", "Syncer", "Spill", "sync_file", "partition_bounds", "PARTITION_TRIPLES"]
