"""Key aliases: the key of an entity merged into another resolves to that other entity from then on.

A merge (``{"op": "merge", "source": A, "target": B}``) removes A and keeps A's *key* as an alias of B: later change
sets, loads and syncs that name A mean B. The rules, which every writer follows:

* An alias resolves to an entity's own key in one hop: merging B into C repoints B's aliases to C, and the alias
  made for B is B's own key (whatever key the merge operation named B by).
* An alias leaves with the entity it resolves to: removing B deletes B's aliases, and A is a key of its own again
  (a later ``add A r Z`` makes a new entity A). So an alias never names an entity that does not exist, and an
  entity's id is always its own key's (:func:`engine.stores.graph.entity_id`).
* An entity that has aliases stays when its last triple goes (the aliases are something of its own).

:func:`resolve_keys` is the one function that resolves keys to their final entity (``cypher/aliases_resolve.cypher``);
:func:`kg_aliases` reads every alias of a KG; :class:`AliasMap` follows the aliases in memory while a change set's
merges and removals change them (the batch cutter of :mod:`engine.changes.batching`). *Name* aliases (alternate
labels of an entity, searched by name) are another thing; these are aliases of keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping

from engine.stores.graph import entity_id

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import CypherReader


@dataclass(frozen=True, slots=True)
class Resolved:
    """The entity a key resolves to: its eid and its own key (the key itself unless the key is an alias)."""

    eid: int
    key: str


def resolve_keys(graph: CypherReader, keys: Iterable[str], *, has_aliases: bool | None = None) -> dict[str, Resolved]:
    """key -> the entity it resolves to, through the KG's aliases (one read of the keys that may be aliases; none
    when ``has_aliases`` is False: the caller knows the KG has none)."""
    out = {k: Resolved(entity_id(graph.kg, k), k) for k in keys}
    if out and has_aliases is not False:
        rows = graph.read_named("aliases_resolve", eids=sorted({r.eid for r in out.values()}))
        if rows:
            target = {r["aid"]: Resolved(int(r["target"]), str(r["key"])) for r in rows}
            out = {k: target.get(r.eid, r) for k, r in out.items()}
    return out


def has_aliases(graph: CypherReader) -> bool:
    """Whether the KG has any key alias (one small read)."""
    return bool(graph.read_named("kg_has_aliases", kg=graph.kg))


def kg_aliases(graph: CypherReader) -> dict[str, str]:
    """Every alias of the KG: alias key -> the key of the entity it resolves to (held in memory: a KG has one per
    merged key)."""
    return {r["alias"]: r["target"] for r in graph.read_named("kg_aliases", kg=graph.kg)}


class AliasMap:
    """The aliases of a KG in memory, followed through merges and removals as the rules above say (keys only: what
    a change set's operations name)."""

    def __init__(self, aliases: Mapping[str, str] | None = None) -> None:
        self._target: dict[str, str] = {}
        self._of: dict[str, set[str]] = {}  # target key -> its alias keys
        for alias, target in (aliases or {}).items():
            self._target[alias] = target
            self._of.setdefault(target, set()).add(alias)

    def __len__(self) -> int:
        return len(self._target)

    def as_dict(self) -> dict[str, str]:
        return dict(self._target)

    def resolve(self, key: str) -> str:
        """The key of the entity ``key`` resolves to."""
        return self._target.get(key, key)

    def targets(self) -> set[str]:
        """The keys of the entities that have aliases."""
        return set(self._of)

    def merge(self, source: str, target: str) -> set[str]:
        """Entity ``source`` merged into entity ``target`` (both resolved keys): returns the keys that resolve
        elsewhere now (``source`` and its aliases)."""
        if source == target:
            return set()
        moved = self._of.pop(source, set()) | {source}
        for key in moved:
            self._target[key] = target
        self._of.setdefault(target, set()).update(moved)
        return moved

    def remove(self, key: str) -> set[str]:
        """Entity ``key`` (a resolved key) removed: its aliases are keys of their own again; returns them."""
        freed = self._of.pop(key, set())
        for alias in freed:
            del self._target[alias]
        return freed


__all__ = ["Resolved", "resolve_keys", "has_aliases", "kg_aliases", "AliasMap"]
