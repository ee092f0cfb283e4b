"""Guards on result assembly (engine.retrieval.retriever) on hand-made matches, each a mistake no other test caught: an
answer's GSD, the bindings of every unknown, ``exact``, names, relation names, candidate limits. Candidates, the degree
cap and the answer rule against the real local Neo4j and Milvus: tests/integration/test_guards_retrieval.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine._config import MatchSettings
from engine._errors import ConfigError
from engine.retrieval.matcher import Candidates, KGEdge, Match, SearchStats
from engine.retrieval.pattern import Pattern
from engine.retrieval.retriever import Retriever


class _Rows:
    """The one GraphStore method result assembly reads: entity rows by eid."""

    def __init__(self, rows: dict[int, dict[str, Any]]) -> None:
        self.rows = rows

    def entities(self, eids: Any) -> dict[int, dict[str, Any]]:
        return {e: self.rows[e] for e in eids if e in self.rows}


def _names(names: dict[int, str]) -> _Rows:
    return _Rows({e: {"eid": e, "name": n, "key": f"k{e}"} for e, n in names.items()})


NAMES = {1: "Heat", 2: "Michael Mann", 3: "Dean Jones", 4: "Thief", 5: "Ali"}


def _assemble(pattern: Pattern, matches: list[Match], stats: SearchStats | None = None) -> Any:
    cands = Candidates({n: None for n in pattern.nodes}, {e.index: {"r": 0.0} for e in pattern.edges}, {"r": "r"})
    return Retriever(_names(NAMES), None, None, MatchSettings()).build_result(
        pattern, matches, cands, stats or SearchStats())


# ---------------------------------------------------------------------------------------------------------
# an answer's GSD: the smallest among the subgraphs that bind it
# ---------------------------------------------------------------------------------------------------------


def test_answer_keeps_the_gsd_of_its_best_subgraph() -> None:
    pat = Pattern.from_triples([("Heat", "directed_by", "UNKNOWN person 1")])
    ms = [Match(0.10, {"Heat": 1, "UNKNOWN person 1": 2}, {0: KGEdge(1, "r", 2)}),
          Match(0.30, {"Heat": 4, "UNKNOWN person 1": 3}, {0: KGEdge(4, "r", 3)}),
          Match(0.50, {"Heat": 5, "UNKNOWN person 1": 2}, {0: KGEdge(5, "r", 2)}),
          Match(0.70, {"Heat": 1, "UNKNOWN person 1": 3}, {0: KGEdge(1, "r", 3)})]
    res = _assemble(pat, ms)
    assert [(a.entity.name, a.gsd) for a in res.answers] == [("Michael Mann", 0.10), ("Dean Jones", 0.30)]
    assert [(a.entity.eid, a.gsd, a.node) for a in res.bindings["UNKNOWN person 1"]] \
        == [(2, 0.10, "UNKNOWN person 1"), (3, 0.30, "UNKNOWN person 1")]
    # every subgraph stays evidence, with its own GSD
    assert [s.gsd for s in res.subgraphs] == [0.10, 0.30, 0.50, 0.70]


def test_every_unknown_gets_its_best_bindings_and_the_answer_is_the_highest_numbered() -> None:
    pat = Pattern.from_triples([("Heat", "r", "UNKNOWN person 2"), ("UNKNOWN person 2", "r", "UNKNOWN film 1")])
    def match(gsd: float, person: int, film: int) -> Match:
        return Match(gsd, {"Heat": 1, "UNKNOWN person 2": person, "UNKNOWN film 1": film},
                     {0: KGEdge(1, "r", person), 1: KGEdge(person, "r", film)})

    ms = [match(0.2, 2, 4), match(0.4, 3, 4), match(0.6, 2, 5)]
    res = _assemble(pat, ms)
    assert pat.answer_node() == "UNKNOWN person 2"
    assert [(a.entity.eid, a.gsd) for a in res.answers] == [(2, 0.2), (3, 0.4)]
    assert [(a.entity.eid, a.gsd) for a in res.bindings["UNKNOWN film 1"]] == [(4, 0.2), (5, 0.6)]
    # triples in the KG's direction, with names, in pattern-edge order
    assert [t.as_tuple() + (t.pattern_edge,) for t in res.subgraphs[1].triples] \
        == [("Heat", "r", "Dean Jones", 0), ("Dean Jones", "r", "Thief", 1)]


# ---------------------------------------------------------------------------------------------------------
# exact: false whenever the search was cut
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("truncated, deadline_hit, exact", [(0, False, True), (1, False, False), (3, False, False),
                                                            (0, True, False), (2, True, False)])
def test_exact_is_false_exactly_when_the_search_was_cut(truncated: int, deadline_hit: bool, exact: bool) -> None:
    pat = Pattern.from_triples([("Heat", "directed_by", "UNKNOWN person 1")])
    stats = SearchStats(truncated=truncated, deadline_hit=deadline_hit, warnings=["w"] if not exact else [])
    res = _assemble(pat, [Match(0.1, {"Heat": 1, "UNKNOWN person 1": 2}, {0: KGEdge(1, "r", 2)})], stats)
    assert res.exact is exact
    assert res.to_dict()["exact"] is exact
    assert res.stats["truncated"] == truncated and res.stats["deadline_hit"] is deadline_hit


# ---------------------------------------------------------------------------------------------------------
# the answer rule: an unknown bound to a named entity of the pattern restates the question
# ---------------------------------------------------------------------------------------------------------


def test_answer_equal_to_a_named_entity_is_dropped_but_its_subgraph_stays() -> None:
    """PathQuestion (docs/benchmarks.md): with homomorphic matching, ``X parents Y children X`` binds the topic again;
    the answer rule drops that answer as restating the question (the chosen behaviour), keeps the others, and
    keeps the subgraph as evidence."""
    pat = Pattern.from_triples([("Heat", "r", "UNKNOWN 1"), ("UNKNOWN 1", "r", "UNKNOWN 2")])
    ms = [Match(0.0, {"Heat": 1, "UNKNOWN 1": 2, "UNKNOWN 2": 1}, {0: KGEdge(1, "r", 2), 1: KGEdge(2, "r", 1)}),
          Match(0.1, {"Heat": 1, "UNKNOWN 1": 2, "UNKNOWN 2": 4}, {0: KGEdge(1, "r", 2), 1: KGEdge(2, "r", 4)})]
    res = _assemble(pat, ms)
    assert [a.entity.eid for a in res.answers] == [4]
    assert res.answers[0].gsd == 0.1
    assert [a.entity.eid for a in res.bindings["UNKNOWN 1"]] == [2]
    assert len(res.subgraphs) == 2 and res.subgraphs[0].mapping["UNKNOWN 2"].name == "Heat"


# ---------------------------------------------------------------------------------------------------------
# what a result shows: names, keys, the relation's own name
# ---------------------------------------------------------------------------------------------------------


def test_entities_show_their_name_else_their_key_else_their_id() -> None:
    rows = {1: {"eid": 1, "name": "Heat", "key": "m/0abc"}, 2: {"eid": 2, "name": None, "key": "m/0def"},
            3: {"eid": 3, "name": "", "key": "m/0ghi"}}  # 4: not in the graph any more
    pat = Pattern.from_triples([("Heat", "r", "UNKNOWN 1"), ("UNKNOWN 1", "r", "UNKNOWN 2"),
                                ("UNKNOWN 2", "r", "UNKNOWN 3")])
    m = Match(0.0, {"Heat": 1, "UNKNOWN 1": 2, "UNKNOWN 2": 3, "UNKNOWN 3": 4},
              {0: KGEdge(1, "r", 2), 1: KGEdge(2, "r", 3), 2: KGEdge(4, "r", 3)})
    cands = Candidates({n: None for n in pat.nodes}, {i: {"r": 0.0} for i in range(3)}, {"r": "r"})
    res = Retriever(_Rows(rows), None, None, MatchSettings()).build_result(pat, [m], cands, SearchStats())
    got = {n: (e.eid, e.name, e.key) for n, e in res.subgraphs[0].mapping.items()}
    assert got == {"Heat": (1, "Heat", "m/0abc"), "UNKNOWN 1": (2, "m/0def", "m/0def"),
                   "UNKNOWN 2": (3, "m/0ghi", "m/0ghi"), "UNKNOWN 3": (4, "4", "")}
    assert [t.as_tuple() for t in res.subgraphs[0].triples] == [("Heat", "r", "m/0def"), ("m/0def", "r", "m/0ghi"),
                                                               ("4", "r", "m/0ghi")]
    assert res.answers[0].to_dict() == {"eid": 4, "name": "4", "key": "", "gsd": 0.0, "node": "UNKNOWN 3"}


def test_triples_carry_the_relation_name_not_the_relationship_type() -> None:
    pat = Pattern.from_triples([("Heat", "directed by", "UNKNOWN 1")])
    cands = Candidates({n: None for n in pat.nodes}, {0: {"directed_by__1a2b3c": 0.0}},
                       {"directed_by__1a2b3c": "directed by", "starred": "starred"})
    m = Match(0.0, {"Heat": 1, "UNKNOWN 1": 2}, {0: KGEdge(1, "directed_by__1a2b3c", 2)})
    res = Retriever(_names(NAMES), None, None, MatchSettings()).build_result(pat, [m], cands, SearchStats())
    assert res.subgraphs[0].triples[0].as_tuple() == ("Heat", "directed by", "Michael Mann")
    assert res.to_dict()["subgraphs"][0]["triples"][0]["relation"] == "directed by"


@pytest.mark.parametrize("name", ["k_node", "k_rel", "k_type"])
def test_candidate_counts_up_to_the_milvus_topk_limit(name: str) -> None:
    assert getattr(MatchSettings(**{name: 16384}), name) == 16384
    assert getattr(MatchSettings(**{name: 1}), name) == 1
    for bad in (16385, 0, -1):
        with pytest.raises(ConfigError, match=name):
            MatchSettings(**{name: bad})
