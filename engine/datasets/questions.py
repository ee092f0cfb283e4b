"""The one reader of question files, for every question file the engine reads: the triple scorer's and the pattern
generator's training questions (``isorag train-scorer``, ``train-generator``) and ``isorag eval``'s ground truth,
and the benchmarks' datasets.

Formats (:data:`FORMATS`), told apart by :func:`detect_format`:

* ``jsonl``: one JSON object per line with a ``"question"`` string (``isorag synth`` output, training records);
* ``metaqa``: ``question with [topic]<TAB>answer1|answer2`` (MetaQA's ``qa_*.txt``; its question types, one per
  line, in ``qa_*_qtype.txt`` beside it);
* ``pathquestion``: ``question<TAB>answer(alias1/alias2/)<TAB>e0#r1#e1#...#<end>#answer`` (PathQuestion's
  ``PQ-*.txt``).

:func:`question_rows` yields ``(line number, row)``, blank lines skipped: a JSON object, or for the text formats a
tuple (``(question, answers)``, PathQuestion: ``(question, answers, path)``). A file that cannot be read is an
:class:`~engine._errors.InputError`; a byte that is not UTF-8 or a line that is not a row of its format a
:class:`~engine._errors.MalformedInputError` at its line. What a row's fields must hold beyond that is the caller's
to check.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Union

from engine._errors import InputError, MalformedInputError

__all__ = ["FORMATS", "JSONL_SUFFIXES", "Row", "detect_format", "pathquestion_answers", "pathquestion_path",
           "question_rows", "text_lines", "topic_of"]

FORMATS = ("jsonl", "metaqa", "pathquestion")
JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
#: a row: a JSON object, ``(question, answers)`` or ``(question, answers, path)``
Row = Union[dict[str, Any], tuple[str, list[str]], tuple[str, list[str], str]]

_TOPIC = re.compile(r"\[([^\[\]]+)\]")


def text_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of a UTF-8 file; a byte that is not UTF-8 is a MalformedInputError at its line."""
    path = Path(path)
    try:
        f = path.open("rb")
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from e
    with f:
        for n, raw in enumerate(f, start=1):
            try:
                yield n, raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                raise MalformedInputError(path, n, f"not valid UTF-8: byte 0x{raw[e.start]:02x} at column "
                                                   f"{e.start + 1}") from None


def detect_format(path: str | Path, *, by_suffix: bool = True) -> str:
    """The file's format: ``jsonl`` by its suffix (unless ``by_suffix=False``), else by its first line that is
    not blank (an object: ``jsonl``; three tab-separated fields, the third a ``#``-path: ``pathquestion``; else
    ``metaqa``)."""
    path = Path(path)
    if by_suffix and path.suffix.lower() in JSONL_SUFFIXES:
        return "jsonl"
    first = next((line for _, line in text_lines(path) if line.strip()), "")
    if first.lstrip().startswith("{"):
        return "jsonl"
    fields = first.split("\t")
    if len(fields) >= 3 and "#" in fields[2]:
        return "pathquestion"
    return "metaqa"


def question_rows(path: str | Path, *, fmt: str | None = None, jsonl: bool | None = None,
                  limit: int | None = None) -> Iterator[tuple[int, Row]]:
    """(line number, row) of a question file of format ``fmt`` (default :func:`detect_format`; ``jsonl=True`` or
    ``False``: ``jsonl`` or ``metaqa``), blank lines skipped, at most ``limit`` rows."""
    path = Path(path)
    if fmt is None:
        fmt = detect_format(path) if jsonl is None else ("jsonl" if jsonl else "metaqa")
    if fmt not in FORMATS:
        raise InputError(f"{path}: unknown question format {fmt!r} (known: {', '.join(FORMATS)})")
    n = 0
    for lineno, line in text_lines(path):
        if limit is not None and n >= limit:
            return
        if not line.strip():
            continue
        n += 1
        yield lineno, _row(path, lineno, line, fmt)


def _row(path: Path, lineno: int, line: str, fmt: str) -> Row:
    if fmt == "jsonl":
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise MalformedInputError(path, lineno, f"not JSON: {e.msg}") from e
        if not isinstance(obj, dict) or not isinstance(obj.get("question"), str):
            raise MalformedInputError(path, lineno, 'needs a "question" string')
        return obj
    if fmt == "pathquestion":
        fields = line.split("\t")
        if len(fields) != 3:
            raise MalformedInputError(path, lineno, "expected 'question<TAB>answer(aliases)<TAB>path'")
        return fields[0], pathquestion_answers(fields[1]), fields[2]
    if "\t" not in line:
        raise MalformedInputError(path, lineno, "expected 'question<TAB>answer1|answer2'")
    q, a = line.split("\t", 1)
    return q, [x for x in a.split("|") if x]


def topic_of(question: str) -> str | None:
    """The bracketed topic entity of a MetaQA question (``what did [Michael Mann] direct``), or None."""
    m = _TOPIC.search(question)
    return m.group(1) if m else None


def pathquestion_answers(field: str) -> list[str]:
    """A PathQuestion answer field's names, the answer first: ``united_kingdom(united_kingdom/uk/)``."""
    m = re.match(r"^([^(]*)\((.*)\)\s*$", field.strip())
    if not m:
        return [field.strip()]
    names = [m.group(1)] + [a for a in m.group(2).split("/") if a]
    return list(dict.fromkeys(n.strip() for n in names if n.strip()))


def pathquestion_path(walk: str) -> tuple[str, list[str], list[str]]:
    """A PathQuestion walk ``e0#r1#e1#...#<end>#answer``: its topic, its relations, and the entities it passes."""
    steps = walk.split("#")
    steps = steps[: steps.index("<end>")] if "<end>" in steps else steps
    return steps[0], steps[1::2], steps[2::2]
