"""Guards on the matcher (engine.retrieval.matcher) against the real local Neo4j, each a mistake no other test caught:
self-loops and direction, disconnected patterns, the narrowing of conjunctions. The plan's bound:
tests/unit/test_guards_matching.py."""

from __future__ import annotations

import itertools
import time
from typing import Any, Iterator

import pytest

from engine._config import MatchSettings
from engine.retrieval.matcher import Candidates, Matcher, SearchStats, make_plan
from engine.retrieval.oracle import oracle_matches
from engine.retrieval.pattern import Pattern
from loaders._model import TripleRecord

from helpers.kg import unique_kg


def _records(kg: str) -> list[Any]:
    from engine.stores.graph import entity_id

    recs: list[Any] = []
    # conjunction: Film 25..29 starred Ann Lee and were directed by Bo Chan
    recs += [TripleRecord(f"Film {i}", "starred_actors", "Ann Lee", i) for i in range(30)]
    recs += [TripleRecord(f"Film {i}", "directed_by", "Bo Chan", 100 + i) for i in range(25, 40)]
    # disconnected patterns
    recs += [TripleRecord("Ada", "knows", "Bob", 200), TripleRecord("Ada", "knows", "Dee", 201),
             TripleRecord("Cy", "knows", "Bob", 202), TripleRecord("Bob", "knows", "Eve", 203)]
    # self-loop: Solo likes Solo; Fan likes Solo; Solo likes two others whose ids sort before Solo's (so that
    # the direction, not the id, must put the self-loop first)
    solo = entity_id(kg, "Solo")
    others = list(itertools.islice((f"Other {i}" for i in range(10**6) if entity_id(kg, f"Other {i}") < solo), 2))
    recs += [TripleRecord("Solo", "likes", "Solo", 300), TripleRecord("Fan", "likes", "Solo", 301)]
    recs += [TripleRecord("Solo", "likes", o, 302 + j) for j, o in enumerate(others)]
    # two pairs, each joined both ways (a 2-cycle), for hand-set candidate distances
    recs += [TripleRecord("Pair A1", "pairs", "Pair B1", 400), TripleRecord("Pair B1", "pairs", "Pair A1", 401),
             TripleRecord("Pair A2", "pairs", "Pair B2", 402), TripleRecord("Pair B2", "pairs", "Pair A2", 403)]
    return recs


@pytest.fixture(scope="module")
def eng(neo4j_uri: str, milvus_uri: str, embedder: Any) -> Iterator[Any]:
    """Like helpers.kg.shared_kg, but the records depend on the KG's name (entity ids hash it)."""
    from engine._config import EngineConfig, MilvusSettings, Neo4jSettings
    from engine._engine import Engine
    from loaders.bulk import BulkLoader, LoadSummary

    kg = unique_kg("guardm")
    e = Engine(EngineConfig(kg=kg, neo4j=Neo4jSettings(uri=neo4j_uri), milvus=MilvusSettings(uri=milvus_uri)),
               llm=False, embedder=embedder)
    try:
        BulkLoader(e.graph, e.vectors, embedder, progress=False).load_records(_records(kg), LoadSummary())
        yield e
    finally:
        e.drop()
        e.close()


def _eids(eng: Any, pattern: dict[str, Any], node: str) -> dict[str, int]:
    res = eng.retrieve(pattern, k=200, k_node=1, k_rel=1, narrow=False)
    return {s.mapping[node].name: s.mapping[node].eid for s in res.subgraphs}


# -- self-loops and the direction tie-break -----------------------------------------------------------------


def test_a_self_loop_is_never_walked_against_the_pattern(eng: Any) -> None:
    pat = Pattern.from_triples([("UNKNOWN 1", "likes", "Solo")])
    ms = MatchSettings(k_node=1, k_rel=1, k=10, injective="none")
    cands = eng.retriever.candidates(pat, ms, {})
    got, _ = Matcher(eng.graph, ms).top_k(pat, cands)
    by_name = {}
    rows = eng.graph.entities([m.nodes["UNKNOWN 1"] for m in got])
    for m in got:
        by_name[rows[m.nodes["UNKNOWN 1"]]["name"]] = m
    others = [n for n in by_name if n.startswith("Other ")]
    assert set(by_name) == {"Solo", "Fan", *others} and len(others) == 2
    loop = by_name["Solo"]
    assert loop.edges[0].start == loop.edges[0].end and loop.reversed == 0
    assert by_name["Fan"].reversed == 0
    assert all(by_name[n].reversed == 1 for n in others)
    # the precondition that makes the order below mean something: the others' ids sort before Solo's
    solo_eid = loop.nodes["Solo"]
    assert all(by_name[n].nodes["UNKNOWN 1"] < solo_eid for n in others)
    # equal GSD: the two matches along the pattern's direction come first, the self-loop among them
    res = eng.retrieve(pat, k=10, k_node=1, k_rel=1, injective="none")
    assert [s.gsd for s in res.subgraphs] == [0.0] * 4
    assert {s.mapping["UNKNOWN 1"].name for s in res.subgraphs[:2]} == {"Solo", "Fan"}
    # in directed mode the self-loop still matches (it runs both ways) and nothing counts as reversed
    dms = MatchSettings(k_node=1, k_rel=1, k=10, injective="none", directed=True)
    dgot, _ = Matcher(eng.graph, dms).top_k(pat, cands)
    assert len(dgot) == 2 and all(m.reversed == 0 for m in dgot)


def test_a_self_loop_reached_from_the_candidates_side_matches_either_direction(eng: Any,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Directed: ``solo -likes-> Solo`` walked from Solo is an incoming edge; the self-loop is one, whichever side
    the expansion reads it from."""
    import engine.retrieval.matcher as matching

    pat = {"triples": [["solo", "likes", "Solo"], ["Fan", "likes", "Solo"]]}  # "solo" embeds as "Solo"
    kw: dict[str, Any] = {"k": 5, "k_node": 1, "k_rel": 1, "injective": "none", "directed": True,
                          "graph": "expand"}  # the hub handling of the expansion path
    usual = eng.retrieve(pat, **kw)
    monkeypatch.setattr(matching, "DENSE_DEGREE", 0)  # every source a hub ...
    monkeypatch.setattr(matching, "CANDIDATE_SIDE_RATIO", 1e9)  # ... always read from its candidates' side
    hub = eng.retrieve(pat, **kw)
    assert usual.stats["from_candidates"] == 0 and hub.stats["from_candidates"] >= 1
    for res in (usual, hub):
        assert [sorted((n, e.name) for n, e in s.mapping.items()) for s in res.subgraphs] \
            == [[("Fan", "Fan"), ("Solo", "Solo"), ("solo", "Solo")]]
        assert sorted(t.as_tuple() for t in res.subgraphs[0].triples) == [("Fan", "likes", "Solo"),
                                                                          ("Solo", "likes", "Solo")]


# -- exact order on a cycle whose closing node has a distance ------------------------------------------------


def test_cycle_closing_on_a_distant_root_keeps_the_exact_order(eng: Any) -> None:
    """A 2-cycle ``Ann -pairs- Bo -pairs- Ann`` closes on the root Ann, whose candidates are all at least 0.1 away.
    Counting that 0.1 again at the closing step would let a batch finish the 0.55 match before the 0.5 one."""
    a1 = _eids(eng, {"triples": [["Pair A1", "pairs", "UNKNOWN 1"]]}, "Pair A1")["Pair A1"]
    a2 = _eids(eng, {"triples": [["Pair A2", "pairs", "UNKNOWN 1"]]}, "Pair A2")["Pair A2"]
    b1 = _eids(eng, {"triples": [["Pair A1", "pairs", "UNKNOWN 1"]]}, "UNKNOWN 1")["Pair B1"]
    b2 = _eids(eng, {"triples": [["Pair A2", "pairs", "UNKNOWN 1"]]}, "UNKNOWN 1")["Pair B2"]
    pat = Pattern.from_triples([("Ann", "pairs", "Bo"), ("Bo", "pairs", "Ann")])
    real = eng.retriever.candidates(Pattern.from_triples([("Pair A1", "pairs", "Pair B1")]), MatchSettings(), {})
    cands = Candidates({"Ann": {a2: 0.1, a1: 0.5}, "Bo": {b1: 0.0, b2: 0.45}}, {0: {"pairs": 0.0}, 1: {"pairs": 0.0}},
                       real.type_names)
    assert make_plan(pat, cands).root == "Ann" and make_plan(pat, cands).steps[-1].closes
    got, _ = Matcher(eng.graph, MatchSettings(k=4)).top_k(pat, cands, 4)
    assert [round(m.gsd, 9) for m in got] == [0.5, 0.5, 0.55, 0.55]
    assert [m.nodes["Ann"] for m in got] == [a1, a1, a2, a2]
    want = oracle_matches(eng.graph, pat, cands)
    assert [round(m.gsd, 9) for m in want] == [0.5, 0.5, 0.55, 0.55]


# -- disconnected patterns ----------------------------------------------------------------------------------


def _pairs(res: Any) -> list[tuple[str, str]]:
    return sorted((s.mapping["UNKNOWN 1"].name, s.mapping["UNKNOWN 2"].name) for s in res.subgraphs)


def test_parts_of_a_disconnected_pattern_bind_distinct_nodes(eng: Any) -> None:
    pat = {"triples": [["Ada", "knows", "UNKNOWN 1"], ["Cy", "knows", "UNKNOWN 2"]]}
    assert _pairs(eng.retrieve(pat, k=10, k_node=1, k_rel=1)) == [("Dee", "Bob")]
    assert _pairs(eng.retrieve(pat, k=10, k_node=1, k_rel=1, injective="edges")) == [("Bob", "Bob"), ("Dee", "Bob")]
    assert _pairs(eng.retrieve(pat, k=10, k_node=1, k_rel=1, injective="none")) == [("Bob", "Bob"), ("Dee", "Bob")]


def test_parts_of_a_disconnected_pattern_bind_distinct_relationships(eng: Any) -> None:
    # "Ada" and "ada" are two pattern nodes that embed alike (an uncased model): both bind the entity Ada
    pat = {"triples": [["Ada", "knows", "UNKNOWN 1"], ["ada", "knows", "UNKNOWN 2"]]}
    edges = eng.retrieve(pat, k=10, k_node=1, k_rel=1, injective="edges")
    assert _pairs(edges) == [("Bob", "Dee"), ("Dee", "Bob")]
    for s in edges.subgraphs:
        assert s.mapping["Ada"].eid == s.mapping["ada"].eid
        assert len({(t.head.eid, t.relation, t.tail.eid) for t in s.triples}) == 2
    assert eng.retrieve(pat, k=10, k_node=1, k_rel=1).subgraphs == []  # nodes: Ada twice
    assert _pairs(eng.retrieve(pat, k=10, k_node=1, k_rel=1, injective="none")) \
        == [("Bob", "Bob"), ("Bob", "Dee"), ("Dee", "Bob"), ("Dee", "Dee")]


def test_parts_of_a_disconnected_pattern_keep_unknowns_off_the_named_entities(eng: Any) -> None:
    """Edges mode: an unknown of one part may not bind a named entity of another part."""
    pat = {"triples": [["Ada", "knows", "UNKNOWN 1"], ["Bob", "knows", "UNKNOWN 2"]]}
    want = [("Dee", "Cy"), ("Dee", "Eve")]
    assert _pairs(eng.retrieve(pat, k=10, k_node=1, k_rel=1, injective="edges")) == want
    assert _pairs(eng.retrieve(pat, k=10, k_node=1, k_rel=1)) == want
    none = _pairs(eng.retrieve(pat, k=10, k_node=1, k_rel=1, injective="none"))
    assert ("Bob", "Ada") in none and ("Bob", "Eve") in none and len(none) == 6


# -- narrowing a conjunction ---------------------------------------------------------------------------------

CONJ = {"triples": [["UNKNOWN movie 1", "starred_actors", "Ann Lee"], ["UNKNOWN movie 1", "directed_by", "Bo Chan"]]}


def _narrow(eng: Any, cands: Candidates) -> tuple[Candidates, SearchStats]:
    stats = SearchStats()
    pat = Pattern.from_json(CONJ)
    out = Matcher(eng.graph, MatchSettings(k_node=1, k_rel=1))._narrow(pat, cands, time.monotonic() + 30, stats)
    return out, stats


def test_narrowing_keeps_the_intersection_of_the_neighbourhoods(eng: Any) -> None:
    films = _eids(eng, {"triples": [["UNKNOWN movie 1", "starred_actors", "Ann Lee"]]}, "UNKNOWN movie 1")
    films.update(_eids(eng, {"triples": [["UNKNOWN movie 1", "directed_by", "Bo Chan"]]}, "UNKNOWN movie 1"))
    assert len(films) == 40
    cands = eng.retriever.candidates(Pattern.from_json(CONJ), MatchSettings(k_node=1, k_rel=1), {})
    assert cands.nodes["UNKNOWN movie 1"] is None
    out, stats = _narrow(eng, cands)
    assert out.nodes["UNKNOWN movie 1"] == {films[f"Film {i}"]: 0.0 for i in range(25, 30)}
    assert stats.narrowed == {"UNKNOWN movie 1": 5} and stats.queries == 1
    assert out.nodes["Ann Lee"] == cands.nodes["Ann Lee"] and out.relations == cands.relations
    # an unknown that already has candidates keeps those inside the domain, with their distances
    given = {films["Film 0"]: 0.3, films["Film 26"]: 0.2, films["Film 27"]: 0.1, films["Film 35"]: 0.4}
    typed = Candidates({**cands.nodes, "UNKNOWN movie 1": given}, cands.relations, cands.type_names)
    out, stats = _narrow(eng, typed)
    assert out.nodes["UNKNOWN movie 1"] == {films["Film 26"]: 0.2, films["Film 27"]: 0.1}
    assert stats.narrowed == {"UNKNOWN movie 1": 2}


def test_a_capped_neighbourhood_does_not_narrow(eng: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A neighbourhood that reaches DOMAIN_CAP may be cut short: it must constrain nothing (exactness)."""
    import engine.retrieval.matcher as matching

    cands = eng.retriever.candidates(Pattern.from_json(CONJ), MatchSettings(k_node=1, k_rel=1), {})
    monkeypatch.setattr(matching, "DOMAIN_CAP", 15)  # Bo Chan directed exactly 15 films, Ann Lee starred in 30
    out, stats = _narrow(eng, cands)
    assert out.nodes["UNKNOWN movie 1"] is None and stats.narrowed == {}
    monkeypatch.setattr(matching, "DOMAIN_CAP", 16)  # Bo Chan's 15 narrow; Ann Lee's (capped) do not
    out, stats = _narrow(eng, cands)
    assert out.nodes["UNKNOWN movie 1"] is not None and len(out.nodes["UNKNOWN movie 1"]) == 15
    res = eng.retrieve(CONJ, k=10, k_node=1, k_rel=1)
    assert sorted(a.entity.name for a in res.answers) == [f"Film {i}" for i in range(25, 30)]
