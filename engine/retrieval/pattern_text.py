"""The lenient reader of an LLM's text behind :meth:`Pattern.parse <engine.retrieval.pattern.Pattern.parse>`: finds a
pattern's triples in prose, code fences and Python literals (``json`` then ``ast.literal_eval``, never ``eval``), within
bounds on the work done; :class:`~engine.retrieval.pattern.Pattern` validates what it finds."""

from __future__ import annotations

import ast
import bisect
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from engine._errors import PatternParseError

__all__ = ["MISSING", "find_triples", "pattern_value"]

_PATTERN_KEYS = ("triples", "graph")  # "triples": the paper's prompts; "graph": SimGRAG's code

#: what :func:`pattern_value` returns for an object without a pattern key (the value itself may be None)
MISSING: Any = object()
# Bounds on the work find_triples() does on pathological text (an LLM's output is a few kB).
_MAX_TEXT = 1_000_000  # characters
_MAX_STARTS = 512  # bracket positions tried, per bracket kind
_SCAN_BUDGET = 2_000_000  # characters walked by string-aware scans
_LOAD_BUDGET = 500_000  # characters handed to the JSON / literal readers
_SMART_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'"})
_JSON_WORDS = {"true": "True", "false": "False", "null": "None"}


def pattern_value(obj: Mapping[Any, Any]) -> Any:
    """The value under "triples" (preferred) or "graph"; keys match case-insensitively, stripped."""
    by_key: dict[str, Any] = {}
    for k, v in obj.items():
        if isinstance(k, str):
            by_key.setdefault(k.strip().lower(), v)
    for key in _PATTERN_KEYS:
        if key in by_key:
            return by_key[key]
    return MISSING


def _find_pattern_dict(obj: Any) -> Mapping[Any, Any] | None:
    return obj if isinstance(obj, Mapping) and pattern_value(obj) is not MISSING else None


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
            return MISSING
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
        return MISSING


def _load_literal(span: str) -> Any:
    """``span`` as JSON, else as a Python literal, else after small repairs; MISSING if none works."""
    loaded = _literal(span)
    if loaded is not MISSING:
        return loaded
    repaired = _rewrite_outside_strings(span)
    if repaired != span:
        loaded = _literal(repaired)
        if loaded is not MISSING:
            return loaded
    requoted = span.translate(_SMART_QUOTES)
    if requoted != span:
        loaded = _literal(requoted)
        if loaded is MISSING:
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


def find_triples(text: str) -> Any:
    """The triples of the first pattern in ``text``, not yet validated: the value under the ``"triples"`` or
    ``"graph"`` key of the first balanced ``{...}`` that reads (as JSON or as a Python literal, after small repairs)
    as such an object, else the first bare list of triples ``[("h", "r", "t"), ...]``. ``text`` is a str.
    Raises PatternParseError (with the text) when there is none.
    """
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
        if loaded is MISSING:
            last_failure = f"the object at offset {start} is neither JSON nor a Python literal"
            continue
        found = _find_pattern_dict(loaded)
        if found is None:
            last_failure = f"the object at offset {start} has no 'triples' or 'graph' key"
            continue
        return pattern_value(found)
    # Last resort: a bare list of triples.
    for start, end in scanner.spans("[", "]"):
        loaded = scanner.load(start, end)
        if _looks_like_triples(loaded):
            return loaded
    if not text.strip():
        raise PatternParseError("the text is empty: no pattern", text)
    gave_up = " (gave up: the text is too convoluted)" if scanner.exhausted else ""
    if attempted:
        raise PatternParseError(f"no pattern found in the text: {last_failure}{gave_up}", text)
    raise PatternParseError(
        "no pattern found in the text: no {...} object with a 'triples' or 'graph' key" + gave_up,
        text,
    )
