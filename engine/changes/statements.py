"""One batch of a change set as the statements of one Neo4j transaction, one statement per kind of operation.

The statements run in this order (:mod:`engine.changes.batching` cut the batch so that this equals running its
operations in order), each key resolved once, before the transaction, to its final entity
(:func:`engine.stores.aliases.resolve_keys`):

1. merges (``cypher/changes_merge.cypher``), 2. entity removals, 3. triple removals, 4. triple adds (entities,
relation catalog, relationships), 5. entity settings (names and descriptions, then types), 6. the sweep of the
entities that only triples brought in and that lost their last triple in this batch (``changes_sweep``), 7. the
type catalog entries no entity uses any more, 8. the batch's record on the version node (and, for the first batch
that applies something, the version it begins), with the ids whose vectors it made stale.

A statement's result is read by its *reader* (counts, skipped operations, what became stale or may have become
unused) before a later statement's parameters are computed from them: the parameters of the sweep, of the clean-up
and of the record are functions of the results so far (:meth:`engine.stores.graph.GraphStore.write_tx`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from engine._cypher import cypher
from engine._errors import ConfigError
from engine.stores.graph import is_relation_type, name_key, relation_id, sanitize_relation, type_id
from engine.stores.texts import entity_text
from loaders.bulk import default_name

from .ops import AddTriple, MergeEntity, Op, RemoveEntity, RemoveTriple, SetEntity

if TYPE_CHECKING:  # pragma: no cover
    from engine.stores.aliases import Resolved
    from engine.stores.graph import GraphStore

Rows = list[dict[str, Any]]
Reader = Callable[[Rows], None]


def stays_without_triples(key: str, name: str | None, description: str | None, types: Sequence[str] | None,
                          own: bool | None, aliased: bool) -> bool:
    """Whether an entity stays when it has no triple left: it has something of its own (it was given a name,
    description or types, or it has aliases). An entity written before ``own`` was recorded (``own`` None) has
    something of its own when its name is not its key's default name, or it has a description or types. The same
    rule as ``cypher/changes_sweep.cypher``."""
    if aliased or own:
        return True
    if own is None:
        return name != default_name(key) or bool(description) or bool(types)
    return False


@dataclass
class Stale:
    """What one batch made stale (ids to embed again or delete) or may have left unused."""

    entities: set[int] = field(default_factory=set)
    relations: set[int] = field(default_factory=set)
    types: set[int] = field(default_factory=set)
    rel_types: set[str] = field(default_factory=set)  # relationship types that may have lost their last triple
    tids: set[int] = field(default_factory=set)  # entity types that may have lost their last entity
    candidates: dict[int, str] = field(default_factory=dict)  # eid -> default name: may have lost its last triple


class BatchStatements:
    """The statements of one batch (see the module docstring). ``resolved``: every key of the batch -> its final
    entity; ``existing``: eid -> ``{adopted}`` of the entities that merges and removals name and that exist."""

    def __init__(self, graph: GraphStore, batch: Sequence[Op], report: Any, skip: Callable[[Op, str], None],
                 resolved: Mapping[str, Resolved], existing: Mapping[int, Mapping[str, Any]]) -> None:
        self.graph, self.kg, self.batch, self.report, self.skip = graph, graph.kg, batch, report, skip
        self.key, self.existing = resolved, existing
        self.stale = Stale()
        self.gone: set[int] = set()  # entities merged away or removed before the later statements run
        self._stmts: list[tuple[str, Any]] = []
        self._readers: list[Reader | None] = []
        self._read = 0

    def add(self, query: str, params: Any, reader: Reader | None = None) -> None:
        """A statement (``params``: a dict, or a function of the results so far) and what reads its rows."""
        self._stmts.append((query, params))
        self._readers.append(reader)

    def read(self, results: Sequence[Rows]) -> None:
        """Run the readers of the statements whose results have come and were not read yet."""
        while self._read < min(len(results), len(self._readers)):
            reader = self._readers[self._read]
            if reader is not None:
                reader(results[self._read])
            self._read += 1

    def after(self, make: Callable[[], dict[str, Any]]) -> Callable[[Sequence[Rows]], dict[str, Any]]:
        """Parameters computed once the results so far are read."""
        def params(results: Sequence[Rows]) -> dict[str, Any]:
            self.read(results)
            return make()
        return params

    def statements(self) -> list[tuple[str, Any]]:
        """Statements 1-7 (the caller adds the record)."""
        self._merges()
        self._entity_removals()
        self._triple_removals()
        self._triple_adds()
        self._settings()
        if any(isinstance(op, (RemoveTriple, RemoveEntity)) or isinstance(op, SetEntity) and op.reset
               for op in self.batch):
            self.add(cypher("changes_sweep"), self.after(self._sweep_rows), self._read_sweep)
        self.add(cypher("changes_unused_types"), self.after(lambda: {"tids": sorted(self.stale.tids), "kg": self.kg}),
                 lambda rows: self.stale.types.update(r["tid"] for r in rows))
        return self._stmts

    def _candidate(self, eid: int, key: str) -> None:
        self.stale.candidates.setdefault(eid, default_name(key))

    # -- 1. merges ----------------------------------------------------------------------------------------
    def _merges(self) -> None:
        rows = []
        for op in self.batch:
            if not isinstance(op, MergeEntity):
                continue
            s, t = self.key[op.source].eid, self.key[op.target].eid
            if s == t:
                continue  # merged already (the source's key is an alias of the target): nothing to do
            why = self._merge_refused(op, s, t)
            if why:
                self.skip(op, why)
                continue
            rows.append({"src": s, "dst": t})
            self.gone.add(s)
            self.stale.entities.add(s)
        if rows:
            self.add(cypher("changes_merge"), {"rows": rows, "kg": self.kg},
                     lambda res: setattr(self.report, "merged", self.report.merged + len(res)))

    def _merge_refused(self, op: MergeEntity, s: int, t: int) -> str:
        if s not in self.existing:
            return f"merge: source entity {op.source!r} is not in KG {self.kg!r}"
        if t not in self.existing:
            return f"merge: target entity {op.target!r} is not in KG {self.kg!r}"
        if self.existing[s].get("adopted"):
            return (f"merge: source entity {op.source!r} is a node of the user's graph (adopted): isorag never "
                    "deletes it")
        if s in self.gone or t in self.gone:
            return "merge: an entity of it is merged away earlier in this change set"
        return ""

    # -- 2. entity removals ---------------------------------------------------------------------------------
    def _entity_removals(self) -> None:
        eids: list[int] = []
        for op in self.batch:
            if isinstance(op, RemoveEntity):
                e = self.key[op.key].eid
                if e not in self.existing or e in self.gone:
                    self.skip(op, f"remove_entity: entity {op.key!r} is not in KG {self.kg!r}")
                    continue
                eids.append(e)
                self.gone.add(e)
                self.stale.entities.add(e)
        if eids:
            self.add(cypher("changes_remove_entities"), {"eids": eids, "kg": self.kg}, self._read_removals)

    def _read_removals(self, rows: Rows) -> None:
        self.report.entities_removed += len(rows)
        for r in rows:
            self.stale.rel_types.update(r["rel_types"])
            self.stale.tids.update(r["tids"])
            for eid, key in r["neighbours"]:
                self._candidate(eid, key)

    # -- 3. triple removals ---------------------------------------------------------------------------------
    def _triple_removals(self) -> None:
        rows: list[dict[str, Any]] = []
        ops: list[RemoveTriple] = []
        seen: set[tuple[int, str, int]] = set()
        for op in self.batch:
            if isinstance(op, RemoveTriple):
                h, t, ty = self.key[op.head].eid, self.key[op.tail].eid, sanitize_relation(op.relation)
                if (h, ty, t) in seen:
                    self.skip(op, self._no_triple(op))
                    continue
                seen.add((h, ty, t))
                rows.append({"i": len(ops), "h": h, "t": t, "type": ty})
                ops.append(op)
        if not rows:
            return

        def read(res: Rows) -> None:
            for r in res:
                op = ops[r["i"]]
                if not r["removed"]:
                    self.skip(op, self._no_triple(op))
                    continue
                self.report.removed += 1
                self.stale.rel_types.add(sanitize_relation(op.relation))
                # only an end left with no relationship may leave with its last triple (nothing after this
                # statement removes one); most keep others, and the sweep need not ask about them
                for k, bare in ((op.head, r["h_bare"]), (op.tail, r["t_bare"])):
                    if bare:
                        self._candidate(self.key[k].eid, self.key[k].key)
        self.add(cypher("changes_remove_triples"), {"rows": rows}, read)

    def _no_triple(self, op: RemoveTriple) -> str:
        return f"remove: triple ({op.head!r}, {op.relation!r}, {op.tail!r}) is not in KG {self.kg!r}"

    # -- 4. triple adds -------------------------------------------------------------------------------------
    def _triple_adds(self) -> None:
        ents: dict[int, dict[str, Any]] = {}
        groups: dict[int, list[dict[str, Any]]] = {}
        rels: dict[str, dict[str, Any]] = {}
        n = 0
        for op in self.batch:
            if not isinstance(op, AddTriple):
                continue
            for k in (op.head, op.tail):
                r = self.key[k]
                if r.eid not in ents:  # created when missing (or removed earlier in this batch), keyed by its key
                    nm = default_name(r.key)
                    ents[r.eid] = {"eid": r.eid, "key": r.key, "name": nm, "name_key": name_key(nm), "types": []}
            ty = sanitize_relation(op.relation)
            if op.relation not in rels:
                if not is_relation_type(ty):
                    raise ConfigError(f"not a valid relationship type: {ty!r}")
                rels[op.relation] = {"rid": relation_id(self.kg, op.relation), "name": op.relation, "type": ty}
            groups.setdefault(self.key[op.head].eid, []).append(
                {"t": self.key[op.tail].eid, "type": ty, "name": op.relation})
            n += 1
        if not n:
            return
        self.add(cypher("changes_add_entities"), {"rows": list(ents.values()), "kg": self.kg},
                 lambda rows: self.stale.entities.update(r["eid"] for r in rows))  # created here: no vector yet
        self.add(cypher("changes_add_relation_types"), {"rows": list(rels.values()), "kg": self.kg},
                 lambda rows: self.stale.relations.update(r["rid"] for r in rows))  # new in the catalog
        self.add(cypher("merge_relationships"),
                 {"merge": [{"h": h, "rels": rs} for h, rs in groups.items()], "create": []})
        self.report.added += n

    # -- 5. entity settings ---------------------------------------------------------------------------------
    def _settings(self) -> None:
        rows: dict[int, dict[str, Any]] = {}
        type_rows: list[dict[str, Any]] = []
        alias_rows: list[dict[str, Any]] = []
        for op in self.batch:
            if not isinstance(op, SetEntity):
                continue
            r = self.key[op.key]
            if op.aliases is not None or op.remove_aliases is not None:
                alias_rows.append({"eid": r.eid, "aliases": list(op.aliases or ()),
                                   "replace": op.aliases is not None and not op.add_aliases,
                                   "remove": list(op.remove_aliases or ())})
                if not op.aliases and op.name is None and op.description is None and op.types is None:
                    self.report.entities_set += 1
                    continue  # aliases taken away only: the entity gets nothing of its own by it
            dn = default_name(r.key)
            row = rows.setdefault(r.eid, {"eid": r.eid, "key": r.key, "name": None, "name_key": None,
                                          "set_desc": False, "description": None, "default_name": dn,
                                          "default_name_key": name_key(dn), "own": True})
            if op.reset:  # what an added triple makes an entity: it leaves with its last triple
                row.update(name=dn, name_key=name_key(dn), set_desc=True, description=None, own=False)
                type_rows.append({"eid": r.eid, "replace": True, "types": []})
                self._candidate(r.eid, r.key)
            if op.name is not None:
                row["name"], row["name_key"] = op.name, name_key(op.name)
            if op.description is not None:
                row["set_desc"], row["description"] = True, op.description or None
            if op.types is not None:
                type_rows.append({"eid": r.eid, "replace": not op.add_types,
                                  "types": [{"tid": type_id(self.kg, t), "name": t} for t in op.types]})
            self.report.entities_set += 1
        if rows:  # (every set writes the row: an entity missing is created before its types are set)
            self.add(cypher("changes_set_entities"), {"rows": list(rows.values()), "kg": self.kg}, self._read_sets)
        if alias_rows:  # an entity whose aliases changed is queued: its alias vectors follow
            self.add(cypher("changes_set_aliases"), {"rows": alias_rows},
                     lambda rows: self.stale.entities.update(r["eid"] for r in rows if r["changed"]))
        if type_rows:
            self.add(cypher("changes_set_types"), {"rows": type_rows, "kg": self.kg}, self._read_types)

    def _read_sets(self, rows: Rows) -> None:
        for r in rows:
            before = entity_text(r["name_before"], r["desc_before"])
            if r["created"] or before != entity_text(r["name"], r["description"]):
                self.stale.entities.add(r["eid"])

    def _read_types(self, rows: Rows) -> None:
        for r in rows:
            self.stale.tids.update(r["tids"])
            self.stale.types.update(r["tids"])

    # -- 6. the sweep -----------------------------------------------------------------------------------------
    def _sweep_rows(self) -> dict[str, Any]:
        rows = [{"eid": e, "default_name": dn} for e, dn in self.stale.candidates.items()]
        return {"rows": rows, "kg": self.kg}

    def _read_sweep(self, rows: Rows) -> None:
        self.report.orphans_removed += len(rows)
        self.stale.entities.update(r["eid"] for r in rows)


__all__ = ["BatchStatements", "Stale", "stays_without_triples"]
