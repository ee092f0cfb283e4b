"""A change set on its way to the stores: spooled (checked and hashed), then cut into batches.

:func:`spool` writes the operations to a temporary file while it checks each one by the rules of the JSON Lines
reader (:func:`engine.changes.ops.checked`: a bad one is skipped with its ``file:line``, or its index for an
operation made in Python, or refused with the whole change set when strict) and hashes what they do, so the change
set is known by its content before anything is written.

:func:`batches` cuts the spooled operations into batches of at most ``size``. A batch runs as one transaction whose
statements go kind by kind (merges, entity removals, triple removals, triple adds, entity settings, then the sweep of
entities left without triples), with every key resolved through the KG's aliases once, before the transaction. So a
batch ends early wherever that would differ from running its operations in order: where an operation names a key
whose resolution an earlier operation of the batch changed (a merge moves its source's keys, a removal frees the
aliases of what it removes), where the kinds' order would swap two operations on one entity that do not commute,
and before a merge that follows an entity removal (whose sweep may take an entity the merge names).
The cutter follows the aliases through a batch as its merges and removals may change them (:class:`AliasMap`; a key
they may move ends the batch), and reads them from the KG again after a batch that merged or removed entities (a
merge of an entity that does not exist is skipped, which only the batch's run tells), so the cut is right across
batches and change sets too.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Iterable, Iterator, Mapping

from engine._errors import MalformedInputError
from engine.stores.aliases import AliasMap

from .ops import AddTriple, MergeEntity, Op, RemoveEntity, RemoveTriple, SetEntity, checked, identity, op_from_json, \
    op_to_json

# the order in which a batch's statements run
MERGE, REMOVE_ENTITY, REMOVE, ADD, SET = range(5)
KIND_ORDER: dict[type[Any], int] = {MergeEntity: MERGE, RemoveEntity: REMOVE_ENTITY, RemoveTriple: REMOVE,
                                    AddTriple: ADD, SetEntity: SET}


def spool(ops: Iterable[Any], out: Any, on_bad: Callable[[MalformedInputError], None]) -> tuple[str, int]:
    """Write the good operations of ``ops`` to ``out`` (one JSON line each, with line and path) and hash what they
    do; a bad one goes to ``on_bad`` (which raises to refuse the change set). Returns (hash, operations written)."""
    h = hashlib.blake2b(digest_size=16)
    n = 0
    for index, raw in enumerate(ops, start=1):
        try:
            op = checked(raw, index)
        except MalformedInputError as e:
            on_bad(e)
            continue
        h.update(json.dumps(identity(op), ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
        out.write(json.dumps([op_to_json(op), op.line, op.path], ensure_ascii=False) + "\n")
        n += 1
    return h.hexdigest(), n


#: the triple operations by their spooled ``op`` name: made again without the checks, which they passed when spooled
_SPOOLED_TRIPLES: dict[str, type[AddTriple] | type[RemoveTriple]] = {"add": AddTriple, "remove": RemoveTriple}


def unspool(path: str) -> Iterator[Op]:
    """The operations :func:`spool` wrote, in order."""
    with open(path, encoding="utf-8") as f:
        for text in f:
            obj, line, src = json.loads(text)
            kind = _SPOOLED_TRIPLES.get(obj["op"])
            if kind is not None:
                yield kind(obj["head"], obj["relation"], obj["tail"], line=line, path=src)
            else:
                yield op_from_json(obj, line=line, path=src)


def op_keys(op: Op) -> tuple[str, ...]:
    """The entity keys an operation names."""
    if isinstance(op, (AddTriple, RemoveTriple)):
        return (op.head, op.tail)
    if isinstance(op, MergeEntity):
        return (op.source, op.target)
    return (op.key,)


class Cutter:
    """Decides where a batch must end (see the module docstring)."""

    def __init__(self, aliases: Mapping[str, str] | None = None) -> None:
        self.aliases = AliasMap(aliases)  # the KG's aliases, then as this change set's operations change them
        self.reset()

    def reset(self) -> None:
        self.by_class: list[set[str]] = [set() for _ in range(5)]  # resolved keys touched per kind
        self.added: set[tuple[str, str, str]] = set()
        self.moved: set[str] = set()  # keys that resolve elsewhere since the batch began

    def _resolved(self, op: Op) -> list[str]:
        return [self.aliases.resolve(k) for k in op_keys(op)]

    def conflicts(self, op: Op) -> bool:
        """Whether ``op`` must start a new batch."""
        if any(k in self.moved for k in op_keys(op)):
            return True  # the statements resolved this key before the batch: it means another entity by now
        keys = self._resolved(op)
        c = KIND_ORDER[type(op)]
        if c == MERGE:
            # (an entity removal may take entities its triples joined with it: the merge could name one)
            return bool(self.by_class[REMOVE_ENTITY]) or any(k in s for s in self.by_class for k in keys)
        if c == REMOVE_ENTITY:
            return any(k in s for s in self.by_class[REMOVE_ENTITY:] for k in keys)
        if c == REMOVE:
            assert isinstance(op, RemoveTriple)
            return (keys[0], op.relation, keys[1]) in self.added
        if c == SET:
            return any(k in self.by_class[SET] for k in keys)
        return False

    def take(self, op: Op) -> None:
        """``op`` joins the batch."""
        keys = self._resolved(op)
        self.by_class[KIND_ORDER[type(op)]].update(keys)
        if isinstance(op, AddTriple):
            self.added.add((keys[0], op.relation, keys[1]))
        elif isinstance(op, MergeEntity):
            self.moved |= self.aliases.merge(keys[0], keys[1])
        elif isinstance(op, RemoveEntity):
            self.moved |= self.aliases.remove(keys[0])


def batches(ops: Iterable[Op], size: int,
            aliases: Mapping[str, str] | Callable[[], Mapping[str, str]] | None = None) -> Iterator[list[Op]]:
    """Batches of at most ``size`` operations, cut where running a batch by kind would differ from running it in
    order. ``aliases``: the KG's aliases (key -> the key it resolves to), or a function that reads them, called
    before the first batch and again after each batch that merged or removed entities (the generator goes on once
    its caller has written that batch: whether a merge was applied is known only then)."""
    read: Callable[[], Mapping[str, str]] = aliases if callable(aliases) else (lambda: aliases or {})
    cut = Cutter(read())
    batch: list[Op] = []
    for op in ops:
        if batch and (len(batch) >= size or cut.conflicts(op)):
            yield batch
            if any(isinstance(o, (MergeEntity, RemoveEntity)) for o in batch):
                cut = Cutter(read())  # the aliases as the batch left them
            else:
                cut.reset()
            batch = []
        cut.take(op)
        batch.append(op)
    if batch:
        yield batch


__all__ = ["spool", "unspool", "op_keys", "Cutter", "batches", "KIND_ORDER"]
