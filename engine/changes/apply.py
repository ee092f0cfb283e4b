"""Apply a change set to both stores, in idempotent batches that a rerun resumes.

How a change set runs (:func:`apply_changes`):

1. Its operations are spooled to a temporary file while each is checked and their identity hashed
   (:mod:`engine.changes.batching`: memory stays flat, a bad operation is skipped with its ``file:line``, or its
   index for one made in Python, or refuses the change set when strict), so the change set is known by its content
   before anything is written. The KG's version node (``:IsoragKGVersion {kg}``) says which change set was applied
   last and how many of its batches and operations are committed: the same change set again is finished where it
   stopped (after a kill: from the first operation not committed) or, when it was complete, changes nothing.
2. Operations are cut into batches of at most ``batch_size`` (:func:`engine.changes.batching.batches`); each batch
   is one Neo4j transaction of one statement per kind (:mod:`engine.changes.statements`), which also records the
   batch and its operations as committed and queues the ids whose vectors it made stale on the version node. The
   first batch that applies something begins the change set's version (sequence number + timestamp) in the same
   transaction: a change set that applies nothing begins none, and a strict rollback of its first batch takes the
   version back.
3. After each batch the vector side catches up (:mod:`engine.changes.vectors`), and the version stamp moves again.

Keys merged into another entity are aliases (:mod:`engine.stores.aliases`): every key of a change set (and of later
loads) is resolved through them. An entity that only triples brought in leaves with its last triple.
"""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Container, Iterable, Iterator, Sequence

from engine._cypher import cypher, joined, render, rel_type
from engine._errors import ConfigError
from engine._reports import Report, SkipLog
from engine.stores.aliases import has_aliases, kg_aliases, resolve_keys
from engine.stores.graph import new_kg_id
from engine.stores.texts import entity_text

from .batching import batches, op_keys, spool, unspool
from .ops import MergeEntity, Op, RemoveEntity
from .statements import BatchStatements
from .vectors import catch_up, sync_alias_vectors, sync_vectors

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import TextEmbedder
    from engine.stores.aliases import Resolved
    from engine.stores.graph import GraphStore
    from engine.stores.vectors import VectorStore

#: operations per batch (one Neo4j transaction)
BATCH_SIZE = 5_000
#: skipped operations kept (with file:line) in a report
KEEP_SKIPPED = 20


@dataclass
class ApplyReport(Report):
    """What a change set did: counts per operation kind, the skipped operations (``file:line: reason``) and the
    KG's version after it."""

    SKIP_COUNT = "skipped"
    KEEP_SKIPPED = KEEP_SKIPPED

    kg: str = ""
    source: str = ""
    ops: int = 0
    added: int = 0
    removed: int = 0
    entities_set: int = 0
    entities_removed: int = 0
    merged: int = 0
    orphans_removed: int = 0  # entities that only triples brought in, gone with their last triple
    skipped: int = 0
    skip_reasons: dict[str, int] = field(default_factory=dict)
    skip_examples: list[str] = field(default_factory=list)
    batches: int = 0
    batches_resumed: int = 0  # batches an earlier (killed) run had committed: not applied again
    already_applied: bool = False  # the whole change set had been applied: nothing changed
    vectors_upserted: int = 0
    vectors_deleted: int = 0
    version: int = 0
    version_at: str = ""
    graph_s: float = 0.0
    vector_s: float = 0.0
    wall_s: float = 0.0

    def lines(self) -> list[str]:
        if self.already_applied:
            head = f"change set {self.source or ''} was already applied to KG {self.kg!r}: nothing changed"
        else:
            head = f"applied {self.source or 'changes'} to KG {self.kg!r} in {self.wall_s:.1f} s"
        out = [head,
               f"  operations {self.ops:,}: triples added {self.added:,}, removed {self.removed:,}; entities set "
               f"{self.entities_set:,}, removed {self.entities_removed:,}, merged {self.merged:,}, left with their "
               f"last triple {self.orphans_removed:,}; skipped {self.skipped:,}",
               f"  batches {self.batches:,} (resumed from an earlier run {self.batches_resumed:,}); vectors "
               f"upserted {self.vectors_upserted:,}, deleted {self.vectors_deleted:,}",
               f"  version {self.version} at {self.version_at}"]
        out += [f"  skipped {m}" for m in self.skip_examples]
        return out


class _Skips(SkipLog):
    """The skip log of a change set, told of an operation that cannot be applied by the operation itself."""

    def op(self, op: Op, reason: str) -> None:
        self.reject(op.path or "<changes>", op.line, reason)


@dataclass
class _Run:
    """Where one run of a change set stands."""

    digest: str
    total: int
    resume: int = 0  # batches an earlier run of this change set committed
    ops_done: int | None = None  # operations they hold (None: an earlier run of code that counted batches only)
    batch_size: int = BATCH_SIZE
    begin: dict[str, Any] | None = None  # the version to begin with the first batch that applies something


class ChangeApplier:
    """Applies change sets to one KG (graph + vectors + embedder); see the module docstring."""

    def __init__(self, graph: GraphStore, vectors: VectorStore | None, embedder: TextEmbedder | None, *,
                 batch_size: int = BATCH_SIZE, progress: bool = True, embed_batch_size: int = 64) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        if vectors is not None and embedder is None:
            raise ConfigError("apply_changes: vectors given without an embedder")
        self.graph, self.vectors, self.embedder = graph, vectors, embedder
        self.kg = graph.kg
        self.batch_size, self.progress, self.embed_batch_size = batch_size, progress, embed_batch_size
        self._has_aliases: bool | None = None  # whether the KG has aliases (asked once, then kept up to date)

    # -- one batch ------------------------------------------------------------------------------------
    def _resolve(self, keys: Iterable[str]) -> dict[str, Resolved]:
        if self._has_aliases is None:
            self._has_aliases = has_aliases(self.graph)
        return resolve_keys(self.graph, keys, has_aliases=self._has_aliases)

    def _write_batch(self, batch: list[Op], report: ApplyReport, skips: _Skips, index: int, run: _Run,
                     ops_done: int) -> set[str]:
        """One batch in one transaction, with its record on the version node (and the version it begins). Returns
        the relationship types it removed triples of: the caller drops those nothing uses any more once the change
        set's batches are in (one check per type and change set, not per batch)."""
        resolved = self._resolve({k for op in batch for k in op_keys(op)})
        # whether an entity exists is asked only where an operation needs it before the transaction (merges and
        # entity removals); the other statements MERGE, or say what they found
        asked = sorted({resolved[k].eid for op in batch if isinstance(op, (MergeEntity, RemoveEntity))
                        for k in op_keys(op)})
        existing = ({r["eid"]: r for r in self.graph.read_named("changes_entities", eids=asked, kg=self.kg)}
                    if asked else {})
        st = BatchStatements(self.graph, batch, report, skips.op, resolved, existing)
        stmts = st.statements()
        skipped_before = report.skipped

        def begin() -> dict[str, Any]:
            applied = len(batch) - (report.skipped - skipped_before)
            return {"kg": self.kg, "begin": [run.begin] if run.begin is not None and applied else []}

        def record() -> dict[str, Any]:
            s = st.stale
            began = run.begin is None or bool(begin()["begin"])
            row = {"batches": index + 1, "ops": ops_done, "entities": sorted(s.entities),
                   "relations": sorted(s.relations), "types": sorted(s.types)}
            return {"kg": self.kg, "record": [row] if began else []}

        stmts += [(cypher("changes_begin"), st.after(begin)), (cypher("changes_batch_done"), st.after(record))]
        results = self.graph.write_tx(stmts)
        if any(isinstance(op, MergeEntity) for op in batch) and report.merged:
            self._has_aliases = True
        if run.begin is not None and results[len(stmts) - 2]:
            row = results[len(stmts) - 2][0]
            report.version, report.version_at = int(row["seq"]), str(row["at"])
            run.begin = None
        self.graph.invalidate()
        return st.stale.rel_types

    def _drop_unused_relations(self, types: Iterable[str] | None, batches_done: int) -> None:
        """Drop the relation catalog entries of these relationship types (None: every type of the catalog) that no
        triple of the KG uses any more, and queue their vectors for deletion."""
        g, kg = self.graph, self.kg
        catalog = {ri.type for ri in g.relation_catalog(refresh=True).values()}
        drop = unused_types(g, [t for t in sorted(catalog if types is None else set(types)) if t in catalog],
                            catalog)
        if drop:
            def record(prev: list[list[dict[str, Any]]]) -> dict[str, Any]:
                return {"kg": kg, "record": [{"batches": batches_done, "ops": None, "entities": [], "types": [],
                                              "relations": sorted(r["rid"] for r in prev[0])}]}
            g.write_tx([(cypher("changes_drop_relations"), {"kg": kg, "types": drop}),
                        (cypher("changes_batch_done"), record)])

    def catch_up_vectors(self, report: ApplyReport, *, done: bool | None = None) -> None:
        """Bring Milvus in line with the ids the committed batches queued (:func:`engine.changes.vectors.catch_up`)."""
        catch_up(self.graph, self.vectors, self.embedder, report, done=done, embed_batch_size=self.embed_batch_size)

    # -- the driver ----------------------------------------------------------------------------------------
    def apply(self, ops: Iterable[Any], *, strict: bool = False, source: str = "") -> ApplyReport:
        """Apply ``ops`` (holding the KG's writer lease); see the module docstring."""
        with self.graph.lock(f"apply {source or 'changes'}"):
            return self._apply(ops, strict, source)

    def _apply(self, ops: Iterable[Any], strict: bool, source: str) -> ApplyReport:
        t_start = time.perf_counter()
        report = ApplyReport(kg=self.kg, source=source)
        skips = _Skips(keep=KEEP_SKIPPED, strict=strict, into=report)
        g = self.graph
        g.ensure_schema()
        if self.vectors is not None:
            self.vectors.ensure_collections()
        fd, spool_path = tempfile.mkstemp(prefix="isorag-changes-", suffix=".jsonl")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                digest, total = spool(ops, out, skips)
            report.ops = total
            self.catch_up_vectors(report)  # what a killed run left for Milvus
            run = self._where(report, digest, total, source)
            if run is not None:
                self._run_batches(report, skips, run, spool_path)
        finally:
            os.unlink(spool_path)
        if self.vectors is not None:
            self.vectors.ensure_ready()
        self.graph.invalidate()
        report.wall_s = time.perf_counter() - t_start
        return report

    def _where(self, report: ApplyReport, digest: str, total: int, source: str) -> _Run | None:
        """Where this change set stands (None: it was applied whole before, or it has no operation)."""
        rows = self.graph.read_named("changes_state", kg=self.kg)
        st = rows[0] if rows else {}
        report.version, report.version_at = int(st.get("seq") or 0), str(st.get("at") or "")
        if st.get("cs_hash") == digest and st.get("cs_done"):
            report.already_applied = True
            return None
        if not total:
            return None
        run = _Run(digest, total, batch_size=self.batch_size)
        if st.get("cs_hash") == digest:  # a killed run of this change set: its batches are cut as it cut them
            run.resume = int(st.get("cs_batches") or 0)
            run.ops_done = int(st["cs_ops"]) if run.resume and st.get("cs_ops") is not None else None
            run.batch_size = int(st.get("cs_batch_size") or self.batch_size)
        else:
            run.begin = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "hash": digest,
                         "source": source, "batch_size": self.batch_size, "kg_id": new_kg_id()}
        return run

    def _batches(self, run: _Run, spool_path: str) -> tuple[Iterator[list[Op]], int, int]:
        """The batches to go through, the index of the first and the operations before it."""
        if run.ops_done is not None:  # resumed after the committed operations, cut as the KG is now
            rest = itertools.islice(unspool(spool_path), run.ops_done, None)
            return batches(rest, run.batch_size, lambda: kg_aliases(self.graph)), run.resume, run.ops_done
        # a run of code that counted batches only is cut again as it was (the KG's aliases then unknown)
        return batches(unspool(spool_path), run.batch_size, None if run.resume else lambda: kg_aliases(self.graph)), \
            0, 0

    def _run_batches(self, report: ApplyReport, skips: _Skips, run: _Run, spool_path: str) -> None:
        from tqdm import tqdm

        bar = tqdm(total=run.total, desc="apply  (ops)", unit="op", disable=not self.progress, file=sys.stderr,
                   dynamic_ncols=True)
        maybe_unused: set[str] = set()  # relationship types the batches removed triples of
        try:
            todo, first, done = self._batches(run, spool_path)
            report.batches = report.batches_resumed = first
            bar.update(done)
            for i, batch in enumerate(todo, start=first):
                report.batches += 1
                done += len(batch)
                if i < run.resume:
                    report.batches_resumed += 1
                    bar.update(len(batch))
                    continue
                t0 = time.perf_counter()
                maybe_unused |= self._write_batch(batch, report, skips, i, run, done)
                report.graph_s += time.perf_counter() - t0
                self.catch_up_vectors(report)
                bar.update(len(batch))
        finally:
            bar.close()
        if run.begin is not None:
            return  # nothing was applied: no version begun, nothing to finish
        t0 = time.perf_counter()
        if report.batches_resumed:  # a run killed before its catalog clean-up: sweep the whole catalog
            self._drop_unused_relations(None, report.batches)
        elif maybe_unused:
            self._drop_unused_relations(maybe_unused, report.batches)
        report.graph_s += time.perf_counter() - t0
        self.catch_up_vectors(report, done=True)


#: relationship types checked per statement by :func:`unused_types`
TYPES_PER_CHECK = 200
#: more types than this are checked by one scan of the KG's triples. A statement that names a type is planned for
#: that type: ~30 ms a type on this 2-core machine, whether alone or as a branch of a UNION (2,000 types of the 1M
#: scale KG: 50-60 s of planning, 42 ms of execution), while the scan is planned once (the same 2,000 types: 2.3-3.2 s)
SCAN_ABOVE = 100


def unused_types(graph: GraphStore, types: Sequence[str], catalog: Container[str]) -> list[str]:
    """Those of ``types`` (of the KG's catalog) that no triple of the KG has: up to :data:`SCAN_ABOVE` types, one
    read per :data:`TYPES_PER_CHECK` types (a UNION ALL of one branch per type, each stopping at its first triple);
    more, one scan of the KG's triples that stops once it has seen every type."""
    if len(types) > SCAN_ABOVE:
        seen = {r["type"] for r in graph.read_named("changes_types_used", kg=graph.kg, types=list(types),
                                                    n=len(types))}
        return [t for t in types if t not in seen]
    used: set[str] = set()
    for start in range(0, len(types), TYPES_PER_CHECK):
        chunk = types[start:start + TYPES_PER_CHECK]
        stmt = joined([render("changes_type_used", rel_type=rel_type(t, catalog)) for t in chunk], "\nUNION ALL\n")
        used.update(r["type"] for r in graph.read(stmt, kg=graph.kg))
    return [t for t in types if t not in used]


def apply_changes(graph: GraphStore, vectors: VectorStore | None, embedder: TextEmbedder | None,
                  ops: Iterable[Any], *, strict: bool = False, progress: bool = True,
                  batch_size: int = BATCH_SIZE, source: str = "") -> ApplyReport:
    """Apply a change set (operations of :mod:`engine.changes.ops`) to the KG of ``graph`` and its vectors, holding
    the KG's writer lease. Idempotent and resumable (see the module docstring). A bad operation (an empty key, a
    merge into itself, something that is no operation) is skipped while spooling and reported with its ``file:line``
    (or ``<changes>:index`` for one made in Python); one that cannot be applied (removing a triple that is not there,
    merging an entity that does not exist...) is skipped when its batch runs. With ``strict=True`` either raises
    :class:`~engine._errors.MalformedInputError`: a bad operation before anything is written, one that cannot be
    applied with its batch rolled back (the batches before it stay applied; run the change set again once fixed).
    ``vectors=None``: the graph alone (benchmarks)."""
    return ChangeApplier(graph, vectors, embedder, batch_size=batch_size, progress=progress).apply(
        ops, strict=strict, source=source)


__all__ = ["ApplyReport", "ChangeApplier", "apply_changes", "entity_text", "kg_aliases", "sync_alias_vectors",
           "sync_vectors", "unused_types", "BATCH_SIZE"]
