"""What a living KG is, in plain Python: the reference the change-set tests compare the engine with.

:class:`LivingModel` holds a KG as dicts (entities by key with their name, description, types and whether they
have something of their own; triples by key and relation name; key aliases) and gives the meaning of every way a KG
changes: a change set's operations run in order (:meth:`LivingModel.run`), one batch as the engine's statements run
it (:meth:`LivingModel.run_batch`: keys resolved once before the batch, kind by kind, the sweep at the end), a load
of records and a sync with a file (:meth:`LivingModel.load`, :meth:`LivingModel.sync`). :meth:`LivingModel.records`
writes the KG back as records, which a fresh load turns into the same KG.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from engine.changes.ops import AddTriple, MergeEntity, Op, RemoveEntity, RemoveTriple, SetEntity
from loaders._model import EntityRecord, TripleRecord
from loaders.bulk import default_name


@dataclass
class Ent:
    name: str
    description: str | None = None
    types: tuple[str, ...] = ()
    own: bool = False

    def text(self) -> str:
        return f"{self.name}: {self.description}" if self.description else self.name


def _keys(op: Op) -> tuple[str, ...]:
    if isinstance(op, (AddTriple, RemoveTriple)):
        return (op.head, op.tail)
    if isinstance(op, MergeEntity):
        return (op.source, op.target)
    return (op.key,)


@dataclass
class LivingModel:
    entities: dict[str, Ent] = field(default_factory=dict)
    triples: set[tuple[str, str, str]] = field(default_factory=set)  # (head key, relation name, tail key)
    aliases: dict[str, str] = field(default_factory=dict)  # alias key -> the key of the entity it resolves to
    removed: set[str] = field(default_factory=set)  # keys whose entity was removed at some point
    skipped: int = 0

    def copy(self) -> LivingModel:
        return LivingModel({k: replace(e) for k, e in self.entities.items()}, set(self.triples), dict(self.aliases),
                           set(self.removed), self.skipped)

    def state(self) -> tuple[Any, ...]:
        return ({k: (e.name, e.description, tuple(sorted(e.types)), e.own) for k, e in self.entities.items()},
                set(self.triples), dict(self.aliases))

    def resolve(self, key: str) -> str:
        return self.aliases.get(key, key)

    # -- the pieces every kind of change is made of --------------------------------------------------------
    def _make(self, key: str) -> Ent:
        if key not in self.entities:
            self.entities[key] = Ent(default_name(key))
        return self.entities[key]

    def _stays(self, key: str) -> bool:
        e = self.entities[key]
        return e.own or key in self.aliases.values() or any(key in (h, t) for h, _, t in self.triples)

    def _sweep(self, keys: Iterable[str]) -> None:
        for k in set(keys):
            if k in self.entities and not self._stays(k):
                del self.entities[k]
                self.removed.add(k)

    def _remove_entity(self, k: str) -> set[str]:
        """Remove entity ``k`` with its triples and aliases; returns the keys its triples joined it to."""
        near = {x for h, _, t in self.triples if k in (h, t) for x in (h, t)} - {k}
        del self.entities[k]
        self.removed.add(k)
        self.triples = {x for x in self.triples if k not in (x[0], x[2])}
        self.aliases = {a: t for a, t in self.aliases.items() if t != k}
        return near

    def _merge(self, s: str, t: str) -> None:
        src, dst = self.entities.pop(s), self.entities[t]
        dst.types = tuple(dict.fromkeys(dst.types + src.types))
        self.triples = {(t if h == s else h, r, t if x == s else x) for h, r, x in self.triples}
        self.aliases = {a: (t if v == s else v) for a, v in self.aliases.items()}
        self.aliases[s] = t
        self.removed.add(s)

    def _set(self, k: str, op: SetEntity) -> None:
        e = self._make(k)
        if op.reset:
            e.name, e.description, e.types, e.own = default_name(k), None, (), False
            return
        e.own = True
        if op.name is not None:
            e.name = op.name
        if op.description is not None:
            e.description = op.description or None
        if op.types is not None:
            e.types = tuple(dict.fromkeys(e.types + op.types)) if op.add_types else tuple(op.types)

    # -- a change set, in order -------------------------------------------------------------------------------
    def run(self, op: Op) -> None:
        """One operation, as its meaning says (a skipped one changes nothing and is counted)."""
        if isinstance(op, AddTriple):
            h, t = self.resolve(op.head), self.resolve(op.tail)
            self._make(h)
            self._make(t)
            self.triples.add((h, op.relation, t))
        elif isinstance(op, RemoveTriple):
            x = (self.resolve(op.head), op.relation, self.resolve(op.tail))
            if x not in self.triples:
                self.skipped += 1
                return
            self.triples.discard(x)
            self._sweep((x[0], x[2]))
        elif isinstance(op, SetEntity):
            k = self.resolve(op.key)
            self._set(k, op)
            self._sweep([k])
        elif isinstance(op, RemoveEntity):
            k = self.resolve(op.key)
            if k not in self.entities:
                self.skipped += 1
                return
            self._sweep(self._remove_entity(k))
        else:
            s, t = self.resolve(op.source), self.resolve(op.target)
            if s == t:
                return
            if s not in self.entities or t not in self.entities:
                self.skipped += 1
                return
            self._merge(s, t)

    def run_all(self, ops: Iterable[Op]) -> None:
        for op in ops:
            self.run(op)

    # -- one batch, as the engine's statements run it ---------------------------------------------------------
    def run_batch(self, batch: list[Op]) -> None:
        """Keys resolved once before the batch; merges, entity removals, triple removals, adds, settings in this
        order; whether a merged or removed entity exists asked before the batch; the sweep at the end."""
        key = {k: self.resolve(k) for op in batch for k in _keys(op)}
        existing = {key[k] for op in batch if isinstance(op, (MergeEntity, RemoveEntity)) for k in _keys(op)
                    if key[k] in self.entities}
        gone: set[str] = set()
        near: set[str] = set()
        for op in (o for o in batch if isinstance(o, MergeEntity)):
            s, t = key[op.source], key[op.target]
            if s == t:
                continue
            if s not in existing or t not in existing or s in gone or t in gone:
                self.skipped += 1
                continue
            self._merge(s, t)
            gone.add(s)
        for op in (o for o in batch if isinstance(o, RemoveEntity)):
            k = key[op.key]
            if k not in existing or k in gone:
                self.skipped += 1
                continue
            near |= self._remove_entity(k)
            gone.add(k)
        for op in (o for o in batch if isinstance(o, RemoveTriple)):
            x = (key[op.head], op.relation, key[op.tail])
            if x in self.triples:
                self.triples.discard(x)
                near |= {x[0], x[2]}
            else:
                self.skipped += 1
        for op in (o for o in batch if isinstance(o, AddTriple)):
            h, t = key[op.head], key[op.tail]
            self._make(h)
            self._make(t)
            self.triples.add((h, op.relation, t))
        for op in (o for o in batch if isinstance(o, SetEntity)):
            self._set(key[op.key], op)
            if op.reset:
                near.add(key[op.key])
        self._sweep(near)

    # -- loads and syncs ------------------------------------------------------------------------------------
    def load(self, records: Iterable[Any]) -> None:
        """A load adds: triples (keys resolved through the aliases), entity records (the last name wins, types
        united; the entity has something of its own)."""
        for rec in records:
            if isinstance(rec, TripleRecord):
                self.run(AddTriple(rec.head, rec.relation, rec.tail))
            else:
                e = self._make(self.resolve(rec.key))
                e.own = True
                if rec.name:
                    e.name = rec.name
                e.types = tuple(dict.fromkeys(e.types + tuple(rec.types)))

    def sync(self, records: list[Any]) -> None:
        """The KG made equal to what a fresh load of ``records`` gives (descriptions kept on described entities)."""
        triples = {(self.resolve(r.head), r.relation, self.resolve(r.tail)) for r in records
                   if isinstance(r, TripleRecord)}
        described: dict[str, tuple[str | None, tuple[str, ...]]] = {}
        for r in records:
            if isinstance(r, EntityRecord):
                k = self.resolve(r.key)
                name, types = described.get(k, (None, ()))
                described[k] = (r.name or name, tuple(dict.fromkeys(types + tuple(r.types))))
        named = {x for h, _, t in triples for x in (h, t)} | set(described)
        for k in [k for k in self.entities if k not in named]:
            self._remove_entity(k)
        self.triples = triples
        for k in named:
            e = self._make(k)
            if k in described:
                name, types = described[k]
                e.name, e.types, e.own = name or default_name(k), types, True
            else:
                e.name, e.description, e.types, e.own = default_name(k), None, (), False

    def records(self) -> list[Any]:
        """The KG as records: a fresh load of them gives its triples, names, types and what has something of its
        own (descriptions and aliases are not in records)."""
        recs: list[Any] = [EntityRecord(k, e.name, e.types, 0) for k, e in sorted(self.entities.items()) if e.own]
        recs += [TripleRecord(h, r, t, 0) for h, r, t in sorted(self.triples)]
        return recs


__all__ = ["Ent", "LivingModel"]
