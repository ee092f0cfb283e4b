"""MetaQA question types -> KB relation paths, gold SimGRAG patterns, and answers by following the path.

A MetaQA question type names the entity types along the question's reasoning chain, joined by ``_to_``:
``movie_to_director_to_movie`` = (topic movie) -directed_by- (?director) -directed_by- (?answer movie).
Every MetaQA relation joins a movie (always the head in ``kb.txt``) to one attribute, so each hop is one of:

    actor -> starred_actors     director -> directed_by    writer -> written_by     genre -> has_genre
    language -> in_language     year -> release_year       tag(s) -> has_tags
    imdbrating -> has_imdb_rating                          imdbvotes -> has_imdb_votes

and one end of every hop is ``movie``.  The mapping is derived from the qtype's words, so it covers every
qtype of the 1/2/3-hop dev (and test) files -- 13, 21 and 15 types -- and any longer chain of the same words.

Gold patterns are in SimGRAG's form ``{"triples": [[head, relation, tail], ...]}``: the topic node is its text,
relations are the KB's names, each triple is written movie -> attribute as in the KB, and unknown nodes are
``UNKNOWN <type> <n>`` numbered per type in the order they are reached; the answer is the last unknown
introduced (see :func:`answer_node`).

:func:`follow_path` computes a question's answers on a KB the way MetaQA's own answers were made, as measured
on the dev set over ``kb.txt``: walk the path set-wise, relations direction-agnostic, and drop the topic entity
from the set reached at every step.  Its answers equal MetaQA's gold answers for 93% / 81% / 63% of the
1/2/3-hop dev questions (the rest mostly differ by triples missing from this reconstruction of the KB); keeping
the topic in intermediate sets gives 37% exact on 3-hop, excluding every revisited node (simple paths, i.e.
injective matching of the gold pattern) 57%.

:func:`read_questions` reads a ``qa_*.txt`` file with its question types (through the one question reader,
:mod:`engine.datasets.questions`). ``isorag eval`` reads MetaQA files with this module, and so do the benchmarks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable

from engine.datasets.questions import question_rows, text_lines, topic_of

#: attribute word of a qtype -> (KB relation, type word of its UNKNOWN node)
ATTRIBUTES: dict[str, tuple[str, str]] = {
    "actor": ("starred_actors", "actor"),
    "director": ("directed_by", "director"),
    "writer": ("written_by", "writer"),
    "genre": ("has_genre", "genre"),
    "language": ("in_language", "language"),
    "year": ("release_year", "year"),
    "tag": ("has_tags", "tag"),
    "tags": ("has_tags", "tag"),
    "imdbrating": ("has_imdb_rating", "imdb rating"),
    "imdbvotes": ("has_imdb_votes", "imdb votes"),
}
MOVIE = "movie"


def parse_qtype(qtype: str) -> list[str]:
    """The entity-type words of a qtype, checked: ``"movie_to_director_to_movie"`` -> movie, director, movie."""
    words = qtype.strip().split("_to_")
    if len(words) < 2:
        raise ValueError(f"not a MetaQA question type: {qtype!r} (expected words joined by '_to_')")
    for w in words:
        if w != MOVIE and w not in ATTRIBUTES:
            raise ValueError(f"unknown entity type {w!r} in qtype {qtype!r}; known: "
                             f"{', '.join([MOVIE, *ATTRIBUTES])}")
    for a, b in zip(words, words[1:]):
        if (a == MOVIE) == (b == MOVIE):
            raise ValueError(f"qtype {qtype!r}: hop {a} -> {b} does not join a movie to an attribute")
    return words


def relation_path(qtype: str) -> list[str]:
    """The KB relations along the qtype's chain: ``movie_to_director_to_movie`` -> [directed_by, directed_by]."""
    words = parse_qtype(qtype)
    return [ATTRIBUTES[b if a == MOVIE else a][0] for a, b in zip(words, words[1:])]


def hops(qtype: str) -> int:
    """The number of hops (relations) of the qtype."""
    return len(parse_qtype(qtype)) - 1


def _node_texts(words: list[str], topic: str) -> list[str]:
    counts: dict[str, int] = {}
    nodes = [topic]
    for w in words[1:]:
        label = MOVIE if w == MOVIE else ATTRIBUTES[w][1]
        counts[label] = counts.get(label, 0) + 1
        nodes.append(f"UNKNOWN {label} {counts[label]}")
    return nodes


def gold_pattern(qtype: str, topic: str) -> dict[str, list[list[str]]]:
    """The gold SimGRAG pattern of a question: ``{"triples": [[h, r, t], ...]}``.

    >>> gold_pattern("movie_to_director_to_movie", "Inception")["triples"]
    [['Inception', 'directed_by', 'UNKNOWN director 1'], ['UNKNOWN movie 1', 'directed_by', 'UNKNOWN director 1']]
    """
    if not topic or not topic.strip():
        raise ValueError("empty topic entity")
    words = parse_qtype(qtype)
    nodes = _node_texts(words, topic.strip())
    triples = []
    for i, (a, b) in enumerate(zip(words, words[1:])):
        movie, other = (nodes[i], nodes[i + 1]) if a == MOVIE else (nodes[i + 1], nodes[i])
        triples.append([movie, ATTRIBUTES[b if a == MOVIE else a][0], other])
    return {"triples": triples}


def answer_node(qtype: str) -> str:
    """The pattern node that stands for the answer: the last unknown (``"UNKNOWN movie 1"`` above)."""
    return _node_texts(parse_qtype(qtype), "topic")[-1]


def answer_type(qtype: str) -> str:
    """The type word of the answer node: ``movie``, ``director``, ``imdb rating``..."""
    last = parse_qtype(qtype)[-1]
    return MOVIE if last == MOVIE else ATTRIBUTES[last][1]


Neighbours = Callable[[str, str], Iterable[str]]


def follow_path(neighbours: Neighbours, topic: str, qtype: str, *, trace: list[set[str]] | None = None) -> set[str]:
    """The answers of a question on a KB, by MetaQA's convention (see the module docstring).

    ``neighbours(entity, relation)`` gives the entities joined to ``entity`` by ``relation`` in either direction.
    With ``trace``, the set reached after each hop is appended to it (the last one is the answer set).
    """
    current = {topic}
    for relation in relation_path(qtype):
        reached: set[str] = set()
        for entity in current:
            reached.update(neighbours(entity, relation))
        reached.discard(topic)
        current = reached
        if trace is not None:
            trace.append(current)
    return current


def read_questions(path: str | Path, *, qtypes: str | Path | None = None, limit: int | None = None,
                   hops: int | None = None) -> list[dict[str, Any]]:
    """The questions of a MetaQA ``qa_*.txt`` file: ``question`` (as written, topic in brackets), ``topic``,
    ``answers``, ``qtype`` (line for line from ``qtypes``, default the ``qa_*_qtype.txt`` beside it, when there is
    one; else None), ``hops`` and ``line``. A question without a ``[topic]`` is left out; ``limit`` counts the
    questions kept."""
    path = Path(path)
    qt_path = Path(qtypes) if qtypes is not None else path.with_name(path.stem + "_qtype.txt")
    types = {n: t.strip() for n, t in text_lines(qt_path)} if qtypes is not None or qt_path.is_file() else {}
    out: list[dict[str, Any]] = []
    for lineno, row in question_rows(path, fmt="metaqa"):
        assert isinstance(row, tuple)  # a MetaQA row
        q, answers = row[0], row[1]
        topic = topic_of(q)
        if topic is None:
            continue
        out.append({"question": q, "topic": topic, "answers": answers, "qtype": types.get(lineno), "hops": hops,
                    "line": lineno})
        if limit and len(out) >= limit:
            break
    return out


__all__ = [
    "read_questions",
    "ATTRIBUTES",
    "parse_qtype",
    "relation_path",
    "hops",
    "gold_pattern",
    "answer_node",
    "answer_type",
    "follow_path",
]
