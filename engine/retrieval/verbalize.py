"""Turn retrieved evidence into the text an LLM reads.

* :func:`verbalize_subgraphs`: SimGRAG's format, ``graph [1]: [("h", "r", "t"), ...],`` one graph per line.
* :func:`verbalize_scored`: QSRAG's format, one ``("h", "r", "t") [confidence: 0.93]`` per line, by score
  descending.

Strings are double-quoted with JSON escaping (``"`` -> ``\\"``, newlines -> ``\\n``; printable non-ASCII kept,
other unprintable characters escaped), so a name containing quotes, commas or line breaks cannot break the tuple
syntax or the one-graph-per-line layout; the result reads back with ``ast.literal_eval``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

__all__ = ["verbalize_scored", "verbalize_subgraphs", "verbalize_triple"]


def _escape(c: str) -> str:
    if c.isprintable():
        return c
    code = ord(c)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _quote(value: Any) -> str:
    """Double-quoted, JSON-escaped; other unprintable characters (line separators such as U+2028, U+0085,
    format characters) escaped too, so that one triple is always one line."""
    text = json.dumps(str(value), ensure_ascii=False)
    return text if text.isprintable() else "".join(_escape(c) for c in text)


def verbalize_triple(triple: Sequence[Any]) -> str:
    """``("h", "r", "t")`` for a 3-item triple."""
    if isinstance(triple, (str, bytes)) or len(triple) != 3:
        raise ValueError(f"expected a (head, relation, tail) triple, got {triple!r}")
    h, r, t = triple
    return f"({_quote(h)}, {_quote(r)}, {_quote(t)})"


def verbalize_subgraphs(
    subgraphs: Sequence[Sequence[tuple[str, str, str]]], *, separator: str = ",\n"
) -> str:
    """SimGRAG's evidence string: ``graph [1]: [("h", "r", "t"), ...]``, graphs numbered from 1 and joined by
    ``separator`` (``",\\n"``: one graph per line; ``", "`` gives the code's single line). ``""`` for none."""
    parts = []
    for number, subgraph in enumerate(subgraphs, start=1):
        body = ", ".join(verbalize_triple(t) for t in subgraph)
        parts.append(f"graph [{number}]: [{body}]")
    return separator.join(parts)


def _score_key(score: float) -> float:
    return -math.inf if math.isnan(score) else score


def verbalize_scored(
    triples: Sequence[tuple[str, str, str, float]],
    *,
    precision: int | None = None,
    limit: int | None = None,
) -> str:
    """QSRAG's evidence lines ``("h", "r", "t") [confidence: 0.93]``, by score descending (ties keep their
    input order; NaN scores go last). ``precision`` rounds the score to that many decimals (default: the
    full float, as QSRAG prints it); ``limit`` keeps only the best ``limit`` lines."""
    if precision is not None and precision < 0:
        raise ValueError(f"precision must be >= 0, got {precision}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    rows: list[tuple[float, str]] = []
    for item in triples:
        if isinstance(item, (str, bytes)) or len(item) != 4:
            raise ValueError(f"expected a (head, relation, tail, score) tuple, got {item!r}")
        h, r, t, score = item
        rows.append((float(score), verbalize_triple((h, r, t))))
    rows.sort(key=lambda row: _score_key(row[0]), reverse=True)  # stable: ties keep input order
    if limit is not None:
        rows = rows[:limit]
    lines = []
    for score, text in rows:
        shown = repr(score) if precision is None else f"{score:.{precision}f}"
        lines.append(f"{text} [confidence: {shown}]")
    return "\n".join(lines)
