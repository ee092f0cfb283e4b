"""Guards on result assembly and candidates (engine.retrieval; TEST-GAPS.md).

Result assembly is tested on hand-made matches (no servers); candidates, the degree cap and the answer rule
against the real local Neo4j and Milvus.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import numpy as np
import pytest

from engine._config import MatchSettings
from engine._errors import ConfigError
from engine.matching import Candidates, KGEdge, Match, SearchStats
from engine.pattern import Pattern
from engine.retrieval import Retriever
from loaders._model import EntityRecord, Triple
from loaders.bulk import BulkLoader, LoadSummary

from helpers.kg import shared_kg


class _Rows:
    """The one GraphStore method result assembly reads: entity rows by eid."""

    def __init__(self, rows: dict[int, dict[str, Any]]) -> None:
        self.rows = rows

    def entities(self, eids: Any) -> dict[int, dict[str, Any]]:
        return {e: self.rows[e] for e in eids if e in self.rows}


def _Names(names: dict[int, str]) -> _Rows:
    return _Rows({e: {"eid": e, "name": n, "key": f"k{e}"} for e, n in names.items()})


NAMES = {1: "Heat", 2: "Michael Mann", 3: "Dean Jones", 4: "Thief", 5: "Ali"}


def _assemble(pattern: Pattern, matches: list[Match], stats: SearchStats | None = None) -> Any:
    cands = Candidates({n: None for n in pattern.nodes}, {e.index: {"r": 0.0} for e in pattern.edges}, {"r": "r"})
    return Retriever(_Names(NAMES), None, None, MatchSettings()).build_result(
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
    ms = [Match(0.2, {"Heat": 1, "UNKNOWN person 2": 2, "UNKNOWN film 1": 4}, {0: KGEdge(1, "r", 2), 1: KGEdge(2, "r", 4)}),
          Match(0.4, {"Heat": 1, "UNKNOWN person 2": 3, "UNKNOWN film 1": 4}, {0: KGEdge(1, "r", 3), 1: KGEdge(3, "r", 4)}),
          Match(0.6, {"Heat": 1, "UNKNOWN person 2": 2, "UNKNOWN film 1": 5}, {0: KGEdge(1, "r", 2), 1: KGEdge(2, "r", 5)})]
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
    """DESIGN §10 (PathQuestion): with homomorphic matching, ``X parents Y children X`` binds the topic again; the
    answer rule drops that answer as restating the question (the chosen behaviour), keeps the others, and
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
    pat = Pattern.from_triples([("Heat", "r", "UNKNOWN 1"), ("UNKNOWN 1", "r", "UNKNOWN 2"), ("UNKNOWN 2", "r", "UNKNOWN 3")])
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
    res = Retriever(_Names(NAMES), None, None, MatchSettings()).build_result(pat, [m], cands, SearchStats())
    assert res.subgraphs[0].triples[0].as_tuple() == ("Heat", "directed by", "Michael Mann")
    assert res.to_dict()["subgraphs"][0]["triples"][0]["relation"] == "directed by"


@pytest.mark.parametrize("name", ["k_node", "k_rel", "k_type"])
def test_candidate_counts_up_to_the_milvus_topk_limit(name: str) -> None:
    assert getattr(MatchSettings(**{name: 16384}), name) == 16384
    assert getattr(MatchSettings(**{name: 1}), name) == 1
    for bad in (16385, 0, -1):
        with pytest.raises(ConfigError, match=name):
            MatchSettings(**{name: bad})


# ---------------------------------------------------------------------------------------------------------
# against the real stores
# ---------------------------------------------------------------------------------------------------------

FILMS = ["Heat", "Thief", "Collateral", "Ali", "Manhunter", "Blackhat", "Public Enemies"]
RELS = ["directed_by", "written_by", "starred_actors", "release_year", "in_language", "has_genre", "has_tags"]


def _records() -> list[Any]:
    recs: list[Any] = []
    for i, film in enumerate(FILMS):
        recs.append(Triple(film, "directed_by", "Michael Mann", 10 * i))
        recs.append(Triple(film, RELS[1 + i % (len(RELS) - 1)], f"Person {i}", 10 * i + 1))
    # a hub for the degree cap: exactly five neighbours, each through an unknown relation
    recs += [Triple("Hub Studio", RELS[j], f"Spoke {j}", 100 + j) for j in range(5)]
    # ... and each spoke exactly three (the hub and two leaves)
    recs += [Triple(f"Spoke {j}", "has_tags", f"Leaf {j}{c}", 110 + 2 * j + i) for j in range(5) for i, c in enumerate("ab")]
    # the answer rule (homomorphic matching): Ann's child's parent is Ann again, or Bo
    recs += [Triple("Ann Lee", "children", "Cal Lee", 200), Triple("Bo Lee", "children", "Cal Lee", 201)]
    # entity types: films, persons, one city
    recs += [EntityRecord(f, None, ("film",), 300 + i) for i, f in enumerate(FILMS)]
    recs += [EntityRecord(p, None, ("person",), 320 + i) for i, p in enumerate(PERSONS)]
    recs += [EntityRecord("Michael Mann", None, ("person", "director"), 330), EntityRecord("Chicago", None, ("city",), 331)]
    return recs


PERSONS = [f"Person {i}" for i in range(len(FILMS))]


@pytest.fixture(scope="module")
def kg(neo4j_uri: str, milvus_uri: str, embedder: Any) -> Iterator[Callable[..., Any]]:
    yield from shared_kg("guardr", _records(), neo4j_uri, milvus_uri, embedder)


@pytest.mark.integration
@pytest.mark.parametrize("local_relations", [True, False])
def test_named_node_gets_k_node_candidates_and_relation_k_rel(kg: Callable[..., Any], local_relations: bool,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.retrieval as retrieval

    if not local_relations:  # relation candidates from Milvus instead of the in-process matrix
        monkeypatch.setattr(retrieval, "LOCAL_RELATION_LIMIT", 0)
    eng = kg()
    pat = Pattern.from_triples([("Heat", "directed_by", "UNKNOWN person 1"), ("Heat", "UNKNOWN relation 1", "Thief")])
    for k_node, k_rel in ((5, 2), (2, 5), (1, 3)):
        cands = eng.retriever.candidates(pat, MatchSettings(k_node=k_node, k_rel=k_rel), {})
        assert len(cands.nodes["Heat"]) == k_node and len(cands.nodes["Thief"]) == k_node
        assert cands.nodes["UNKNOWN person 1"] is None
        assert len(cands.relations[0]) == k_rel
        assert "directed_by" in cands.relations[0]
        assert set(cands.relations[1]) == set(cands.type_names) and set(cands.relations[1].values()) == {0.0}
    # k_rel beyond the catalog: the whole catalog
    cands = eng.retriever.candidates(pat, MatchSettings(k_node=3, k_rel=50), {})
    assert len(cands.relations[0]) == len(cands.type_names) == len(RELS) + 1  # + "children"
    assert len(cands.nodes["Heat"]) == 3


@pytest.mark.integration
@pytest.mark.parametrize("local_relations", [True, False])
def test_candidate_distances_are_euclidean_between_the_embeddings(kg: Callable[..., Any], embedder: Any,
                                                                  local_relations: bool,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.retrieval as retrieval

    if not local_relations:
        monkeypatch.setattr(retrieval, "LOCAL_RELATION_LIMIT", 0)
    eng = kg()
    pat = Pattern.from_triples([("Heat 1995 film", "directed by", "UNKNOWN person 1")])
    cands = eng.retriever.candidates(pat, MatchSettings(k_node=6, k_rel=4), {})
    node = cands.nodes["Heat 1995 film"]
    rows = eng.graph.entities(list(node))
    names = [rows[e]["name"] for e in node]
    q = embedder.encode(["Heat 1995 film"])[0]
    want = np.linalg.norm(embedder.encode(names) - q[None, :], axis=1)
    got = np.array([node[e] for e in node])
    assert np.allclose(got, want, atol=2e-4), (names, got, want)
    # the nearest entities, nearest first: the six closest names of the KG
    all_names = sorted({n for r in _records() for n in ((r.head, r.tail) if isinstance(r, Triple) else (r.key,))})
    dist_all = np.linalg.norm(embedder.encode(all_names) - q[None, :], axis=1)
    assert sorted(names) == sorted(all_names[i] for i in np.argsort(dist_all)[:6])
    assert (got > 0.05).all()  # none is a copy of the query: a wrong distance formula shows
    rel = cands.relations[0]
    type_names = [cands.type_names[t] for t in rel]
    qr = embedder.encode(["directed by"])[0]
    want_r = np.linalg.norm(embedder.encode(type_names) - qr[None, :], axis=1)
    assert np.allclose([rel[t] for t in rel], want_r, atol=2e-4), (type_names, rel, want_r)
    assert min(rel, key=rel.get) == "directed_by"


@pytest.mark.integration
def test_degree_cap_reached_exactly_truncates_nothing(kg: Callable[..., Any]) -> None:
    eng = kg()
    pat = {"triples": [["Hub Studio", "UNKNOWN relation 1", "UNKNOWN 1"]]}
    at = eng.retrieve(pat, k=20, k_node=1, degree_cap=5)
    assert sorted(s.mapping["UNKNOWN 1"].name for s in at.subgraphs) == [f"Spoke {j}" for j in range(5)]
    assert at.exact and at.warnings == [] and at.stats["truncated"] == 0
    above = eng.retrieve(pat, k=20, k_node=1, degree_cap=6)
    assert len(above.subgraphs) == 5 and above.exact and above.warnings == []


@pytest.mark.integration
def test_degree_cap_below_the_degree_truncates_warns_and_is_not_exact(kg: Callable[..., Any]) -> None:
    eng = kg()
    pat = {"triples": [["Hub Studio", "UNKNOWN relation 1", "UNKNOWN 1"]]}
    cut = eng.retrieve(pat, k=20, k_node=1, degree_cap=4)
    assert len(cut.subgraphs) == 4
    assert not cut.exact and cut.stats["truncated"] == 1 and not cut.stats["deadline_hit"]
    assert len(cut.warnings) == 1 and "degree cap 4" in cut.warnings[0]
    assert cut.to_dict()["exact"] is False


@pytest.mark.integration
def test_degree_cap_on_two_levels(kg: Callable[..., Any]) -> None:
    """The hub has five neighbours, each spoke three: one warning however many expansions were cut."""
    eng = kg()
    pat = {"triples": [["Hub Studio", "UNKNOWN relation 1", "UNKNOWN 1"], ["UNKNOWN 1", "UNKNOWN relation 2", "UNKNOWN 2"]]}
    full = eng.retrieve(pat, k=50, k_node=1, degree_cap=5)
    assert len(full.subgraphs) == 10 and full.exact and full.warnings == [] and full.stats["truncated"] == 0
    assert {s.mapping["UNKNOWN 2"].name for s in full.subgraphs} == {f"Leaf {j}{c}" for j in range(5) for c in "ab"}
    spokes_at_cap = eng.retrieve(pat, k=50, k_node=1, degree_cap=3)
    assert spokes_at_cap.stats["truncated"] == 1 and not spokes_at_cap.exact  # the hub only
    assert len(spokes_at_cap.subgraphs) == 6 and len(spokes_at_cap.warnings) == 1
    both = eng.retrieve(pat, k=50, k_node=1, degree_cap=2)
    assert both.stats["truncated"] == 3 and not both.exact  # the hub and the two spokes kept
    assert len(both.warnings) == 1 and "degree cap 2" in both.warnings[0]


@pytest.mark.integration
def test_homomorphic_answer_equal_to_the_topic_is_dropped(kg: Callable[..., Any]) -> None:
    """PathQuestion's ``X children Y parents Z``: with ``injective="none"`` Z may be X itself; that binding is a
    subgraph (evidence) but not an answer. Node-injective matching never binds it at all."""
    eng = kg()
    pat = {"triples": [["Ann Lee", "children", "UNKNOWN 1"], ["UNKNOWN parent 2", "children", "UNKNOWN 1"]]}
    none = eng.retrieve(pat, k=5, k_node=1, k_rel=1, injective="none")
    assert sorted(s.mapping["UNKNOWN parent 2"].name for s in none.subgraphs) == ["Ann Lee", "Bo Lee"]
    assert [a.entity.name for a in none.answers] == ["Bo Lee"]
    assert [a.entity.name for a in none.bindings["UNKNOWN 1"]] == ["Cal Lee"]
    nodes = eng.retrieve(pat, k=5, k_node=1, k_rel=1)
    assert [s.mapping["UNKNOWN parent 2"].name for s in nodes.subgraphs] == ["Bo Lee"]
    assert [a.entity.name for a in nodes.answers] == ["Bo Lee"]


@pytest.mark.integration
def test_typed_unknown_takes_the_entities_of_the_k_type_nearest_types(kg: Callable[..., Any]) -> None:
    eng = kg()
    pat = Pattern.from_triples([("UNKNOWN person 1", "directed_by", "UNKNOWN film 2")])

    def names(c: dict[int, float]) -> set[str]:
        assert set(c.values()) == {0.0}
        return {r["name"] for r in eng.graph.entities(list(c)).values()}

    one = eng.retriever.candidates(pat, MatchSettings(k_type=1, k_node=4), {})
    assert names(one.nodes["UNKNOWN person 1"]) == {*PERSONS, "Michael Mann"}
    assert names(one.nodes["UNKNOWN film 2"]) == set(FILMS)
    every = eng.retriever.candidates(pat, MatchSettings(k_type=4, k_node=1), {})
    assert names(every.nodes["UNKNOWN person 1"]) == {*PERSONS, "Michael Mann", *FILMS, "Chicago"}
    res = eng.retrieve(pat, k=20, k_type=1, k_node=4, k_rel=1)
    assert {s.mapping["UNKNOWN person 1"].name for s in res.subgraphs} == {"Michael Mann"}
    assert sorted(a.entity.name for a in res.bindings["UNKNOWN film 2"]) == sorted(FILMS)


@pytest.mark.integration
def test_typed_unknown_beside_a_named_node_stays_a_wildcard(kg: Callable[..., Any]) -> None:
    """Type candidates only where the component has no named node (as SimGRAG does): the type is a hint."""
    eng = kg()
    pat = Pattern.from_triples([("Heat", "directed_by", "UNKNOWN person 1"), ("UNKNOWN film 2", "has_tags", "UNKNOWN city 3")])
    cands = eng.retriever.candidates(pat, MatchSettings(k_type=1, k_node=2), {})
    assert cands.nodes["UNKNOWN person 1"] is None
    assert cands.nodes["UNKNOWN film 2"] is not None and cands.nodes["UNKNOWN city 3"] is not None
    assert len(cands.nodes["UNKNOWN city 3"]) == 1  # Chicago, the one city


@pytest.mark.integration
def test_timings_are_milliseconds_of_the_call(kg: Callable[..., Any]) -> None:
    eng = kg()
    pat = {"triples": [["Heat", "directed_by", "UNKNOWN person 1"]]}
    eng.retrieve(pat)  # warm
    t0 = time.perf_counter()
    res = eng.retrieve(pat, k_node=2, k_rel=2)
    wall_ms = (time.perf_counter() - t0) * 1000.0
    assert set(res.timings) >= {"embed", "vector", "graph", "total"}
    assert 0.5 * wall_ms <= res.timings["total"] <= wall_ms + 0.01
    assert res.timings["embed"] + res.timings["vector"] + res.timings["graph"] <= res.timings["total"] + 0.01
    assert all(v >= 0.0 for v in res.timings.values())


@pytest.mark.integration
def test_typed_candidates_up_to_the_type_limit_are_all_taken(kg: Callable[..., Any],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.retrieval as retrieval

    eng = kg()
    pat = {"triples": [["UNKNOWN person 1", "directed_by", "UNKNOWN film 2"]]}
    monkeypatch.setattr(retrieval, "TYPE_CANDIDATE_LIMIT", len(PERSONS) + 1)  # exactly the persons
    res = eng.retrieve(pat, k=20, k_type=1, k_node=4, k_rel=1)
    assert sorted(a.entity.name for a in res.bindings["UNKNOWN film 2"]) == sorted(FILMS)
    assert res.exact and res.warnings == []


@pytest.mark.integration
def test_typed_candidates_cut_at_the_type_limit_are_reported(kg: Callable[..., Any],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.retrieval as retrieval

    eng = kg()
    pat = {"triples": [["UNKNOWN person 1", "directed_by", "UNKNOWN film 2"]]}
    monkeypatch.setattr(retrieval, "TYPE_CANDIDATE_LIMIT", 3)  # 8 persons, 7 films: both cut
    res = eng.retrieve(pat, k=20, k_type=1, k_node=4, k_rel=1)
    assert len(res.subgraphs) < len(FILMS)  # the cut is real: films are missing
    assert not res.exact
    assert any("type" in w for w in res.warnings)
