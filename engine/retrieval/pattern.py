"""Pattern graphs (SimGRAG's query-to-pattern output): the model, its validation and its JSON Schema.

A pattern is a small multigraph, possibly disconnected, given as triples ``(head, relation, tail)``:

* a **node** is identified by its stripped text. It is *unknown* when the word ``UNKNOWN`` occurs in it (in
  capitals, as a whole word: ``"UNKNOWN actor 1"``, ``"UNKNOWN_film_1"``; ``"The Unknown"`` is a KG name); an
  unknown node carries an optional type hint, the text between ``UNKNOWN`` and a trailing number, lowercased
  (``"UNKNOWN film 1"`` -> ``"film"``, ``"UNKNOWN 2"`` -> ``None``). Any other node is *known* and its text is
  what gets embedded.
* an **edge** has a known relation (the text to embed) or an unknown one (any relation text containing
  ``UNKNOWN``, e.g. ``"UNKNOWN relation 1"``).

Build one with :meth:`Pattern.from_triples`, :meth:`Pattern.from_json` (strict JSON / a mapping) or
:meth:`Pattern.parse` (whatever text an LLM returned: prose, code fences, Python tuples, trailing commas,
single quotes; parsed with ``json`` then ``ast.literal_eval``, never ``eval``; the reader is
:mod:`engine.retrieval.pattern_text`).

Validation errors are :class:`~engine._errors.PatternError`; text that cannot be read as a pattern raises
:class:`~engine._errors.PatternParseError`, which keeps the text. Triples are counted from 1 in messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Union

from engine._errors import PatternError, PatternParseError
from engine.retrieval.pattern_text import MISSING, find_triples, pattern_value

__all__ = [
    "DEFAULT_MAX_EDGES",
    "PATTERN_JSON_SCHEMA",
    "Pattern",
    "PatternEdge",
    "PatternNode",
    "is_unknown_text",
    "pattern_json_schema",
    "unknown_number",
    "unknown_type_hint",
]

DEFAULT_MAX_EDGES = 16

# ---------------------------------------------------------------------------------------------------------
# Unknown detection
# ---------------------------------------------------------------------------------------------------------

# "UNKNOWN" in capitals as a whole word ("_" and "-" count as separators, so "UNKNOWN_film_1" is unknown too).
# Case matters: KG names such as "The Unknown" or "Unknown Pleasures" are known entities.
_UNKNOWN_RE = re.compile(r"(?<![0-9A-Za-z])UNKNOWN(?![0-9A-Za-z])")
_TRAILING_NUMBER_RE = re.compile(r"(\d+)\s*$")
_HINT_JUNK_RE = re.compile(r"[\s_\-:#()\[\]'\"`.,;]+")


def is_unknown_text(text: str) -> bool:
    """True when ``text`` contains the word ``UNKNOWN`` (in capitals, as a whole word)."""
    return _UNKNOWN_RE.search(text) is not None


def _after_unknown(text: str) -> str | None:
    m = _UNKNOWN_RE.search(text)
    return None if m is None else text[m.end():]


def unknown_type_hint(text: str) -> str | None:
    """The type hint of an unknown node's text: ``"UNKNOWN film 1"`` -> ``"film"``; ``None`` when there is none
    (``"UNKNOWN 2"``, ``"UNKNOWN"``) or when ``text`` is not unknown."""
    rest = _after_unknown(text)
    if rest is None:
        return None
    rest = _TRAILING_NUMBER_RE.sub("", _HINT_JUNK_RE.sub(" ", rest).strip())
    hint = " ".join(rest.split()).lower()
    return hint or None


def unknown_number(text: str) -> int | None:
    """The trailing number of an unknown's text (``"UNKNOWN actor 2"`` -> 2), ``None`` without one."""
    rest = _after_unknown(text)
    if rest is None:
        return None
    m = _TRAILING_NUMBER_RE.search(_HINT_JUNK_RE.sub(" ", rest).strip())
    return None if m is None else int(m.group(1))


# ---------------------------------------------------------------------------------------------------------
# Nodes and edges
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PatternNode:
    """A pattern node. ``id`` is the stripped text as written and is unique within its pattern."""

    id: str
    text: str | None  # the text to embed for a known node; None for an unknown node
    type_hint: str | None  # unknown nodes only: "actor" for "UNKNOWN actor 1"; None for "UNKNOWN 1"

    @property
    def known(self) -> bool:
        return self.text is not None

    @classmethod
    def from_text(cls, text: str) -> PatternNode:
        node_id = text.strip()
        if is_unknown_text(node_id):
            return cls(node_id, None, unknown_type_hint(node_id))
        return cls(node_id, node_id, None)


@dataclass(frozen=True, slots=True)
class PatternEdge:
    """A pattern edge ``head -[label]- tail``; direction is as written (the matcher may ignore it)."""

    index: int  # position in Pattern.edges
    head: str  # node id
    relation: str | None  # relation text to embed; None when unknown
    tail: str  # node id
    label: str  # the relation as written (stripped), e.g. "UNKNOWN relation 1" or "directed_by"

    @property
    def known(self) -> bool:
        return self.relation is not None

    @property
    def is_self_loop(self) -> bool:
        return self.head == self.tail

    def other(self, node_id: str) -> str:
        """The end of this edge opposite ``node_id`` (``node_id`` itself for a self-loop)."""
        if node_id == self.head:
            return self.tail
        if node_id == self.tail:
            return self.head
        raise KeyError(f"node {node_id!r} is not an end of edge {self.index}")

    def as_triple(self) -> tuple[str, str, str]:
        return (self.head, self.label, self.tail)


# ---------------------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------------------

_ROLES = ("head", "relation", "tail")


def _describe(value: Any, limit: int = 60) -> str:
    text = repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{type(value).__name__} {text}"


def _check_max_edges(max_edges: int) -> None:
    if isinstance(max_edges, bool) or not isinstance(max_edges, int) or max_edges < 1:
        raise ValueError(f"max_edges must be a positive int, got {max_edges!r}")


def _validate_triples(triples: Any, max_edges: int) -> list[tuple[str, str, str]]:
    """Check ``triples`` and return them stripped. Raises PatternError saying what is wrong and where."""
    _check_max_edges(max_edges)
    if isinstance(triples, (str, bytes, Mapping)) or not isinstance(triples, Iterable):
        raise PatternError(
            f"triples must be a list of [head, relation, tail], got {_describe(triples)}"
        )
    out: list[tuple[str, str, str]] = []
    for number, triple in enumerate(triples, start=1):
        if len(out) >= max_edges:
            # count the rest only if cheap; never iterate an unbounded iterable
            total = len(triples) if isinstance(triples, Sequence) else f"more than {max_edges}"
            raise PatternError(
                f"pattern has {total} triples, more than max_edges={max_edges}"
            )
        if isinstance(triple, (str, bytes, Mapping)) or not isinstance(triple, Sequence):
            raise PatternError(
                f"triple {number}: expected [head, relation, tail], got {_describe(triple)}"
            )
        if len(triple) != 3:
            raise PatternError(
                f"triple {number}: expected [head, relation, tail], got {len(triple)} items"
            )
        parts: list[str] = []
        for role, value in zip(_ROLES, triple):
            if not isinstance(value, str):
                raise PatternError(
                    f"triple {number}: {role} must be a string, got {_describe(value)}"
                )
            value = value.strip()
            if not value:
                raise PatternError(f"triple {number}: {role} is empty")
            parts.append(value)
        out.append((parts[0], parts[1], parts[2]))
    if not out:
        raise PatternError("pattern is empty: no triples")
    return out


# ---------------------------------------------------------------------------------------------------------
# Pattern
# ---------------------------------------------------------------------------------------------------------


class Pattern:
    """An immutable pattern multigraph.

    ``nodes`` maps node id -> :class:`PatternNode` in order of first appearance (head before tail);
    ``edges`` are the triples in the order given; ``edge_origin[i]`` is the index of ``edges[i]`` in the
    original pattern, the one built from triples (the identity for that pattern; see :meth:`components`).

    Two patterns are equal when they have the same triples in the same order (as written, stripped);
    ``edge_origin`` is not compared.
    """

    __slots__ = ("_nodes", "_edges", "_edge_origin", "_key", "_hash", "_incidence")

    _nodes: Mapping[str, PatternNode]
    _edges: tuple[PatternEdge, ...]
    _edge_origin: tuple[int, ...]
    _key: tuple[tuple[str, str, str], ...]
    _hash: int
    _incidence: Mapping[str, tuple[int, ...]]

    def __init__(
        self, triples: Iterable[Sequence[str]], *, max_edges: int = DEFAULT_MAX_EDGES
    ) -> None:
        self._setup(_validate_triples(triples, max_edges), None)

    def _setup(
        self, triples: Sequence[tuple[str, str, str]], origin: Sequence[int] | None
    ) -> None:
        nodes: dict[str, PatternNode] = {}
        incidence: dict[str, list[int]] = {}
        edges: list[PatternEdge] = []
        for index, (head, label, tail) in enumerate(triples):
            for node_id in (head, tail):
                if node_id not in nodes:
                    nodes[node_id] = PatternNode.from_text(node_id)
                    incidence[node_id] = []
            incidence[head].append(index)
            if tail != head:
                incidence[tail].append(index)
            relation = None if is_unknown_text(label) else label
            edges.append(PatternEdge(index, head, relation, tail, label))
        self._nodes = MappingProxyType(nodes)
        self._edges = tuple(edges)
        self._edge_origin = tuple(range(len(edges))) if origin is None else tuple(origin)
        self._key = tuple(e.as_triple() for e in edges)
        self._hash = hash(self._key)
        self._incidence = MappingProxyType({k: tuple(v) for k, v in incidence.items()})

    @classmethod
    def _derived(
        cls, triples: Sequence[tuple[str, str, str]], origin: Sequence[int]
    ) -> Pattern:
        self = cls.__new__(cls)
        self._setup(triples, origin)
        return self

    # -- construction ------------------------------------------------------------------------------------

    @classmethod
    def from_triples(
        cls, triples: Iterable[Sequence[str]], *, max_edges: int = DEFAULT_MAX_EDGES
    ) -> Pattern:
        """A pattern from ``[(head, relation, tail), ...]``. Raises PatternError when invalid."""
        return cls(triples, max_edges=max_edges)

    @classmethod
    def from_json(
        cls, obj: str | bytes | Mapping[str, Any], *, max_edges: int = DEFAULT_MAX_EDGES
    ) -> Pattern:
        """A pattern from ``{"triples": [[h, r, t], ...]}`` (or SimGRAG's ``"graph"`` key), given as a mapping
        or as strict JSON text. Other keys (e.g. ``"divided"``) are ignored.

        Raises PatternParseError (keeping the text) for text that is not JSON or not a pattern object,
        PatternError for a mapping that is not a valid pattern.
        """
        if isinstance(obj, (str, bytes, bytearray)):
            text = obj.decode("utf-8", "replace") if isinstance(obj, (bytes, bytearray)) else obj
            try:
                loaded = json.loads(text)
            except (ValueError, RecursionError) as e:
                raise PatternParseError(f"pattern JSON is not valid: {e}", text) from e
            try:
                return cls._from_loaded(loaded, max_edges)
            except PatternParseError:
                raise
            except PatternError as e:
                raise PatternParseError(str(e), text) from e
        return cls._from_loaded(obj, max_edges)

    @classmethod
    def _from_loaded(cls, loaded: Any, max_edges: int) -> Pattern:
        if not isinstance(loaded, Mapping):
            raise PatternError(
                'a pattern must be an object {"triples": [[head, relation, tail], ...]}, '
                f"got {_describe(loaded)}"
            )
        value = pattern_value(loaded)
        if value is MISSING:
            keys = [k for k in loaded.keys()][:10]
            raise PatternError(f"pattern object has no 'triples' or 'graph' key (keys: {keys!r})")
        return cls(value, max_edges=max_edges)

    @classmethod
    def parse(cls, text: str, *, max_edges: int = DEFAULT_MAX_EDGES) -> Pattern:
        """A pattern from the text an LLM returned.

        Finds the first balanced ``{...}`` that is (as JSON or as a Python literal) an object with a
        ``"triples"`` or ``"graph"`` key, and validates its value. Tolerates prose before and after, code
        fences, Python tuples, single quotes, trailing commas, ``true``/``null`` and typographic quotes.
        As a last resort, a bare list of triples ``[("h", "r", "t"), ...]`` is accepted.
        Never evaluates code. Raises PatternParseError (with the text) when there is no valid pattern.
        """
        if not isinstance(text, str):
            raise PatternParseError(
                f"expected the LLM's text (str), got {type(text).__name__}", repr(text)[:2000]
            )
        _check_max_edges(max_edges)
        triples = find_triples(text)
        try:
            return cls(triples, max_edges=max_edges)
        except PatternError as e:
            raise PatternParseError(str(e), text) from e

    # -- export ------------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, list[list[str]]]:
        """``{"triples": [[head, relation, tail], ...]}`` as written; round-trips through from_json."""
        return {"triples": [list(t) for t in self._key]}

    @property
    def triples(self) -> tuple[tuple[str, str, str], ...]:
        """The triples ``(head, relation label, tail)`` as written (stripped)."""
        return self._key

    # -- structure -------------------------------------------------------------------------------------

    @property
    def nodes(self) -> Mapping[str, PatternNode]:
        return self._nodes

    @property
    def edges(self) -> tuple[PatternEdge, ...]:
        return self._edges

    @property
    def edge_origin(self) -> tuple[int, ...]:
        return self._edge_origin

    @property
    def known_nodes(self) -> list[PatternNode]:
        return [n for n in self._nodes.values() if n.known]

    @property
    def unknown_nodes(self) -> list[PatternNode]:
        return [n for n in self._nodes.values() if not n.known]

    @property
    def known_relations(self) -> list[str]:
        """The distinct known relation texts, in order of first appearance."""
        return list(dict.fromkeys(e.relation for e in self._edges if e.relation is not None))

    def _incident(self, node_id: str) -> tuple[int, ...]:
        try:
            return self._incidence[node_id]
        except KeyError:
            raise KeyError(f"no node {node_id!r} in the pattern") from None

    def degree(self, node_id: str) -> int:
        """The number of edges incident to ``node_id`` (a self-loop counts once, as in :meth:`neighbors`)."""
        return len(self._incident(node_id))

    def neighbors(self, node_id: str) -> list[tuple[PatternEdge, str]]:
        """``(edge, other end)`` for each incident edge in edge order, direction ignored; a self-loop is
        listed once, with ``node_id`` as its other end."""
        return [(self._edges[i], self._edges[i].other(node_id)) for i in self._incident(node_id)]

    def components(self) -> list[Pattern]:
        """The connected components (direction ignored), ordered by their first edge. Each keeps the node
        ids; its edges are renumbered from 0 and ``edge_origin`` maps them back to this pattern's
        origin indices (so components of components still point at the original pattern)."""
        parent: dict[str, str] = {n: n for n in self._nodes}

        def find(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for e in self._edges:
            a, b = find(e.head), find(e.tail)
            if a != b:
                parent[b] = a
        groups: dict[str, list[int]] = {}
        for e in self._edges:
            groups.setdefault(find(e.head), []).append(e.index)
        if len(groups) == 1:
            return [self]
        return [
            Pattern._derived(
                [self._key[i] for i in indices], [self._edge_origin[i] for i in indices]
            )
            for indices in groups.values()
        ]

    def is_connected(self) -> bool:
        return len(self.components()) == 1

    def is_all_unknown(self) -> bool:
        """True when no *node* is known (relations may still be known): nothing anchors a vector search
        for nodes, unless type hints are used (see :meth:`has_typed_unknown`)."""
        return all(not n.known for n in self._nodes.values())

    def has_typed_unknown(self) -> bool:
        """True when some unknown node has a type hint (``"UNKNOWN person 1"``)."""
        return any(n.type_hint is not None for n in self._nodes.values() if not n.known)

    def answer_node(self) -> str | None:
        """The unknown node to report as the answer target: the one with the highest UNKNOWN number,
        ties (and numberless unknowns, counted as 0) going to the one introduced last; None if no node
        is unknown."""
        best: tuple[int, int] | None = None
        best_id: str | None = None
        for position, node in enumerate(self._nodes.values()):
            if node.known:
                continue
            key = (unknown_number(node.id) or 0, position)
            if best is None or key > best:
                best, best_id = key, node.id
        return best_id

    def deduplicated(self) -> Pattern:
        """This pattern without exactly repeated triples (first occurrence kept; ``edge_origin`` kept).
        A repeated triple otherwise asks for two distinct KG edges between the same nodes."""
        seen: dict[tuple[str, str, str], int] = {}
        for i, t in enumerate(self._key):
            seen.setdefault(t, i)
        if len(seen) == len(self._key):
            return self
        keep = sorted(seen.values())
        return Pattern._derived([self._key[i] for i in keep], [self._edge_origin[i] for i in keep])

    # -- dunder ----------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._edges)

    def __iter__(self) -> Iterator[PatternEdge]:
        return iter(self._edges)

    def __getitem__(self, index: int) -> PatternEdge:
        return self._edges[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Pattern):
            return NotImplemented
        return self._hash == other._hash and self._key == other._key

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        def short(s: str) -> str:
            return s if len(s) <= 40 else s[:37] + "..."

        parts = [f"({short(h)})-[{short(r)}]->({short(t)})" for h, r, t in self._key[:4]]
        if len(self._key) > 4:
            parts.append(f"... +{len(self._key) - 4} more")
        return f"Pattern[{'; '.join(parts)}]"


#: what the API takes as a pattern: a :class:`Pattern`, a ``{"triples": [[h, r, t], ...]}`` mapping, its JSON text
#: or a list of triples (:func:`engine.retrieval.retriever.as_pattern`)
PatternLike = Union[Pattern, Mapping[str, Any], str, Sequence[Sequence[str]]]


# ---------------------------------------------------------------------------------------------------------
# JSON Schema (for LLM structured output)
# ---------------------------------------------------------------------------------------------------------


def pattern_json_schema(
    max_edges: int = DEFAULT_MAX_EDGES, *, with_divided: bool = False
) -> dict[str, Any]:
    """A JSON Schema for ``{"triples": [[head, relation, tail], ...]}``; with ``with_divided`` it also asks
    for SimGRAG's ``"divided"`` segments first (both keys required, as strict structured-output modes want).
    Uses only widely supported keywords (no ``prefixItems``)."""
    _check_max_edges(max_edges)
    triple = {
        "type": "array",
        "description": "[head, relation, tail]; use 'UNKNOWN <type> <n>' / 'UNKNOWN relation <n>' for unknowns",
        "items": {"type": "string", "minLength": 1},
        "minItems": 3,
        "maxItems": 3,
    }
    properties: dict[str, Any] = {}
    if with_divided:
        properties["divided"] = {"type": "array", "items": {"type": "string"}}
    properties["triples"] = {
        "type": "array",
        "items": triple,
        "minItems": 1,
        "maxItems": max_edges,
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Pattern",
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


PATTERN_JSON_SCHEMA: dict[str, Any] = pattern_json_schema()
