"""Tests for engine.retrieval.verbalize."""

from __future__ import annotations

import ast
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.retrieval.verbalize import verbalize_scored, verbalize_subgraphs, verbalize_triple


def test_verbalize_triple():
    assert verbalize_triple(("Anastasia", "starred_actors", "Ingrid Bergman")) == (
        '("Anastasia", "starred_actors", "Ingrid Bergman")'
    )
    assert verbalize_triple(["a", "r", 1987]) == '("a", "r", "1987")'
    assert verbalize_triple(('Say "hi"', "r\nx", "Zürich")) == '("Say \\"hi\\"", "r\\nx", "Zürich")'
    with pytest.raises(ValueError, match="triple"):
        verbalize_triple(("a", "b"))
    with pytest.raises(ValueError):
        verbalize_triple("abc")


def test_verbalize_subgraphs_simgrag_format():
    subgraphs = [
        [
            ("Anastasia", "starred_actors", "Ingrid Bergman"),
            ("Spellbound", "starred_actors", "Ingrid Bergman"),
            ("Spellbound", "written_by", "Ben Hecht"),
        ],
        [("Anastasia", "starred_actors", "John Cusack")],
    ]
    assert verbalize_subgraphs(subgraphs) == (
        'graph [1]: [("Anastasia", "starred_actors", "Ingrid Bergman"), '
        '("Spellbound", "starred_actors", "Ingrid Bergman"), ("Spellbound", "written_by", "Ben Hecht")],\n'
        'graph [2]: [("Anastasia", "starred_actors", "John Cusack")]'
    )
    assert verbalize_subgraphs(subgraphs, separator=", ").count("\n") == 0
    assert verbalize_subgraphs([]) == ""
    assert verbalize_subgraphs([[]]) == "graph [1]: []"
    numbered = verbalize_subgraphs([[("a", "r", "b")]] * 12).splitlines()
    assert numbered[11].startswith("graph [12]: ")


def test_verbalize_scored_qsrag_format():
    rows = [
        ("San Francisco Giants", "sports.sports_team.team_mascot", "Lou Seal", 0.9999568462371826),
        ("Lou Seal", "sports.mascot.team", "San Francisco Giants", 0.9999743700027466),
        ("2014 World Series", "champion", "San Francisco Giants", 0.8941453695297241),
    ]
    assert verbalize_scored(rows).splitlines() == [
        '("Lou Seal", "sports.mascot.team", "San Francisco Giants") [confidence: 0.9999743700027466]',
        '("San Francisco Giants", "sports.sports_team.team_mascot", "Lou Seal") [confidence: 0.9999568462371826]',
        '("2014 World Series", "champion", "San Francisco Giants") [confidence: 0.8941453695297241]',
    ]
    assert verbalize_scored([("h", "r", "t", 0.93)]) == '("h", "r", "t") [confidence: 0.93]'
    assert verbalize_scored(rows, precision=2).splitlines()[2].endswith("[confidence: 0.89]")
    assert len(verbalize_scored(rows, limit=2).splitlines()) == 2
    assert verbalize_scored(rows, limit=0) == ""
    assert verbalize_scored([]) == ""


def test_verbalize_scored_ties_nan_and_types():
    rows = [("a", "r", "1", 0.5), ("b", "r", "2", math.nan), ("c", "r", "3", 0.5), ("d", "r", "4", 1)]
    lines = verbalize_scored(rows).splitlines()
    assert [line[2] for line in lines] == ["d", "a", "c", "b"]
    assert lines[0].endswith("[confidence: 1.0]")
    assert lines[3].endswith("[confidence: nan]")


def test_verbalize_scored_errors():
    with pytest.raises(ValueError, match="score"):
        verbalize_scored([("h", "r", "t")])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        verbalize_scored([("h", "r", "t", 0.1)], precision=-1)
    with pytest.raises(ValueError):
        verbalize_scored([("h", "r", "t", 0.1)], limit=-1)


_s = st.text(max_size=15)


@given(st.lists(st.lists(st.tuples(_s, _s, _s), max_size=4), max_size=4))
def test_property_subgraphs_read_back_as_python(subgraphs):
    text = verbalize_subgraphs(subgraphs)
    lines = text.splitlines() if subgraphs else []
    # every newline inside a name is escaped, so there is exactly one line per graph
    assert len(lines) == len(subgraphs)
    for i, (line, subgraph) in enumerate(zip(lines, subgraphs), start=1):
        prefix = f"graph [{i}]: "
        assert line.startswith(prefix)
        body = line[len(prefix):].rstrip(",")
        assert [tuple(t) for t in ast.literal_eval(body)] == [tuple(t) for t in subgraph]


@given(st.lists(st.tuples(_s, _s, _s, st.floats(0, 1)), max_size=10))
def test_property_scored_sorted(rows):
    lines = verbalize_scored(rows).splitlines() if rows else []
    assert len(lines) == len(rows)
    scores = [float(line.rsplit("[confidence: ", 1)[1][:-1]) for line in lines]
    assert scores == sorted(scores, reverse=True)
    assert sorted(scores) == sorted(r[3] for r in rows)
