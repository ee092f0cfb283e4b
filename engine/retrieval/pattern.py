"""Pattern graphs (SimGRAG's query-to-pattern output) and their robust parsing.

A pattern is a small multigraph, possibly disconnected, given as triples ``(head, relation, tail)``:

* a **node** is identified by its stripped text. It is *unknown* when the word ``UNKNOWN`` occurs in it
  (case-insensitive, as a whole word: ``"UNKNOWN actor 1"``, ``"unknown 2"``, ``"UNKNOWN_film_1"``); an unknown
  node carries an optional type hint, the text between ``UNKNOWN`` and a trailing number, lowercased
  (``"UNKNOWN film 1"`` -> ``"film"``, ``"UNKNOWN 2"`` -> ``None``). Any other node is *known* and its text is
  what gets embedded.
* an **edge** has a known relation (the text to embed) or an unknown one (any relation text containing
  ``UNKNOWN``, e.g. ``"UNKNOWN relation 1"``).

Build one with :meth:`Pattern.from_triples`, :meth:`Pattern.from_json` (strict JSON / a mapping) or
:meth:`Pattern.parse` (whatever text an LLM returned: prose, code fences, Python tuples, trailing commas,
single quotes; parsed with ``json`` then ``ast.literal_eval``, never ``eval``).

Validation errors are :class:`~engine._errors.PatternError`; text that cannot be read as a pattern raises
:class:`~engine._errors.PatternParseError`, which keeps the text. Triples are counted from 1 in messages.
"""

from __future__ import annotations

import ast
import bisect
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from engine._errors import PatternError, PatternParseError

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
_PATTERN_KEYS = ("triples", "graph")  # "triples": the paper's prompts; "graph": SimGRAG's code

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
        value = _pattern_value(loaded)
        if value is _MISSING:
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
        if len(text) > _MAX_TEXT:
            raise PatternParseError(
                f"the text is too long for a pattern ({len(text)} characters > {_MAX_TEXT})", text
            )
        scanner = _Scanner(text)
        attempted = False
        last_failure = ""
        for start, end in scanner.spans("{", "}"):
            if not scanner.mentions_key(start, end):
                continue
            attempted = True
            loaded = scanner.load(start, end)
            if loaded is _MISSING:
                last_failure = f"the object at offset {start} is neither JSON nor a Python literal"
                continue
            found = _find_pattern_dict(loaded)
            if found is None:
                last_failure = f"the object at offset {start} has no 'triples' or 'graph' key"
                continue
            try:
                return cls(_pattern_value(found), max_edges=max_edges)
            except PatternError as e:
                raise PatternParseError(str(e), text) from e
        # Last resort: a bare list of triples.
        for start, end in scanner.spans("[", "]"):
            loaded = scanner.load(start, end)
            if _looks_like_triples(loaded):
                try:
                    return cls(loaded, max_edges=max_edges)
                except PatternError as e:
                    raise PatternParseError(str(e), text) from e
        if not text.strip():
            raise PatternParseError("the text is empty: no pattern", text)
        gave_up = " (gave up: the text is too convoluted)" if scanner.exhausted else ""
        if attempted:
            raise PatternParseError(f"no pattern found in the text: {last_failure}{gave_up}", text)
        raise PatternParseError(
            "no pattern found in the text: no {...} object with a 'triples' or 'graph' key" + gave_up,
            text,
        )

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


# ---------------------------------------------------------------------------------------------------------
# Lenient reading of LLM text
# ---------------------------------------------------------------------------------------------------------

_MISSING: Any = object()
# Bounds on the work parse() does on pathological text (an LLM's output is a few kB).
_MAX_TEXT = 1_000_000  # characters
_MAX_STARTS = 512  # bracket positions tried, per bracket kind
_SCAN_BUDGET = 2_000_000  # characters walked by string-aware scans
_LOAD_BUDGET = 500_000  # characters handed to the JSON / literal readers
_SMART_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'"})
_JSON_WORDS = {"true": "True", "false": "False", "null": "None"}


def _pattern_value(obj: Mapping[Any, Any]) -> Any:
    """The value under "triples" (preferred) or "graph"; keys match case-insensitively, stripped."""
    by_key: dict[str, Any] = {}
    for k, v in obj.items():
        if isinstance(k, str):
            by_key.setdefault(k.strip().lower(), v)
    for key in _PATTERN_KEYS:
        if key in by_key:
            return by_key[key]
    return _MISSING


def _find_pattern_dict(obj: Any) -> Mapping[Any, Any] | None:
    return obj if isinstance(obj, Mapping) and _pattern_value(obj) is not _MISSING else None


_KEY_RE = re.compile("|".join(_PATTERN_KEYS), re.IGNORECASE)
_TOKEN_RE = re.compile(r"""\\.|["'{}\[\]]""", re.DOTALL)


class _Scanner:
    """Finds balanced ``{...}`` / ``[...]`` spans of a text, in order of their start, within a work budget
    (so hostile or runaway text costs bounded time). Each start yields the string-aware end (quotes of
    both kinds, backslash escapes) and the plain bracket-counting end, when they exist and differ."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.scan_left = _SCAN_BUDGET
        self.load_left = _LOAD_BUDGET
        self.exhausted = False
        self._key_positions = [m.start() for m in _KEY_RE.finditer(text)]

    def mentions_key(self, start: int, end: int) -> bool:
        i = bisect.bisect_left(self._key_positions, start)
        return i < len(self._key_positions) and self._key_positions[i] < end

    def _plain_ends(self, opener: str, closer: str) -> dict[int, int]:
        ends: dict[int, int] = {}
        stack: list[int] = []
        for i, c in enumerate(self.text):
            if c == opener:
                stack.append(i)
            elif c == closer and stack:
                ends[stack.pop()] = i + 1
        return ends

    def _aware_end(self, start: int, opener: str, closer: str) -> int | None:
        if self.scan_left <= 0:
            self.exhausted = True
            return None
        depth = 0
        quote: str | None = None
        limit = start + self.scan_left
        for m in _TOKEN_RE.finditer(self.text, start):
            if m.start() > limit:
                break
            tok = m.group()
            if len(tok) == 2:  # an escape
                continue
            if quote is not None:
                if tok == quote:
                    quote = None
            elif tok in "\"'":
                quote = tok
            elif tok == opener:
                depth += 1
            elif tok == closer:
                depth -= 1
                if depth == 0:
                    self.scan_left -= m.end() - start
                    return m.end()
        self.scan_left -= min(len(self.text), limit) - start
        return None

    def spans(self, opener: str, closer: str) -> Iterator[tuple[int, int]]:
        plain = self._plain_ends(opener, closer)
        pos = self.text.find(opener)
        for _ in range(_MAX_STARTS):
            if pos == -1:
                return
            ends = [self._aware_end(pos, opener, closer), plain.get(pos)]
            for end in dict.fromkeys(e for e in ends if e is not None):
                yield pos, end
            pos = self.text.find(opener, pos + 1)
        self.exhausted = True

    def load(self, start: int, end: int) -> Any:
        if end - start > self.load_left:
            self.exhausted = True
            return _MISSING
        self.load_left -= end - start
        return _load_literal(self.text[start:end])


def _rewrite_outside_strings(src: str) -> str:
    """Drop trailing commas before a closing bracket and turn bare true/false/null into Python's words,
    leaving quoted strings untouched."""
    out: list[str] = []
    i, n = 0, len(src)
    quote: str | None = None
    while i < n:
        c = src[i]
        if quote is not None:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(src[i + 1])
                i += 2
                continue
            if c == quote:
                quote = None
            i += 1
            continue
        if c in "\"'":
            quote = c
            out.append(c)
            i += 1
            continue
        if c == ",":
            j = i + 1
            while j < n and src[j].isspace():
                j += 1
            if j < n and src[j] in "]})":
                i += 1  # drop the trailing comma
                continue
        if c.isalpha():
            j = i
            while j < n and (src[j].isalnum() or src[j] == "_"):
                j += 1
            word = src[i:j]
            out.append(_JSON_WORDS.get(word, word))
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _literal(src: str) -> Any:
    try:
        return json.loads(src)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(src)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _MISSING


def _load_literal(span: str) -> Any:
    """``span`` as JSON, else as a Python literal, else after small repairs; _MISSING if none works."""
    loaded = _literal(span)
    if loaded is not _MISSING:
        return loaded
    repaired = _rewrite_outside_strings(span)
    if repaired != span:
        loaded = _literal(repaired)
        if loaded is not _MISSING:
            return loaded
    requoted = span.translate(_SMART_QUOTES)
    if requoted != span:
        loaded = _literal(requoted)
        if loaded is _MISSING:
            loaded = _literal(_rewrite_outside_strings(requoted))
    return loaded


def _looks_like_triples(obj: Any) -> bool:
    return (
        isinstance(obj, (list, tuple))
        and len(obj) > 0
        and all(
            isinstance(t, (list, tuple)) and len(t) == 3 and all(isinstance(x, str) for x in t)
            for t in obj
        )
    )


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
