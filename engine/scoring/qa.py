"""Questions and answers for the triple scorers, from files, and their entities in the KG.

Question files (read by :mod:`engine.datasets.questions`): MetaQA lines (``question with [topic]<TAB>answer1|answer2``)
or JSON Lines ``{"question", "topics": [...], "answers": [...], "triples": [[h, r, t], ...]?, "relation_path": [...]?}``
(topics and answers are entity keys or names; ``triples``, when given, are the ground-truth evidence and replace the
weak labels). :func:`resolve_entities` maps those keys or names to entity ids (one batched query by key, one by name for
the rest).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from engine._errors import InputError, MalformedInputError
from engine.datasets.questions import JSONL_SUFFIXES, question_rows, text_lines

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


def read_relation_paths(path: str | Path) -> list[list[str] | None]:
    """One relation path per line (relation names separated by commas or white space; an empty line: none)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no relation-path file at {path}")
    return [re.split(r"[,\s]+", line.strip()) if line.strip() else None for _, line in text_lines(path)]


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
    fmt = fmt or ("jsonl" if path.suffix.lower() in JSONL_SUFFIXES else "metaqa")
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
            q, answers = row[0], row[1]
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
