"""The records every source parser yields.

A parser turns a source file into a stream of :data:`Record` values:

* :class:`TripleRecord` -- one KG edge.  ``head`` and ``tail`` are source *keys* (a name, an IRI, a node id or
  a literal's lexical form: literals are entities too); ``relation`` is the relation's original name
  (for RDF, the predicate's local name).  Direction is as in the source.
* :class:`EntityRecord` -- optional extra information on an entity: a display name, types and/or aliases (other
  names people call it by: labels in other languages, ``skos:altLabel``, an alias column or list).

An entity may be described by several EntityRecords (RDF gives one per ``rdfs:label`` / ``rdf:type``
triple), and an entity may appear only as a key of triples.  Consumers merge: the last non-``None``
name wins, types and aliases are united in order of appearance, and an entity without a name is named by its key's
default name (an IRI's local name, else the key). An entity that an EntityRecord describes has something of its own:
it stays in the KG when a change removes its last triple; one that only triples name leaves with its last triple.

``line`` is the 1-based physical line of the source file the record comes from (for a record that spans
several lines, its first line; for Turtle, the line where the triple's object list ends).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union


@dataclass(frozen=True, slots=True)
class TripleRecord:
    """One edge ``head -relation-> tail``; head and tail are source keys."""

    head: str
    relation: str
    tail: str
    line: int


@dataclass(frozen=True, slots=True)
class EntityRecord:
    """Extra information on the entity with source key ``key``: display name, types and aliases."""

    key: str
    name: str | None
    types: tuple[str, ...]
    line: int
    aliases: tuple[str, ...] = ()


Record = Union[TripleRecord, EntityRecord]

__all__ = ["TripleRecord", "EntityRecord", "Record"]
