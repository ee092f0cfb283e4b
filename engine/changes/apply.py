"""Apply a change set to both stores, in idempotent batches that a rerun resumes.

How a change set runs (:func:`apply_changes`):

1. Its operations are spooled to a temporary file while their identity is hashed (memory stays flat), so the change
   set is known by its content before anything is written. The KG's version node (``:IsoragKGVersion {kg}``) says
   which change set was applied last and how many of its batches and operations are committed: the same change
   set again is finished where it stopped (after a kill: from the first operation not committed) or, when it was
   complete, changes nothing. Any other starts a new version (sequence number + timestamp).
2. Operations are cut into batches of at most ``batch_size``; a batch ends early where executing its operations by
   kind (merges, entity removals, triple removals, triple adds, entity settings: one statement each) would differ
   from executing them in order, keys compared as the statements resolve them (through the KG's aliases and the
   change set's own merges). Each batch is one Neo4j transaction, which also records the batch and its operations
   as committed and queues the ids whose vectors it made stale (entities, relations and types that are new or
   changed) on the version node.
3. After each batch the vector side catches up: every queued id is looked up in Neo4j; what exists is embedded from
   its current text and upserted, what is gone is deleted from Milvus; then the queue is cleared. A kill between the
   two leaves the queue in Neo4j, and the next run (of this or any change set) works it off first.

Keys merged into another entity are aliases (``:IsoragAlias``): every key of a change set (and of later loads) is
resolved through them.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Container, Iterable, Iterator, Sequence

from engine._cypher import cypher, joined, render, rel_type
from engine._errors import ConfigError, MalformedInputError
from engine.stores.graph import entity_id, name_key, relation_id, sanitize_relation, type_id
from loaders.bulk import default_name

from .ops import AddTriple, MergeEntity, Op, RemoveEntity, RemoveTriple, SetEntity, identity, op_from_json, op_to_json

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import TextEmbedder
    from engine.stores.graph import GraphStore
    from engine.stores.vectors import VectorStore

#: operations per batch (one Neo4j transaction)
BATCH_SIZE = 5_000
#: skipped operations kept (with file:line) in a report
KEEP_SKIPPED = 20

# the order in which a batch's statements run
_MERGE, _REMOVE_ENTITY, _REMOVE, _ADD, _SET = range(5)


def entity_text(name: str | None, description: str | None) -> str:
    """What an entity's vector is embedded from: its name, and its description when it has one."""
    name = name or ""
    return f"{name}: {description}" if description else name


@dataclass
class ApplyReport:
    """What a change set did: counts per operation kind, the skipped operations (``file:line: reason``) and the
    KG's version after it."""

    kg: str = ""
    source: str = ""
    ops: int = 0
    added: int = 0
    removed: int = 0
    entities_set: int = 0
    entities_removed: int = 0
    merged: int = 0
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def add_skipped(self, errors: Iterable[MalformedInputError], count: int) -> None:
        """Count lines skipped before the operations reached the applier (by the reader); ``errors``: the first."""
        self.skipped += count
        for err in errors:
            kind = err.reason.split(":", 1)[0].strip()[:80]
            self.skip_reasons[kind] = self.skip_reasons.get(kind, 0) + 1
            if len(self.skip_examples) < KEEP_SKIPPED:
                self.skip_examples.append(str(err))

    def lines(self) -> list[str]:
        if self.already_applied:
            head = f"change set {self.source or ''} was already applied to KG {self.kg!r}: nothing changed"
        else:
            head = f"applied {self.source or 'changes'} to KG {self.kg!r} in {self.wall_s:.1f} s"
        out = [head,
               f"  operations {self.ops:,}: triples added {self.added:,}, removed {self.removed:,}; entities set "
               f"{self.entities_set:,}, removed {self.entities_removed:,}, merged {self.merged:,}; skipped "
               f"{self.skipped:,}",
               f"  batches {self.batches:,} (resumed from an earlier run {self.batches_resumed:,}); vectors "
               f"upserted {self.vectors_upserted:,}, deleted {self.vectors_deleted:,}",
               f"  version {self.version} at {self.version_at}"]
        out += [f"  skipped {m}" for m in self.skip_examples]
        return out


class _Skips:
    """The loaders' skip rules for operations that cannot be applied: strict raises, else count and keep some."""

    def __init__(self, report: ApplyReport, strict: bool) -> None:
        self.report, self.strict = report, strict

    def __call__(self, err: MalformedInputError) -> None:
        if self.strict:
            raise err
        r = self.report
        r.skipped += 1
        kind = err.reason.split(":", 1)[0].strip()[:80]
        r.skip_reasons[kind] = r.skip_reasons.get(kind, 0) + 1
        if len(r.skip_examples) < KEEP_SKIPPED:
            r.skip_examples.append(str(err))

    def op(self, op: Op, reason: str) -> None:
        self(MalformedInputError(op.path or "<changes>", op.line, reason))


# ------------------------------------------------------------------------------------------- spooling
def _spool(ops: Iterable[Op], spool: Any) -> tuple[str, int]:
    """Write ``ops`` to ``spool`` (one JSON line each, with line and path) and hash what they do."""
    h = hashlib.blake2b(digest_size=16)
    n = 0
    for op in ops:
        if not isinstance(op, (AddTriple, RemoveTriple, SetEntity, RemoveEntity, MergeEntity)):
            raise ConfigError(f"not a change-set operation: {op!r}")
        h.update(json.dumps(identity(op), ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
        spool.write(json.dumps([op_to_json(op), op.line, op.path], ensure_ascii=False) + "\n")
        n += 1
    return h.hexdigest(), n


def _unspool(path: str) -> Iterator[Op]:
    with open(path, encoding="utf-8") as f:
        for text in f:
            obj, line, src = json.loads(text)
            yield op_from_json(obj, line=line, path=src)


# ------------------------------------------------------------------------------------------- batching
def _keys(op: Op) -> tuple[str, ...]:
    if isinstance(op, (AddTriple, RemoveTriple)):
        return (op.head, op.tail)
    if isinstance(op, MergeEntity):
        return (op.source, op.target)
    return (op.key,)


_CLASS = {MergeEntity: _MERGE, RemoveEntity: _REMOVE_ENTITY, RemoveTriple: _REMOVE, AddTriple: _ADD, SetEntity: _SET}


class _Cutter:
    """Decides where a batch must end so that running its statements by kind equals running its ops in order.

    Keys are compared as the statements will resolve them: through the merges of the change set so far (a merged
    source is an alias of its target from then on, in this batch and every later one)."""

    def __init__(self, aliases: dict[str, str] | None = None) -> None:
        # source -> target: the KG's aliases before the batches (from earlier change sets), then the change set's
        # merges so far
        self.alias: dict[str, str] = dict(aliases or {})
        self.reset()

    def reset(self) -> None:
        self.by_class: list[set[str]] = [set() for _ in range(5)]  # resolved keys touched per class
        self.added: set[tuple[str, str, str]] = set()
        self.merged: set[str] = set()  # keys merged away in this batch: later ops must resolve them as aliases

    def _chain(self, key: str) -> list[str]:
        """``key`` and the keys it resolves through, its final target last."""
        out = [key]
        while out[-1] in self.alias and len(out) <= len(self.alias):
            out.append(self.alias[out[-1]])
        return out

    def _resolved(self, op: Op) -> list[str]:
        return [self._chain(k)[-1] for k in _keys(op)]

    def conflicts(self, op: Op) -> bool:
        if any(c in self.merged for k in _keys(op) for c in self._chain(k)):
            return True
        keys = self._resolved(op)
        c = _CLASS[type(op)]
        if c == _MERGE:
            return any(k in s for s in self.by_class for k in keys)
        if c == _REMOVE_ENTITY:
            return any(k in s for s in self.by_class[_REMOVE_ENTITY:] for k in keys)
        if c == _REMOVE:
            assert isinstance(op, RemoveTriple)
            return (keys[0], op.relation, keys[1]) in self.added
        if c == _SET:
            return any(k in self.by_class[_SET] for k in keys)
        return False

    def take(self, op: Op) -> None:
        keys = self._resolved(op)
        self.by_class[_CLASS[type(op)]].update(keys)
        if isinstance(op, AddTriple):
            self.added.add((keys[0], op.relation, keys[1]))
        elif isinstance(op, MergeEntity):
            source, target = keys
            if source != target:
                self.merged.update(self._chain(op.source))
                self.alias[source] = target


def _batches(ops: Iterable[Op], size: int, aliases: dict[str, str] | None = None) -> Iterator[list[Op]]:
    """Batches of at most ``size`` ops, cut where running a batch by kind would differ from running it in order;
    ``aliases`` (key -> the key it resolves to) are the KG's aliases the ops may name."""
    cut = _Cutter(aliases)
    batch: list[Op] = []
    for op in ops:
        if batch and (len(batch) >= size or cut.conflicts(op)):
            yield batch
            batch = []
            cut.reset()
        cut.take(op)
        batch.append(op)
    if batch:
        yield batch


# ------------------------------------------------------------------------------------------- the writer
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

    # -- keys ---------------------------------------------------------------------------------------
    def _resolve(self, keys: Iterable[str]) -> dict[str, int]:
        """key -> eid, through the aliases of merged entities (looked up only once the KG has any)."""
        eids = {k: entity_id(self.kg, k) for k in keys}
        if self._has_aliases is None:
            self._has_aliases = bool(self.graph.read_named("kg_has_aliases", kg=self.kg))
        if eids and self._has_aliases:
            rows = self.graph.read_named("aliases_of", eids=sorted(set(eids.values())))
            if rows:
                alias = {r["aid"]: r["target"] for r in rows}
                eids = {k: alias.get(e, e) for k, e in eids.items()}
        return eids

    def _aliases(self) -> dict[str, str]:
        """The KG's aliases (:func:`kg_aliases`): the batch cutter compares keys as the statements will resolve
        them."""
        aliases = kg_aliases(self.graph)
        self._has_aliases = bool(aliases)
        return aliases

    # -- one batch ------------------------------------------------------------------------------------
    def _statements(self, batch: list[Op], report: ApplyReport, skips: _Skips, index: int, ops_done: int | None = None
                    ) -> tuple[list[tuple[str, Any]], set[str]]:
        """The batch's statements (one per kind present, then the clean-up of unused types and the batch's record
        on the version node: parameters computed from the results before them), and the relationship types that
        may have lost their last triple (filled as the transaction runs)."""
        kg = self.kg
        keys = {k for op in batch for k in _keys(op)}
        eid = self._resolve(keys)
        # whether an entity exists is asked only where an operation needs it before the transaction (merges and
        # entity removals); the other statements MERGE, or say what they found
        asked = sorted({eid[k] for op in batch if isinstance(op, (MergeEntity, RemoveEntity)) for k in _keys(op)})
        existing = {r["eid"]: r for r in self.graph.read_named("changes_entities", eids=asked, kg=kg)} if asked else {}
        stmts: list[tuple[str, Any]] = []
        readers: list[Callable[[list[dict[str, Any]]], None]] = []
        stale_entities: set[int] = set()
        stale_relations: set[int] = set()
        stale_types: set[int] = set()
        maybe_unused_rel_types: set[str] = set()
        maybe_unused_tids: set[int] = set()
        gone: set[int] = set()  # entities this batch removes or merges away (before later statements)

        def adopted(e: int) -> bool:
            return bool(existing.get(e, {}).get("adopted"))

        # merges
        merges = []
        for op in batch:
            if isinstance(op, MergeEntity):
                s, t = eid[op.source], eid[op.target]
                if s == t:
                    continue  # merged already (the source's key is an alias of the target): nothing to do
                if s not in existing:
                    skips.op(op, f"merge: source entity {op.source!r} is not in KG {kg!r}")
                elif t not in existing:
                    skips.op(op, f"merge: target entity {op.target!r} is not in KG {kg!r}")
                elif adopted(s):
                    skips.op(op, f"merge: source entity {op.source!r} is a node of the user's graph (adopted): "
                                 "isorag never deletes it")
                elif s in gone or t in gone:
                    skips.op(op, "merge: an entity of it is merged away earlier in this change set")
                else:
                    merges.append({"src": s, "dst": t, "key": op.source})
                    gone.add(s)
                    stale_entities.add(s)
        if merges:
            self._has_aliases = True
            stmts.append((cypher("changes_merge"), {"rows": merges, "kg": kg}))

            def read_merges(rows: list[dict[str, Any]]) -> None:
                report.merged += len(rows)
            readers.append(read_merges)
        # entity removals
        removals: list[int] = []
        for op in batch:
            if isinstance(op, RemoveEntity):
                e = eid[op.key]
                if e not in existing or e in gone:
                    skips.op(op, f"remove_entity: entity {op.key!r} is not in KG {kg!r}")
                else:
                    removals.append(e)
                    gone.add(e)
                    stale_entities.add(e)
        if removals:
            stmts.append((cypher("changes_remove_entities"), {"eids": removals, "kg": kg}))

            def read_removals(rows: list[dict[str, Any]]) -> None:
                report.entities_removed += len(rows)
                for r in rows:
                    maybe_unused_rel_types.update(r["rel_types"])
                    maybe_unused_tids.update(r["tids"])
            readers.append(read_removals)
        # triple removals
        rem_rows: list[dict[str, Any]] = []
        rem_ops: list[RemoveTriple] = []
        seen: set[tuple[int, str, int]] = set()
        for op in batch:
            if isinstance(op, RemoveTriple):
                h, t, ty = eid[op.head], eid[op.tail], sanitize_relation(op.relation)
                if (h, ty, t) in seen:
                    skips.op(op, f"remove: triple ({op.head!r}, {op.relation!r}, {op.tail!r}) is not in KG {kg!r}")
                    continue
                seen.add((h, ty, t))
                rem_rows.append({"i": len(rem_ops), "h": h, "t": t, "type": ty})
                rem_ops.append(op)
        if rem_rows:
            stmts.append((cypher("changes_remove_triples"), {"rows": rem_rows}))

            def read_removes(rows: list[dict[str, Any]]) -> None:
                for r in rows:
                    op = rem_ops[r["i"]]
                    if r["removed"]:
                        report.removed += 1
                        maybe_unused_rel_types.add(sanitize_relation(op.relation))
                    else:
                        skips.op(op, f"remove: triple ({op.head!r}, {op.relation!r}, {op.tail!r}) is not in KG "
                                     f"{kg!r}")
            readers.append(read_removes)
        # triple adds: entities, relation catalog, relationships
        ents: dict[int, dict[str, Any]] = {}
        groups: dict[int, list[dict[str, Any]]] = {}
        rels: dict[str, dict[str, Any]] = {}
        n_add = 0
        for op in batch:
            if isinstance(op, AddTriple):
                for k in (op.head, op.tail):
                    e = eid[k]
                    if e not in ents:  # created when missing (or removed earlier in this batch)
                        nm = default_name(k)
                        ents[e] = {"eid": e, "key": k, "name": nm, "name_key": name_key(nm), "types": []}
                ty = sanitize_relation(op.relation)
                if op.relation not in rels:
                    rels[op.relation] = {"rid": relation_id(kg, op.relation), "name": op.relation, "type": ty}
                groups.setdefault(eid[op.head], []).append({"t": eid[op.tail], "type": ty, "name": op.relation})
                n_add += 1
        if n_add:
            for r in rels.values():
                if not _valid_type(r["type"]):
                    raise ConfigError(f"not a valid relationship type: {r['type']!r}")
            stmts.append((cypher("changes_add_entities"), {"rows": list(ents.values()), "kg": kg}))

            def read_entities(rows: list[dict[str, Any]]) -> None:
                stale_entities.update(r["eid"] for r in rows)  # created here: no vector yet
            readers.append(read_entities)
            stmts.append((cypher("changes_add_relation_types"), {"rows": list(rels.values()), "kg": kg}))

            def read_relations(rows: list[dict[str, Any]]) -> None:
                stale_relations.update(r["rid"] for r in rows)  # new in the catalog: no vector yet
            readers.append(read_relations)
            stmts.append((cypher("merge_relationships"),
                          {"merge": [{"h": h, "rels": rs} for h, rs in groups.items()], "create": []}))
            readers.append(lambda rows: None)
            report.added += n_add
        # entity settings
        set_rows: dict[int, dict[str, Any]] = {}
        type_rows: list[dict[str, Any]] = []
        alias_rows: list[dict[str, Any]] = []
        for op in batch:
            if isinstance(op, SetEntity):
                e = eid[op.key]
                if op.aliases is not None or op.remove_aliases is not None:
                    alias_rows.append({"eid": e, "aliases": list(op.aliases or ()),
                                       "replace": op.aliases is not None and not op.add_aliases,
                                       "remove": list(op.remove_aliases or ())})
                if op.name is not None or op.description is not None:
                    dn = default_name(op.key)
                    row = set_rows.setdefault(e, {"eid": e, "key": op.key, "name": None, "name_key": None,
                                                  "set_desc": False, "description": None, "default_name": dn,
                                                  "default_name_key": name_key(dn)})
                    if op.name is not None:
                        row["name"], row["name_key"] = op.name, name_key(op.name)
                    if op.description is not None:
                        row["set_desc"], row["description"] = True, op.description or None
                if op.types is not None or (op.aliases is not None or op.remove_aliases is not None):
                    if e not in set_rows:  # the entity is MERGEd before its types and aliases are set
                        dn = default_name(op.key)
                        set_rows[e] = {"eid": e, "key": op.key, "name": None, "name_key": None, "set_desc": False,
                                       "description": None, "default_name": dn, "default_name_key": name_key(dn)}
                if op.types is not None:
                    type_rows.append({"eid": e, "replace": not op.add_types,
                                      "types": [{"tid": type_id(kg, t), "name": t} for t in op.types]})
                report.entities_set += 1
        if set_rows:
            stmts.append((cypher("changes_set_entities"), {"rows": list(set_rows.values()), "kg": kg}))

            def read_sets(rows: list[dict[str, Any]]) -> None:
                stale_entities.update(r["eid"] for r in rows if r["changed"])
            readers.append(read_sets)
        if alias_rows:
            stmts.append((cypher("changes_set_aliases"), {"rows": alias_rows}))

            def read_aliases(rows: list[dict[str, Any]]) -> None:
                stale_entities.update(r["eid"] for r in rows if r["changed"])  # their alias vectors follow
            readers.append(read_aliases)
        if type_rows:
            stmts.append((cypher("changes_set_types"), {"rows": type_rows, "kg": kg}))

            def read_types(rows: list[dict[str, Any]]) -> None:
                for r in rows:
                    maybe_unused_tids.update(r["tids"])
                    stale_types.update(r["tids"])
            readers.append(read_types)

        def finish(results: list[list[dict[str, Any]]]) -> None:
            for rd, rows in zip(readers, results):
                rd(rows)

        def record(prev: list[list[dict[str, Any]]]) -> dict[str, Any]:
            stale_types.update(r["tid"] for r in prev[-1])  # types nothing uses any more: deleted just before
            return {"kg": kg, "batches": index + 1, "ops": ops_done, "entities": sorted(stale_entities),
                    "relations": sorted(stale_relations), "types": sorted(stale_types)}

        def unused_types(prev: list[list[dict[str, Any]]]) -> dict[str, Any]:
            finish(prev)  # the statements' results say which types may have lost their last entity
            return {"tids": sorted(maybe_unused_tids), "kg": kg}

        stmts += [(cypher("changes_unused_types"), unused_types), (cypher("changes_batch_done"), record)]
        return stmts, maybe_unused_rel_types

    def _write_batch(self, batch: list[Op], report: ApplyReport, skips: _Skips, index: int,
                     ops_done: int | None = None) -> set[str]:
        """One batch in one transaction (with its record on the version node). Returns the relationship types it
        removed triples of: the caller drops those nothing uses any more once the change set's batches are in (one
        check per type and change set, not per batch: a type touched by every batch is looked at once)."""
        stmts, maybe_unused = self._statements(batch, report, skips, index, ops_done)
        self.graph.write_tx(stmts)
        self.graph.invalidate()
        return maybe_unused

    def _drop_unused_relations(self, types: Iterable[str] | None, batches: int) -> None:
        """Drop the relation catalog entries of these relationship types (None: every type of the catalog) that no
        triple of the KG uses any more, and queue their vectors for deletion."""
        g, kg = self.graph, self.kg
        catalog = {ri.type for ri in g.relation_catalog(refresh=True).values()}
        drop = unused_types(g, [t for t in sorted(catalog if types is None else set(types)) if t in catalog],
                            catalog)
        if drop:
            def record(prev: list[list[dict[str, Any]]]) -> dict[str, Any]:
                return {"kg": kg, "batches": batches, "ops": None, "entities": [],
                        "relations": sorted(r["rid"] for r in prev[0]), "types": []}
            g.write_tx([(cypher("changes_drop_relations"), {"kg": kg, "types": drop}),
                        (cypher("changes_batch_done"), record)])

    # -- the vector side --------------------------------------------------------------------------------
    def catch_up_vectors(self, report: ApplyReport, *, done: bool | None = None) -> None:
        """Bring Milvus in line with the ids the committed batches queued; then clear the queue."""
        g, v = self.graph, self.vectors
        rows = g.read_named("changes_state", kg=self.kg)
        if not rows:
            return
        st = rows[0]
        ents, rids, tids = st["pending_entities"], st["pending_relations"], st["pending_types"]
        if v is not None and (ents or rids or tids):
            t0 = time.perf_counter()
            upserted, deleted = sync_vectors(g, v, self.embedder, ents, rids, tids,  # type: ignore[arg-type]
                                             embed_batch_size=self.embed_batch_size)
            report.vectors_upserted += upserted
            report.vectors_deleted += deleted
            report.vector_s += time.perf_counter() - t0
        if ents or rids or tids or done is not None:
            g.write(cypher("changes_vectors_done"), kg=self.kg,
                    done=bool(st["cs_done"]) if done is None else done)

    # -- the driver ----------------------------------------------------------------------------------------
    def apply(self, ops: Iterable[Op], *, strict: bool = False, source: str = "") -> ApplyReport:
        """Apply ``ops`` (holding the KG's writer lease); see the module docstring."""
        with self.graph.lock(f"apply {source or 'changes'}"):
            return self._apply(ops, strict, source)

    def _apply(self, ops: Iterable[Op], strict: bool, source: str) -> ApplyReport:
        from tqdm import tqdm

        t_start = time.perf_counter()
        report = ApplyReport(kg=self.kg, source=source)
        skips = _Skips(report, strict)
        g = self.graph
        g.ensure_schema()
        if self.vectors is not None:
            self.vectors.ensure_collections()
        fd, spool_path = tempfile.mkstemp(prefix="isorag-changes-", suffix=".jsonl")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as spool:
                digest, total = _spool(ops, spool)
            report.ops = total
            self.catch_up_vectors(report)  # what a killed run left for Milvus
            rows = g.read_named("changes_state", kg=self.kg)
            st = rows[0] if rows else {}
            if st.get("cs_hash") == digest and st.get("cs_done"):
                report.already_applied = True
                report.version, report.version_at = int(st["seq"]), str(st["at"])
                report.wall_s = time.perf_counter() - t_start
                return report
            resume = int(st.get("cs_batches") or 0) if st.get("cs_hash") == digest else 0
            # where a killed run of this change set stopped: after its committed operations (None: a run of code
            # that counted batches only, whose cuts are then made again the same way)
            ops_done = int(st["cs_ops"]) if resume and st.get("cs_ops") is not None else None
            batch_size = self.batch_size
            if not resume:
                at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                row = g.write_tx([(cypher("changes_begin"), {"kg": self.kg, "at": at, "hash": digest,
                                                              "source": source, "batch_size": batch_size})])[0][0]
                report.version, report.version_at = int(row["seq"]), str(row["at"])
            else:  # the batches are cut as the run that committed the first ones cut them
                report.version, report.version_at = int(st["seq"]), str(st["at"])
                batch_size = int(st.get("cs_batch_size") or batch_size)
            bar = tqdm(total=total, desc="apply  (ops)", unit="op", disable=not self.progress, file=sys.stderr,
                       dynamic_ncols=True)
            maybe_unused: set[str] = set()  # relationship types the batches removed triples of
            try:
                if ops_done is not None:  # resumed after the committed operations, cut as the KG is now
                    report.batches = report.batches_resumed = resume
                    bar.update(ops_done)
                    batches = _batches(itertools.islice(_unspool(spool_path), ops_done, None), batch_size,
                                       self._aliases())
                    first, done = resume, ops_done
                else:
                    batches = _batches(_unspool(spool_path), batch_size, self._aliases() if not resume else None)
                    first, done = 0, 0
                for i, batch in enumerate(batches, start=first):
                    report.batches += 1
                    done += len(batch)
                    if i < resume:
                        report.batches_resumed += 1
                        bar.update(len(batch))
                        continue
                    t0 = time.perf_counter()
                    maybe_unused |= self._write_batch(batch, report, skips, i, done)
                    report.graph_s += time.perf_counter() - t0
                    self.catch_up_vectors(report)
                    bar.update(len(batch))
            finally:
                bar.close()
            t0 = time.perf_counter()
            if report.batches_resumed:  # a run killed before its catalog clean-up: sweep the whole catalog
                self._drop_unused_relations(None, report.batches)
            elif maybe_unused:
                self._drop_unused_relations(maybe_unused, report.batches)
            report.graph_s += time.perf_counter() - t0
            self.catch_up_vectors(report, done=True)
        finally:
            os.unlink(spool_path)
        if self.vectors is not None:
            self.vectors.ensure_ready()
        g.invalidate()
        report.wall_s = time.perf_counter() - t_start
        return report


#: relationship types checked per statement by :func:`unused_types`
TYPES_PER_CHECK = 200
#: more types than this are checked by one scan of the KG's triples. A statement that names a type is planned for
#: that type: ~30 ms a type on this 2-core machine, whether alone or as a branch of a UNION (2,000 types of the 1M
#: scale KG: 50-60 s of planning, 42 ms of execution), while the scan is planned once (the same 2,000 types: 2.3-3.2 s)
SCAN_ABOVE = 100


def kg_aliases(graph: GraphStore) -> dict[str, str]:
    """The KG's aliases: a merged entity's key -> the key of the entity it was merged into (held in memory: a KG has
    one per merge)."""
    return {r["alias"]: r["target"] for r in graph.read_named("kg_aliases", kg=graph.kg)}


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


def _valid_type(t: str) -> bool:
    from engine.stores.graph import _REL_TYPE, RESERVED_TYPES

    return bool(_REL_TYPE.fullmatch(t)) and t not in RESERVED_TYPES


def sync_vectors(graph: GraphStore, vectors: VectorStore, embedder: TextEmbedder, eids: Iterable[int],
                 rids: Iterable[int], tids: Iterable[int], *, embed_batch_size: int = 64) -> tuple[int, int]:
    """Make Milvus hold, for each of these ids, the vector of what Neo4j holds now: embedded from its current text
    when it exists (always for entities, whose text may have changed; relations and types only when missing or
    embedded from another name), deleted when it does not. Returns (upserted, deleted)."""
    kg = graph.kg
    eids, rids, tids = sorted(set(eids)), sorted(set(rids)), sorted(set(tids))
    upserted = deleted = 0
    for start in range(0, len(eids), 8_192):
        chunk = eids[start:start + 8_192]
        rows = graph.read_named("changes_texts", eids=chunk, kg=kg)
        texts = {r["eid"]: entity_text(r["name"], r["description"]) for r in rows}
        gone = [e for e in chunk if e not in texts]
        if gone:
            vectors.delete("entities", gone)
            deleted += len(gone)
        if texts:
            ids = list(texts)
            vectors.upsert("entities", ids, embedder.encode([texts[i] for i in ids], batch_size=embed_batch_size))
            upserted += len(ids)
        up, down = sync_alias_vectors(vectors, embedder, kg, chunk, {r["eid"]: list(r["aliases"]) for r in rows},
                                      embed_batch_size=embed_batch_size)
        upserted, deleted = upserted + up, deleted + down
    if rids or tids:
        names: dict[str, dict[int, str]] = {"relations": {}, "types": {}}
        for r in graph.read_named("changes_catalog_names", rids=rids, tids=tids, kg=kg):
            names[r["kind"]][r["id"]] = r["name"]
        for kind, ids in (("relations", rids), ("types", tids)):
            if not ids:
                continue
            have = names[kind]
            gone = [i for i in ids if i not in have]
            if gone:
                vectors.delete(kind, gone)
                deleted += len(gone)
            stored = vectors.get_names(kind, list(have))
            todo = [i for i in have if stored.get(i) != have[i]]
            if todo:
                vectors.upsert(kind, todo, embedder.encode([have[i] for i in todo], batch_size=embed_batch_size),
                               names=[have[i] for i in todo])
                upserted += len(todo)
    return upserted, deleted


def sync_alias_vectors(vectors: VectorStore, embedder: TextEmbedder, kg: str, eids: Sequence[int],
                       aliases: dict[int, list[str]], *, embed_batch_size: int = 64) -> tuple[int, int]:
    """Make the alias vectors of these entities those of their aliases now (``aliases``: eid -> its aliases; an
    entity not in it has none): the rows of aliases they lost deleted, those of new ones embedded. Returns
    (upserted, deleted)."""
    from engine.stores.graph import alias_id
    from engine.stores.vectors import ALIASES

    want = {alias_id(kg, e, a): (e, a) for e in eids for a in aliases.get(e, ())}
    have = vectors.alias_rows(eids)
    gone = [i for i in have if i not in want]
    if gone:
        vectors.delete(ALIASES, gone)
    todo = [i for i in want if i not in have]
    if todo:
        vectors.upsert(ALIASES, todo, embedder.encode([want[i][1] for i in todo], batch_size=embed_batch_size),
                       names=[want[i][1] for i in todo], owners=[want[i][0] for i in todo])
    return len(todo), len(gone)


def apply_changes(graph: GraphStore, vectors: VectorStore | None, embedder: TextEmbedder | None,
                  ops: Iterable[Op], *, strict: bool = False, progress: bool = True,
                  batch_size: int = BATCH_SIZE, source: str = "") -> ApplyReport:
    """Apply a change set (operations of :mod:`engine.changes.ops`) to the KG of ``graph`` and its vectors, holding
    the KG's writer lease. Idempotent and resumable (see the module docstring). An operation that cannot be applied
    (removing a triple that is not there, merging an entity that does not exist...) is skipped and reported with its
    ``file:line``, or raised as :class:`~engine._errors.MalformedInputError` with ``strict=True`` (the batches
    before it stay applied; run the change set again once fixed). ``vectors=None``: the graph alone (benchmarks)."""
    return ChangeApplier(graph, vectors, embedder, batch_size=batch_size, progress=progress).apply(
        ops, strict=strict, source=source)


__all__ = ["ApplyReport", "ChangeApplier", "apply_changes", "entity_text", "kg_aliases", "sync_alias_vectors",
           "sync_vectors", "BATCH_SIZE"]
