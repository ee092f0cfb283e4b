"""The operations of a change set, and readers that make them from files.

An operation names entities by their source *key* (as :class:`loaders.TripleRecord` does) and relations by their
original name:

``AddTriple(head, relation, tail)``      add the edge (and its entities when missing)
``RemoveTriple(head, relation, tail)``   remove the edge; its entities stay (remove them with ``RemoveEntity``)
``SetEntity(key, name, description, types, aliases, remove_aliases)``
                                         set what is not ``None``: the display name, a description (both are the
                                         text the entity's vector is embedded from), the types (they replace the
                                         entity's types, or are added to them when ``add_types`` is true), the
                                         aliases (other names, each embedded like a name: they replace the
                                         entity's, or are added when ``add_aliases`` is true) and aliases to
                                         remove; the entity has something of its own from then on (it stays
                                         without triples).
                                         ``reset=True`` (nothing else given) makes it what an added triple makes an
                                         entity: its key's default name, no description, no types, nothing of its
                                         own (what a sync writes for an entity its file names in triples only)
``RemoveEntity(key)``                    remove the entity with its triples
``MergeEntity(source, target)``          ``target`` takes the triples and types of ``source``; ``source`` is removed
                                         and its key is kept as an alias that later loads and changes resolve to
                                         ``target`` (:mod:`engine.stores.aliases` says how aliases behave)

An entity that only triples brought in (no name, description, types or aliases of its own) leaves with its last
triple, as it would be absent from a fresh load of the triples that remain.

``line`` (and ``path``) say where an operation comes from, for messages (``file:line: reason``); they are not part
of what the operation does, so two change sets with the same operations in the same order are the same change set.

JSON Lines (:func:`read_changes`), one object per line, ``op`` first::

    {"op": "add", "head": "Alien", "relation": "directed_by", "tail": "Ridley Scott"}
    {"op": "remove", "head": "Alien", "relation": "release_year", "tail": "1978"}
    {"op": "set", "key": "Ridley Scott", "name": "Sir Ridley Scott", "description": "...", "types": ["person"]}
    {"op": "set", "key": "IBM", "add_aliases": ["Big Blue"], "remove_aliases": ["I.B.M."]}
    {"op": "remove_entity", "key": "Prometheus"}
    {"op": "merge", "source": "R. Scott", "target": "Ridley Scott"}

Two triple files in any format ``isorag load`` reads (:func:`read_triple_files`): the removes first, then the adds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Union

from engine._errors import ConfigError, MalformedInputError


@dataclass(frozen=True, slots=True)
class AddTriple:
    """Add the edge ``head -relation-> tail`` (keys; the relation's original name)."""

    head: str
    relation: str
    tail: str
    line: int = 0
    path: str = ""


@dataclass(frozen=True, slots=True)
class RemoveTriple:
    """Remove the edge ``head -relation-> tail``; an error (skipped unless strict) when it is not in the KG."""

    head: str
    relation: str
    tail: str
    line: int = 0
    path: str = ""


@dataclass(frozen=True, slots=True)
class SetEntity:
    """Set the entity's display name, description and/or types (``None``: left as it is)."""

    key: str
    name: str | None = None
    description: str | None = None
    types: tuple[str, ...] | None = None
    line: int = 0
    path: str = ""
    add_types: bool = False  # True: ``types`` are added to the entity's types instead of replacing them
    aliases: tuple[str, ...] | None = None  # the entity's other names (replacing its aliases unless add_aliases)
    add_aliases: bool = False
    remove_aliases: tuple[str, ...] | None = None  # aliases the entity no longer has
    reset: bool = False  # True: the entity becomes bare (default name, nothing of its own); nothing else is given


@dataclass(frozen=True, slots=True)
class RemoveEntity:
    """Remove the entity and every triple it is in."""

    key: str
    line: int = 0
    path: str = ""


@dataclass(frozen=True, slots=True)
class MergeEntity:
    """Merge ``source`` into ``target``: ``target`` takes its triples and types, ``source``'s key becomes an alias."""

    source: str
    target: str
    line: int = 0
    path: str = ""


Op = Union[AddTriple, RemoveTriple, SetEntity, RemoveEntity, MergeEntity]
_KINDS = (AddTriple, RemoveTriple, SetEntity, RemoveEntity, MergeEntity)

#: JSON ``op`` values and the operation each makes (a few spellings each)
OP_NAMES: dict[str, type[Any]] = {
    "add": AddTriple, "add_triple": AddTriple,
    "remove": RemoveTriple, "remove_triple": RemoveTriple, "delete": RemoveTriple,
    "set": SetEntity, "set_entity": SetEntity, "rename": SetEntity,
    "remove_entity": RemoveEntity, "delete_entity": RemoveEntity,
    "merge": MergeEntity, "merge_entity": MergeEntity,
}
_FIELDS: dict[type[Any], tuple[str, ...]] = {
    AddTriple: ("head", "relation", "tail"),
    RemoveTriple: ("head", "relation", "tail"),
    SetEntity: ("key",),
    RemoveEntity: ("key",),
    MergeEntity: ("source", "target"),
}
_SET_FIELDS = ("name", "description", "types", "aliases", "add_aliases", "remove_aliases")


def where(op: Op) -> str:
    """``file:line`` of an operation (or what is known of it), for messages."""
    if op.path and op.line:
        return f"{op.path}:{op.line}"
    return op.path or (f"line {op.line}" if op.line else "<changes>")


def identity(op: Op) -> tuple[Any, ...]:
    """What an operation does, without where it comes from (the change set's hash is made of these)."""
    if isinstance(op, (AddTriple, RemoveTriple)):
        return (type(op).__name__, op.head, op.relation, op.tail)
    if isinstance(op, SetEntity):
        aliased = op.aliases is not None or op.remove_aliases is not None
        return (("SetEntity", op.key, op.name, op.description, op.types, op.add_types) + (("reset",) * op.reset)
                + ((op.aliases, op.add_aliases, op.remove_aliases) if aliased else ()))
    if isinstance(op, RemoveEntity):
        return ("RemoveEntity", op.key)
    return ("MergeEntity", op.source, op.target)


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return json.dumps(value)
    return None


def op_from_json(obj: Any, *, line: int = 0, path: str = "") -> Op:
    """One JSON object as an operation; raises :class:`MalformedInputError` (``path:line: reason``) when it is not
    one."""
    def bad(reason: str) -> MalformedInputError:
        return MalformedInputError(path or "<changes>", line, reason)

    if not isinstance(obj, dict):
        raise bad(f"not a JSON object: got {type(obj).__name__}")
    name = obj.get("op")
    kind = OP_NAMES.get(name) if isinstance(name, str) else None
    if kind is None:
        raise bad(f"unknown op {name!r}; known: add, remove, set, remove_entity, merge")
    fields = _FIELDS[kind]
    missing = [f for f in fields if f not in obj]
    if missing:
        raise bad(f"op {name!r}: missing key: {', '.join(missing)}")
    vals = {f: _text(obj[f]) for f in fields}
    wrong = [f for f, v in vals.items() if v is None]
    if wrong:
        raise bad(f"op {name!r}: not a non-empty string: " + ", ".join(f"{f}={obj[f]!r}" for f in wrong))
    if kind is SetEntity:
        return _set_entity(obj, str(vals["key"]), line, path, bad)
    if kind is MergeEntity and vals["source"] == vals["target"]:
        raise bad(f"op 'merge': an entity cannot be merged into itself ({vals['source']!r})")
    return kind(*vals.values(), line=line, path=path)


def _set_entity(obj: dict[str, Any], key: str, line: int, path: str,
                bad: Callable[[str], MalformedInputError]) -> SetEntity:
    reset = obj.get("reset", False)
    if not isinstance(reset, bool):
        raise bad(f"op 'set': reset must be true or false, got {reset!r}")
    if reset:
        given = [f for f in (*_SET_FIELDS, "add_types") if obj.get(f) not in (None, False)]
        if given:
            raise bad(f"op 'set': reset makes the entity bare; it takes no {', '.join(given)}")
        return SetEntity(key, line=line, path=path, reset=True)
    if not any(f in obj for f in _SET_FIELDS):
        raise bad("op 'set': nothing to set (give name, description, types and/or aliases, or reset)")
    name = description = None
    if obj.get("name") is not None:
        name = _text(obj["name"])
        if name is None:
            raise bad(f"op 'set': name must be a non-empty string, got {obj['name']!r}")
    if obj.get("description") is not None:
        if not isinstance(obj["description"], str):
            raise bad(f"op 'set': description must be a string, got {obj['description']!r}")
        description = obj["description"].strip()
    types: tuple[str, ...] | None = None
    if obj.get("types") is not None:
        raw = obj["types"]
        if isinstance(raw, str):
            raw = [raw]
        if not isinstance(raw, list) or not all(isinstance(t, str) and t.strip() for t in raw):
            raise bad(f"op 'set': types must be a list of non-empty strings, got {obj['types']!r}")
        types = tuple(dict.fromkeys(t.strip() for t in raw))
    add_types = obj.get("add_types", False)
    if not isinstance(add_types, bool):
        raise bad(f"op 'set': add_types must be true or false, got {add_types!r}")
    lists = {f: _names(obj, f, bad) for f in ("aliases", "add_aliases", "remove_aliases")}
    if lists["aliases"] is not None and lists["add_aliases"] is not None:
        raise bad("op 'set': give aliases (to replace them) or add_aliases (to add to them), not both")
    aliases = lists["aliases"] if lists["aliases"] is not None else lists["add_aliases"]
    return SetEntity(key, name, description, types, line=line, path=path, add_types=add_types, aliases=aliases,
                     add_aliases=lists["add_aliases"] is not None, remove_aliases=lists["remove_aliases"])


def _names(obj: dict[str, Any], field: str, bad: Callable[[str], MalformedInputError]) -> tuple[str, ...] | None:
    """A list of names (one string is a list of one), or None when the field is absent."""
    raw = obj.get(field)
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not all(isinstance(t, str) and t.strip() for t in raw):
        raise bad(f"op 'set': {field} must be a list of non-empty strings, got {raw!r}")
    return tuple(dict.fromkeys(t.strip() for t in raw))


def op_to_json(op: Op) -> dict[str, Any]:
    """The JSON Lines object of an operation (:func:`op_from_json` reads it back)."""
    if isinstance(op, (AddTriple, RemoveTriple)):
        return {"op": "add" if isinstance(op, AddTriple) else "remove",
                "head": op.head, "relation": op.relation, "tail": op.tail}
    if isinstance(op, SetEntity):
        out: dict[str, Any] = {"op": "set", "key": op.key}
        if op.name is not None:
            out["name"] = op.name
        if op.description is not None:
            out["description"] = op.description
        if op.types is not None:
            out["types"] = list(op.types)
        if op.add_types:
            out["add_types"] = True
        if op.aliases is not None:
            out["add_aliases" if op.add_aliases else "aliases"] = list(op.aliases)
        if op.remove_aliases is not None:
            out["remove_aliases"] = list(op.remove_aliases)
        if op.reset:
            out["reset"] = True
        return out
    if isinstance(op, RemoveEntity):
        return {"op": "remove_entity", "key": op.key}
    return {"op": "merge", "source": op.source, "target": op.target}


_TRIPLE_KINDS: tuple[type[AddTriple], type[RemoveTriple]] = (AddTriple, RemoveTriple)


def _clean(value: Any) -> bool:
    """Whether ``value`` is a string that :func:`_text` keeps as it is (non-empty, trimmed)."""
    return type(value) is str and bool(value) and value == value.strip()


def checked(op: Any, index: int) -> Op:
    """``op`` as the JSON Lines reader would give it: its fields checked and trimmed by the same rules, or a
    :class:`MalformedInputError` at ``file:line`` (an operation made in Python: ``<changes>:index``, 1-based)."""
    if not isinstance(op, _KINDS):
        raise MalformedInputError("<changes>", index, f"not a change-set operation: {op!r}")
    line, path = op.line or index, op.path
    if isinstance(op, _TRIPLE_KINDS) and _clean(op.head) and _clean(op.relation) and _clean(op.tail):
        # what the round trip below gives a triple whose fields are trimmed, non-empty strings (the most common
        # operation by far: a million of them spent seconds on it)
        return op if op.line else type(op)(op.head, op.relation, op.tail, line=line, path=path)
    try:
        obj = op_to_json(op)
    except (TypeError, ValueError) as e:
        raise MalformedInputError(path or "<changes>", line, f"op {type(op).__name__}: {e}") from None
    return op_from_json(obj, line=line, path=path)


def read_changes(path: str | Path, *, strict: bool = False,
                 on_skip: Callable[[MalformedInputError], None] | None = None) -> Iterator[Op]:
    """The operations of a JSON Lines change set, read lazily (``.gz`` / ``.bz2`` too).

    A bad line (invalid JSON, unknown op, missing or empty field, a merge into itself) is a
    :class:`MalformedInputError` ``file:line: reason``: raised with ``strict=True``, else passed to ``on_skip`` (or
    logged) and skipped, as the loaders do. A missing file raises :class:`~engine._errors.InputError` at once.
    """
    from loaders._parsers import Reporter

    p = Path(path)
    if not p.is_file():
        from engine._errors import InputError

        raise InputError(f"{p}: no such file")
    return _read_changes(p, Reporter(p, bool(strict), on_skip))


def _read_changes(p: Path, rep: Any) -> Iterator[Op]:
    from loaders._parsers import iter_json_lines

    shown = str(p)
    for n, obj in iter_json_lines(p, rep):
        try:
            yield op_from_json(obj, line=n, path=shown)
        except MalformedInputError as e:
            rep.error(n, e.reason)
    rep.finish()


def read_triple_files(add: str | Path | None = None, remove: str | Path | None = None, fmt: str | None = None, *,
                      strict: bool = False, on_skip: Callable[[MalformedInputError], None] | None = None,
                      **options: Any) -> Iterator[Op]:
    """A change set from two triple files in any format ``isorag load`` reads (:func:`loaders.open_source`; the
    format of each is detected unless ``fmt`` is given): every triple of ``remove`` as a :class:`RemoveTriple`, then
    every triple of ``add`` as an :class:`AddTriple`. Entity records of ``add`` (names, types) become
    :class:`SetEntity` operations that add their types; those of ``remove`` are ignored. Both files are checked
    (options, existence) now and read lazily."""
    from loaders import open_source

    if add is None and remove is None:
        raise ConfigError("read_triple_files: give add=FILE and/or remove=FILE")
    sources = []
    for path, adding in ((remove, False), (add, True)):
        if path is not None:
            recs = open_source(path, fmt, strict=strict, on_skip=on_skip, **options)
            sources.append((str(path), adding, recs))
    return _triple_ops(sources)


def _triple_ops(sources: list[tuple[str, bool, Iterator[Any]]]) -> Iterator[Op]:
    from loaders import TripleRecord

    for path, adding, recs in sources:
        for rec in recs:
            if isinstance(rec, TripleRecord):
                kind = AddTriple if adding else RemoveTriple
                yield kind(rec.head, rec.relation, rec.tail, line=rec.line, path=path)
            elif adding and (rec.name or rec.types or rec.aliases):
                yield SetEntity(rec.key, name=rec.name or None, types=tuple(rec.types) or None, line=rec.line,
                                path=path, add_types=True, aliases=tuple(rec.aliases) or None, add_aliases=True)


__all__ = [
    "AddTriple", "RemoveTriple", "SetEntity", "RemoveEntity", "MergeEntity", "Op", "OP_NAMES",
    "op_from_json", "op_to_json", "read_changes", "read_triple_files", "identity", "where", "checked",
]
