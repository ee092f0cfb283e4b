"""The MetaQA qtype mapping (engine/datasets/metaqa.py) and the bundled demo KG (engine/data/demo)."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from engine.datasets.metaqa import (
    answer_node,
    answer_type,
    follow_path,
    gold_pattern,
    hops,
    parse_qtype,
    relation_path,
)

from helpers import ROOT
from loaders import open_source

DEMO = ROOT / "engine" / "data" / "demo"
METAQA = ROOT.parent / "shared" / "data" / "metaqa"
if not METAQA.is_dir():
    METAQA = Path("/work/shared/data/metaqa")
KB_RELATIONS = {"directed_by", "written_by", "starred_actors", "release_year", "in_language", "has_tags",
                "has_genre", "has_imdb_votes", "has_imdb_rating"}


# ----------------------------------------------------------------------------------------- qtypes
def test_gold_pattern_examples() -> None:
    assert gold_pattern("movie_to_director_to_movie", "Topic") == {"triples": [
        ["Topic", "directed_by", "UNKNOWN director 1"], ["UNKNOWN movie 1", "directed_by", "UNKNOWN director 1"]]}
    assert gold_pattern("actor_to_movie", "Tom Cullen") == {"triples": [
        ["UNKNOWN movie 1", "starred_actors", "Tom Cullen"]]}
    assert gold_pattern("movie_to_actor_to_movie_to_director", "Titanic Town") == {"triples": [
        ["Titanic Town", "starred_actors", "UNKNOWN actor 1"],
        ["UNKNOWN movie 1", "starred_actors", "UNKNOWN actor 1"],
        ["UNKNOWN movie 1", "directed_by", "UNKNOWN director 1"]]}
    assert gold_pattern("actor_to_movie_to_actor", "X")["triples"] == [
        ["UNKNOWN movie 1", "starred_actors", "X"], ["UNKNOWN movie 1", "starred_actors", "UNKNOWN actor 1"]]
    assert relation_path("movie_to_director_to_movie") == ["directed_by", "directed_by"]
    assert relation_path("tag_to_movie") == relation_path("movie_to_tags") == ["has_tags"]
    assert relation_path("movie_to_imdbrating") == ["has_imdb_rating"]
    assert answer_node("movie_to_director_to_movie") == "UNKNOWN movie 1"
    assert answer_type("movie_to_imdbvotes") == "imdb votes"
    # longer chains of the same words work, unknowns numbered per type
    assert answer_node("movie_to_actor_to_movie_to_actor") == "UNKNOWN actor 2"


@pytest.mark.parametrize("bad", ["", "movie", "movie_to_movie", "actor_to_director", "movie_to_producer",
                                 "movie_to_director_to_"])
def test_bad_qtypes(bad: str) -> None:
    with pytest.raises(ValueError):
        relation_path(bad)


def _dev_qtypes() -> dict[int, collections.Counter[str]]:
    out: dict[int, collections.Counter[str]] = {}
    for hop in (1, 2, 3):
        f = METAQA / f"{hop}-hop" / "qa_dev_qtype.txt"
        if not f.is_file():
            pytest.skip(f"{f} not available")
        out[hop] = collections.Counter(line.strip() for line in f.read_text().splitlines() if line.strip())
    return out


def test_every_dev_qtype_is_covered() -> None:
    seen = 0
    for hop, qtypes in _dev_qtypes().items():
        for qtype in qtypes:
            path = relation_path(qtype)
            assert hops(qtype) == hop == len(path)
            assert set(path) <= KB_RELATIONS
            triples = gold_pattern(qtype, "Some Topic")["triples"]
            assert len(triples) == hop
            nodes = [n for t in triples for n in (t[0], t[2])]
            assert "Some Topic" in nodes and answer_node(qtype) in nodes
            assert [t[1] for t in triples] == path
            # consecutive triples share a node: the pattern is a chain from the topic to the answer
            for a, b in zip(triples, triples[1:]):
                assert {a[0], a[2]} & {b[0], b[2]}
            assert parse_qtype(qtype)[-1] != "movie" or answer_type(qtype) == "movie"
            seen += 1
    assert seen == 13 + 21 + 15


def test_follow_path_drops_the_topic_at_every_step() -> None:
    kb = [("M", "directed_by", "D"), ("M2", "directed_by", "D"), ("M", "has_genre", "Drama"),
          ("M2", "has_genre", "Comedy")]
    adj: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
    for h, r, t in kb:
        adj[(h, r)].add(t)
        adj[(t, r)].add(h)
    def nb(e: str, r: str) -> set[str]:
        return adj.get((e, r), set())
    assert follow_path(nb, "M", "movie_to_director_to_movie") == {"M2"}
    assert follow_path(nb, "M", "movie_to_director_to_movie_to_genre") == {"Comedy"}
    trace: list[set[str]] = []
    assert follow_path(nb, "D", "director_to_movie_to_genre", trace=trace) == {"Drama", "Comedy"}
    assert trace == [{"M", "M2"}, {"Drama", "Comedy"}]


# ---------------------------------------------------------------------------------------- demo KG
def _demo_kb() -> dict[tuple[str, str], set[str]]:
    adj: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
    for t in open_source(DEMO / "kb.txt", "hrt", strict=True):
        adj[(t.head, t.relation)].add(t.tail)
        adj[(t.tail, t.relation)].add(t.head)
    return adj


def test_demo_files() -> None:
    kb = DEMO / "kb.txt"
    assert kb.stat().st_size <= 2_000_000
    n = sum(1 for _ in open_source(kb, strict=True))
    assert n == len(kb.read_text(encoding="utf-8").splitlines()) > 10_000
    text = (DEMO / "ATTRIBUTION.md").read_text(encoding="utf-8")
    assert "CC BY 3.0" in text and "Zhang" in text and "AAAI 2018" in text


def test_demo_questions_have_their_answers_in_the_demo_kg() -> None:
    adj = _demo_kb()
    relations = {r for (_, r) in adj}
    questions = [json.loads(line) for line in (DEMO / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert collections.Counter(q["hops"] for q in questions) == {1: 20, 2: 20, 3: 20}
    for q in questions:
        assert set(q) >= {"question", "topic", "hops", "qtype", "answers", "pattern"}
        assert f"[{q['topic']}]" in q["question"]
        assert hops(q["qtype"]) == q["hops"]
        answers = follow_path(lambda e, r: adj.get((e, r), set()), q["topic"], q["qtype"])
        assert answers and sorted(answers) == q["answers"], q["question"]
        assert q["pattern"] == gold_pattern(q["qtype"], q["topic"])
        assert {t[1] for t in q["pattern"]["triples"]} <= relations


def test_demo_generator_questions_are_answerable_in_the_demo_kg() -> None:
    """The questions `isorag demo` trains the demo's pattern generator on: MetaQA dev questions (not the 60 demo
    ones) whose path reaches some of their answers in the demo KG, with their gold patterns."""
    adj = _demo_kb()
    demo = {json.loads(x)["source"] for x in (DEMO / "questions.jsonl").read_text(encoding="utf-8").splitlines()}
    rows = [json.loads(x) for x in (DEMO / "generator_questions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert collections.Counter(q["hops"] for q in rows) == {1: 400, 2: 400, 3: 400}
    assert not demo & {q["source"] for q in rows}
    for q in rows[::20]:
        assert f"[{q['topic']}]" in q["question"] and q["pattern"] == gold_pattern(q["qtype"], q["topic"])
        reached = follow_path(lambda e, r: adj.get((e, r), set()), q["topic"], q["qtype"])
        assert q["answers"] and set(q["answers"]) <= reached, q["question"]
