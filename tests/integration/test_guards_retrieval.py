"""Guards on candidates (engine.retrieval.retriever) against the real local Neo4j and Milvus, each a mistake no other
test caught: k_node and k_rel, Euclidean distances, the degree cap, the answer rule, typed unknowns, timings. Result
assembly on hand-made matches: tests/unit/test_guards_retrieval.py.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import numpy as np
import pytest

from engine._config import MatchSettings
from engine.linking.names import SPELLING_SCALE, spelling_distance
from engine.retrieval.pattern import Pattern
from loaders._model import EntityRecord, TripleRecord

from helpers.kg import shared_kg


FILMS = ["Heat", "Thief", "Collateral", "Ali", "Manhunter", "Blackhat", "Public Enemies"]
RELS = ["directed_by", "written_by", "starred_actors", "release_year", "in_language", "has_genre", "has_tags"]


def _records() -> list[Any]:
    recs: list[Any] = []
    for i, film in enumerate(FILMS):
        recs.append(TripleRecord(film, "directed_by", "Michael Mann", 10 * i))
        recs.append(TripleRecord(film, RELS[1 + i % (len(RELS) - 1)], f"Person {i}", 10 * i + 1))
    # a hub for the degree cap: exactly five neighbours, each through an unknown relation
    recs += [TripleRecord("Hub Studio", RELS[j], f"Spoke {j}", 100 + j) for j in range(5)]
    # ... and each spoke exactly three (the hub and two leaves)
    recs += [TripleRecord(f"Spoke {j}", "has_tags", f"Leaf {j}{c}", 110 + 2 * j + i)
             for j in range(5) for i, c in enumerate("ab")]
    # the answer rule (homomorphic matching): Ann's child's parent is Ann again, or Bo
    recs += [TripleRecord("Ann Lee", "children", "Cal Lee", 200), TripleRecord("Bo Lee", "children", "Cal Lee", 201)]
    # entity types: films, persons, one city
    recs += [EntityRecord(f, None, ("film",), 300 + i) for i, f in enumerate(FILMS)]
    recs += [EntityRecord(p, None, ("person",), 320 + i) for i, p in enumerate(PERSONS)]
    recs += [EntityRecord("Michael Mann", None, ("person", "director"), 330),
             EntityRecord("Chicago", None, ("city",), 331)]
    return recs


PERSONS = [f"Person {i}" for i in range(len(FILMS))]


@pytest.fixture(scope="module")
def kg(neo4j_uri: str, milvus_uri: str, embedder: Any) -> Iterator[Callable[..., Any]]:
    yield from shared_kg("guardr", _records(), neo4j_uri, milvus_uri, embedder)


@pytest.mark.parametrize("local_relations", [True, False])
def test_named_node_gets_k_node_candidates_and_relation_k_rel(kg: Callable[..., Any], local_relations: bool,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.retrieval.retriever as retrieval

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


@pytest.mark.parametrize("local_relations", [True, False])
def test_candidate_distances_are_euclidean_between_the_embeddings(kg: Callable[..., Any], embedder: Any,
                                                                  local_relations: bool,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.retrieval.retriever as retrieval

    if not local_relations:
        monkeypatch.setattr(retrieval, "LOCAL_RELATION_LIMIT", 0)
    eng = kg()
    pat = Pattern.from_triples([("Heat 1995 film", "directed by", "UNKNOWN person 1")])
    cands = eng.retriever.candidates(pat, MatchSettings(k_node=6, k_rel=4), {})
    node = cands.nodes["Heat 1995 film"]
    rows = eng.graph.entities(list(node))
    names = [rows[e]["name"] for e in node]
    q = embedder.encode(["Heat 1995 film"])[0]
    # the node distance (engine.linking.names.node_distance): the smaller of the Euclidean distance between the
    # embeddings and the scaled spelling distance (here the embeddings' is the smaller for each)
    euclid = np.linalg.norm(embedder.encode(names) - q[None, :], axis=1)
    spelled = SPELLING_SCALE * np.array([spelling_distance("Heat 1995 film", n) for n in names])
    want = np.minimum(euclid, spelled)
    got = np.array([node[e] for e in node])
    assert np.allclose(got, want, atol=2e-4), (names, got, want)
    assert np.allclose(got, euclid, atol=2e-4)
    # the nearest entities, nearest first: the six closest names of the KG
    all_names = sorted({n for r in _records() for n in ((r.head, r.tail) if isinstance(r, TripleRecord) else (r.key,))})
    dist_all = np.linalg.norm(embedder.encode(all_names) - q[None, :], axis=1)
    assert sorted(names) == sorted(all_names[i] for i in np.argsort(dist_all)[:6])
    assert (got > 0.05).all()  # none is a copy of the query: a wrong distance formula shows
    rel = cands.relations[0]
    type_names = [cands.type_names[t] for t in rel]
    qr = embedder.encode(["directed by"])[0]
    want_r = np.linalg.norm(embedder.encode(type_names) - qr[None, :], axis=1)
    assert np.allclose([rel[t] for t in rel], want_r, atol=2e-4), (type_names, rel, want_r)
    assert min(rel, key=rel.get) == "directed_by"


def test_degree_cap_reached_exactly_truncates_nothing(kg: Callable[..., Any]) -> None:
    eng = kg()
    pat = {"triples": [["Hub Studio", "UNKNOWN relation 1", "UNKNOWN 1"]]}
    at = eng.retrieve(pat, k=20, k_node=1, degree_cap=5)
    assert sorted(s.mapping["UNKNOWN 1"].name for s in at.subgraphs) == [f"Spoke {j}" for j in range(5)]
    assert at.exact and at.warnings == [] and at.stats["truncated"] == 0
    above = eng.retrieve(pat, k=20, k_node=1, degree_cap=6)
    assert len(above.subgraphs) == 5 and above.exact and above.warnings == []


def test_degree_cap_below_the_degree_truncates_warns_and_is_not_exact(kg: Callable[..., Any]) -> None:
    """On every graph path (the statement path leaves a degree cap below its path cap to the expansion path; CI
    once met the statement path here, while the replica was being built, and it returned all five)."""
    eng = kg()
    pat = {"triples": [["Hub Studio", "UNKNOWN relation 1", "UNKNOWN 1"]]}
    for path in ("auto", "statement", "expand", "replica"):
        cut = eng.retrieve(pat, k=20, k_node=1, degree_cap=4, graph=path)
        assert len(cut.subgraphs) == 4, (path, cut.stats["graph_path"])
        assert not cut.exact and cut.stats["truncated"] == 1 and not cut.stats["deadline_hit"]
        assert len(cut.warnings) == 1 and "degree cap 4" in cut.warnings[0]
        assert cut.to_dict()["exact"] is False


def test_degree_cap_on_two_levels(kg: Callable[..., Any]) -> None:
    """The hub has five neighbours, each spoke three: one warning however many expansions were cut."""
    eng = kg()
    pat = {"triples": [["Hub Studio", "UNKNOWN relation 1", "UNKNOWN 1"],
                       ["UNKNOWN 1", "UNKNOWN relation 2", "UNKNOWN 2"]]}
    full = eng.retrieve(pat, k=50, k_node=1, degree_cap=5)
    assert len(full.subgraphs) == 10 and full.exact and full.warnings == [] and full.stats["truncated"] == 0
    assert {s.mapping["UNKNOWN 2"].name for s in full.subgraphs} == {f"Leaf {j}{c}" for j in range(5) for c in "ab"}
    spokes_at_cap = eng.retrieve(pat, k=50, k_node=1, degree_cap=3)
    assert spokes_at_cap.stats["truncated"] == 1 and not spokes_at_cap.exact  # the hub only
    assert len(spokes_at_cap.subgraphs) == 6 and len(spokes_at_cap.warnings) == 1
    both = eng.retrieve(pat, k=50, k_node=1, degree_cap=2)
    assert both.stats["truncated"] == 3 and not both.exact  # the hub and the two spokes kept
    assert len(both.warnings) == 1 and "degree cap 2" in both.warnings[0]


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


def test_typed_unknown_beside_a_named_node_stays_a_wildcard(kg: Callable[..., Any]) -> None:
    """Type candidates only where the component has no named node (as SimGRAG does): the type is a hint."""
    eng = kg()
    pat = Pattern.from_triples([("Heat", "directed_by", "UNKNOWN person 1"),
                                ("UNKNOWN film 2", "has_tags", "UNKNOWN city 3")])
    cands = eng.retriever.candidates(pat, MatchSettings(k_type=1, k_node=2), {})
    assert cands.nodes["UNKNOWN person 1"] is None
    assert cands.nodes["UNKNOWN film 2"] is not None and cands.nodes["UNKNOWN city 3"] is not None
    assert len(cands.nodes["UNKNOWN city 3"]) == 1  # Chicago, the one city


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


def test_typed_candidates_up_to_the_type_limit_are_all_taken(kg: Callable[..., Any],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.retrieval.retriever as retrieval

    eng = kg()
    pat = {"triples": [["UNKNOWN person 1", "directed_by", "UNKNOWN film 2"]]}
    monkeypatch.setattr(retrieval, "TYPE_CANDIDATE_LIMIT", len(PERSONS) + 1)  # exactly the persons
    res = eng.retrieve(pat, k=20, k_type=1, k_node=4, k_rel=1)
    assert sorted(a.entity.name for a in res.bindings["UNKNOWN film 2"]) == sorted(FILMS)
    assert res.exact and res.warnings == []


def test_typed_candidates_cut_at_the_type_limit_are_reported(kg: Callable[..., Any],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.retrieval.retriever as retrieval

    eng = kg()
    pat = {"triples": [["UNKNOWN person 1", "directed_by", "UNKNOWN film 2"]]}
    monkeypatch.setattr(retrieval, "TYPE_CANDIDATE_LIMIT", 3)  # 8 persons, 7 films: both cut
    res = eng.retrieve(pat, k=20, k_type=1, k_node=4, k_rel=1)
    assert len(res.subgraphs) < len(FILMS)  # the cut is real: films are missing
    assert not res.exact
    assert any("type" in w for w in res.warnings)
