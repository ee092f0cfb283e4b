"""Questions and answers for the triple scorers, from files, and their entities in the KG.

Question files: MetaQA lines (``question with [topic]<TAB>answer1|answer2``) or JSON Lines
``{"question", "topics": [...], "answers": [...], "triples": [[h, r, t], ...]?, "relation_path": [...]?}``
(topics and answers are entity keys or names; ``triples``, when given, are the ground-truth evidence and replace
the weak labels). :func:`resolve_entities` maps those keys or names to entity ids (one batched query by key,
one by name for the rest).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

from engine._errors import InputError, MalformedInputError

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import GraphReader

__all__ = ["QARecord", "read_qa", "read_relation_paths", "resolve_entities", "as_records"]

_TOPIC = re.compile(r"\[([^\[\]]+)\]")


@dataclass
class QARecord:
    """One training question. ``hops`` overrides the neighbourhood depth for it (None: the run's)."""

    question: str
    topics: list[str]
    answers: list[str]
    triples: list[tuple[str, str, str]] | None = None
    hops: int | None = None
    source: str = ""
    #: relation names (or types) from the topic to the answers, when known (MetaQA's question types name it):
    #: the training labels are then the triples on walks that follow it
    #: (:func:`~engine.scoring.labels.relation_path_labels`)
    relation_path: list[str] | None = None


def _text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of a UTF-8 file; a byte that is not UTF-8 is a MalformedInputError at its line."""
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


def question_rows(path: Path, *, jsonl: bool, limit: int | None = None
                  ) -> Iterator[tuple[int, dict[str, Any] | tuple[str, list[str]]]]:
    """(line number, row) of a question file, blank lines skipped, at most ``limit`` rows: a JSON object with a
    ``"question"`` string (``jsonl``), else a MetaQA line as its question and its answers. A line that is neither
    is a MalformedInputError at its line; the fields beyond ``question`` are the caller's to check."""
    n = 0
    for lineno, line in _text_lines(path):
        if limit is not None and n >= limit:
            return
        if not line.strip():
            continue
        n += 1
        if jsonl:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise MalformedInputError(path, lineno, f"not JSON: {e.msg}") from e
            if not isinstance(obj, dict) or not isinstance(obj.get("question"), str):
                raise MalformedInputError(path, lineno, 'needs a "question" string')
            yield lineno, obj
        else:
            if "\t" not in line:
                raise MalformedInputError(path, lineno, "expected 'question<TAB>answer1|answer2'")
            q, a = line.split("\t", 1)
            yield lineno, (q, [x for x in a.split("|") if x])


def read_relation_paths(path: str | Path) -> list[list[str] | None]:
    """One relation path per line (relation names separated by commas or white space; an empty line: none)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no relation-path file at {path}")
    return [re.split(r"[,\s]+", line.strip()) if line.strip() else None for _, line in _text_lines(path)]


def read_qa(path: str | Path, *, fmt: str | None = None, hops: int | None = None,
            limit: int | None = None, relation_paths: str | Path | Sequence[list[str] | None] | None = None,
            ) -> list[QARecord]:
    """Questions from a MetaQA file (``fmt="metaqa"``) or JSON Lines (``"jsonl"``; default: by suffix).

    Relation paths (training labels along them, see :class:`QARecord`): a JSON Lines record's
    ``"relation_path": [r1, r2, ...]``, or ``relation_paths``, a file (:func:`read_relation_paths`) or list
    aligned with the question file's lines (line i of one for line i of the other, blank lines included).
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no question file at {path}")
    paths_from = "the relation paths"
    if isinstance(relation_paths, (str, Path)):  # a file; else the rows themselves
        paths_from = f"{relation_paths}"
        relation_paths = read_relation_paths(relation_paths)
    fmt = fmt or ("jsonl" if path.suffix.lower() in (".jsonl", ".json", ".ndjson") else "metaqa")
    out: list[QARecord] = []
    for lineno, row in question_rows(path, jsonl=fmt == "jsonl", limit=limit):
        src = f"{path.name}:{lineno}"
        if isinstance(row, dict):
            topics, answers = row.get("topics"), row.get("answers")
            if not isinstance(topics, list) or not topics or not all(isinstance(t, str) for t in topics):
                raise MalformedInputError(path, lineno, '"topics" must be a non-empty list of strings')
            if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
                raise MalformedInputError(path, lineno, '"answers" must be a list of strings')
            triples = row.get("triples")
            if triples is not None:
                if not isinstance(triples, list) or not all(
                        isinstance(t, list) and len(t) == 3 and all(isinstance(x, str) for x in t) for t in triples):
                    raise MalformedInputError(path, lineno, '"triples" must be a list of [head, relation, tail]')
                triples = [tuple(t) for t in triples]
            rp = row.get("relation_path")
            if rp is not None and (not isinstance(rp, list) or not all(isinstance(x, str) for x in rp)):
                raise MalformedInputError(path, lineno, '"relation_path" must be a list of relation names')
            out.append(QARecord(row["question"], topics, answers, triples, row.get("hops", hops), src, rp or None))
        else:
            q, answers = row
            topics = _TOPIC.findall(q)
            if not topics:
                raise MalformedInputError(path, lineno, "no [topic entity] in the question")
            out.append(QARecord(q, topics, answers, None, hops, src))
        if relation_paths is not None:
            if lineno > len(relation_paths):
                raise InputError(f"{paths_from} has {len(relation_paths)} lines of relation paths, {path} more")
            rpath = relation_paths[lineno - 1]
            if rpath:
                out[-1].relation_path = list(rpath)
    return out


def resolve_entities(graph: GraphReader, texts: Iterable[str]) -> dict[str, list[int]]:
    """Entity ids of each text: by source key (one query), else by display name (one query for the rest)."""
    texts = list(dict.fromkeys(t for t in texts if t))
    out: dict[str, list[int]] = {}
    batch = 20_000
    for i in range(0, len(texts), batch):
        for r in graph.entities_by_key(texts[i:i + batch]):
            out.setdefault(r["key"], []).append(int(r["eid"]))
    rest = [t for t in texts if t not in out]
    for i in range(0, len(rest), batch):
        for r in graph.entities_by_name(rest[i:i + batch]):
            out.setdefault(r["name"], []).append(int(r["eid"]))
    return out


def as_records(qa: Any, limit: int | None) -> list[QARecord]:
    """Records from a question file, several files, or records already read (``limit``: per file)."""
    if isinstance(qa, (str, Path)):
        return read_qa(qa, limit=limit)
    items = list(qa)
    if items and all(isinstance(x, QARecord) for x in items):
        return items[:limit] if limit else items
    out: list[QARecord] = []
    for p in items:
        out.extend(read_qa(p, limit=limit))
    return out
