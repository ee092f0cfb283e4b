"""Exactness of the best-first matcher against the exhaustive Cypher oracle, on random KGs in the real Neo4j."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine._config import MatchSettings
from engine._errors import PatternError
from engine.retrieval.matcher import Matcher
from engine.retrieval.oracle import oracle_matches
from engine.retrieval.pattern import Pattern
from loaders._model import EntityRecord, TripleRecord
from loaders.bulk import BulkLoader, LoadSummary

from helpers.kg import unique_kg


NAMES = ["Ada", "Bob", "Cleo", "Dan", "Eve", "Fay", "Gus", "Hal", "Ivy", "Jon", "Kim", "Lou"]
RELS = ["knows", "likes", "works with", "married to", "lives near"]


def random_kg(seed: int, n: int = 24, m: int = 70) -> list[Any]:
    """Entities e0..e(n-1) named from a small pool (so names repeat), random typed triples, a few self-loops
    and parallel edges of different relations."""
    rng = random.Random(seed)
    recs: list[Any] = [EntityRecord(f"e{i}", rng.choice(NAMES), (), 0) for i in range(n)]
    for j in range(m):
        h, t = rng.randrange(n), rng.randrange(n)
        if rng.random() < 0.05:
            t = h
        recs.append(TripleRecord(f"e{h}", rng.choice(RELS), f"e{t}", j))
    return recs


@pytest.fixture(scope="module")
def kg_engine(request: Any, neo4j_uri: str, milvus_uri: str, embedder: Any) -> Any:
    from engine._config import EngineConfig, MilvusSettings, Neo4jSettings
    from engine._engine import Engine

    eng = Engine(EngineConfig(kg=unique_kg("match"), neo4j=Neo4jSettings(uri=neo4j_uri),
                              milvus=MilvusSettings(uri=milvus_uri)), embedder=embedder)
    BulkLoader(eng.graph, eng.vectors, embedder, progress=False).load_records(random_kg(7), LoadSummary())
    yield eng
    eng.drop()
    eng.close()


def node_text(draw: Any, unknown_ok: bool = True) -> str:
    return draw(st.sampled_from(NAMES + ["Adam", "Evelyn", "Gustav"]))


@st.composite
def patterns(draw: Any) -> Pattern:
    shape = draw(st.sampled_from(["path", "star", "cycle", "multi", "disconnected", "loop"]))
    size = draw(st.integers(1, 3))
    nodes: list[str] = []
    n_nodes = {"path": size + 1, "star": size + 1, "cycle": max(size, 2) + 1, "multi": 2,
               "disconnected": 4, "loop": 2}[shape]
    for i in range(n_nodes):
        if i > 0 and draw(st.booleans()):
            nodes.append(f"UNKNOWN thing {i}")
        else:
            nodes.append(draw(st.sampled_from(NAMES + ["Adam", "Evelyn", "Gustav"])))
    # distinct node ids (a repeated known name would merge two pattern nodes)
    seen: set[str] = set()
    for i, n in enumerate(nodes):
        if n in seen:
            nodes[i] = f"UNKNOWN thing {i}"
        seen.add(nodes[i])

    def rel() -> str:
        return draw(st.sampled_from(RELS + ["UNKNOWN relation 1", "friend of", "near"]))

    if shape == "path":
        triples = [(nodes[i], rel(), nodes[i + 1]) for i in range(len(nodes) - 1)]
    elif shape == "star":
        triples = [(nodes[0], rel(), nodes[i]) for i in range(1, len(nodes))]
    elif shape == "cycle":
        triples = [(nodes[i], rel(), nodes[(i + 1) % len(nodes)]) for i in range(len(nodes))]
    elif shape == "multi":
        triples = [(nodes[0], rel(), nodes[1]), (nodes[1], rel(), nodes[0])]
    elif shape == "loop":
        triples = [(nodes[0], rel(), nodes[1]), (nodes[1], rel(), nodes[1])]
    else:
        triples = [(nodes[0], rel(), nodes[1]), (nodes[2], rel(), nodes[3])]
    if draw(st.booleans()):
        triples = [(t, r, h) for h, r, t in triples]
    return Pattern.from_triples(triples)


def check_equal(got: list[Any], want: list[Any], k: int) -> None:
    want = want[:k]
    assert [round(m.gsd, 6) for m in got] == [round(m.gsd, 6) for m in want]
    if not want:
        return
    kth = want[-1].gsd

    def sig(m: Any) -> Any:
        return (tuple(sorted(m.nodes.items())), tuple(sorted(m.edges.items())))

    strict_got = {sig(m) for m in got if m.gsd < kth - 1e-6}
    strict_want = {sig(m) for m in want if m.gsd < kth - 1e-6}
    assert strict_got == strict_want


MODES = [(True, False), (False, False), ("edges", False), (True, True), (False, True), ("edges", True)]


def reversed_edges(pattern: Pattern, m: Any) -> int:
    """Edges of a match that run against the pattern's direction (self-loops never do)."""
    return sum(1 for e in pattern.edges
               if m.edges[e.index].start != m.edges[e.index].end and m.edges[e.index].start != m.nodes[e.head])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=patterns(), k=st.integers(1, 6), mode=st.sampled_from(MODES), k_node=st.sampled_from([2, 4, 12]),
       typed=st.booleans(), dense=st.sampled_from([None, (0, 1e9), (4, 1.0)]))
def test_matcher_equals_oracle(kg_engine: Any, pattern: Pattern, k: int, mode: tuple[Any, bool], k_node: int,
                               typed: bool, dense: tuple[int, float] | None) -> None:
    import engine.retrieval.matcher as matching

    injective, directed = mode
    ms = MatchSettings(k_node=k_node, k_rel=3, k=k, injective=injective, directed=directed, batch_size=8)
    retr = kg_engine.retriever
    # both forms of the expansion statement: with a type alternation (small catalogs) and untyped with a
    # per-row type filter (the form used on KGs with many relation types); and hubs: every source a hub,
    # always reached from the candidates' side, or sources above degree 4 when that side is cheaper
    saved = matching.ALTERNATION_MAX_CATALOG, matching.DENSE_DEGREE, matching.CANDIDATE_SIDE_RATIO
    matching.ALTERNATION_MAX_CATALOG = saved[0] if typed else 0
    if dense is not None:
        matching.DENSE_DEGREE, matching.CANDIDATE_SIDE_RATIO = dense
    try:
        cands = retr.candidates(pattern, ms, {})
        got, stats = Matcher(kg_engine.graph, ms).top_k(pattern, cands, k)
    except PatternError:
        assert any(all(not n.known for n in c.nodes.values()) for c in pattern.components())
        return
    finally:
        matching.ALTERNATION_MAX_CATALOG, matching.DENSE_DEGREE, matching.CANDIDATE_SIDE_RATIO = saved
    assert not stats.deadline_hit
    # brute force: every isomorphic subgraph, then the same (GSD) order
    want = oracle_matches(kg_engine.graph, pattern, cands, limit=100_000, injective=injective, directed=directed)
    check_equal(got, want, k)
    # the direction tie-break is exact too: (GSD, reversed edges) of the top k equal the oracle's best k
    pairs = [(round(m.gsd, 6), reversed_edges(pattern, m)) for m in got]
    assert pairs == sorted(pairs)
    assert pairs == sorted((round(m.gsd, 6), reversed_edges(pattern, m)) for m in want)[:k]
    if directed:
        assert all(r == 0 for _, r in pairs)
    for m in got:  # each result is a real mapping with the GSD it claims
        from engine.retrieval.matcher import gsd_of

        assert abs(gsd_of(pattern, cands, m.nodes, m.edges) - m.gsd) < 1e-9


def test_no_match_and_refused_all_unknown(kg_engine: Any) -> None:
    res = kg_engine.retrieve({"triples": [["Ada", "knows", "UNKNOWN x 1"], ["UNKNOWN x 1", "knows", "UNKNOWN y 2"],
                                          ["UNKNOWN y 2", "knows", "UNKNOWN z 3"], ["UNKNOWN z 3", "knows", "Ada"],
                                          ["Ada", "knows", "UNKNOWN w 4"], ["UNKNOWN w 4", "knows", "UNKNOWN z 3"]]},
                             k_node=1, k_rel=1)
    assert isinstance(res.subgraphs, list)
    with pytest.raises(PatternError, match="nothing to anchor"):
        kg_engine.retrieve({"triples": [["UNKNOWN a 1", "knows", "UNKNOWN b 2"]]})


def test_injective_vs_homomorphic(make_engine: Any) -> None:
    """Two pattern nodes that can only map to one entity: no injective match, one homomorphic match."""
    eng = make_engine()
    recs = [TripleRecord("Solo", "knows", "Solo", 1), TripleRecord("Other", "likes", "Third", 2)]
    BulkLoader(eng.graph, eng.vectors, eng.embedder, progress=False).load_records(recs, LoadSummary())
    pat = {"triples": [["Solo", "knows", "UNKNOWN person 1"]]}
    inj = eng.retrieve(pat, k_node=1, k_rel=1)
    hom = eng.retrieve(pat, k_node=1, k_rel=1, injective=False)
    assert inj.subgraphs == []
    assert len(hom.subgraphs) == 1 and hom.subgraphs[0].mapping["UNKNOWN person 1"].name == "Solo"


def test_edge_injective_lets_an_answer_repeat_an_intermediate_node(make_engine: Any) -> None:
    """MetaQA's reading of "who directed the films written by the writer of X": the director may be the writer
    himself (another relationship leads to him), the other film may not be X (that would reuse X's edge)."""
    eng = make_engine()
    recs = [TripleRecord("Tokyo Story", "written_by", "Ozu", 1), TripleRecord("Late Spring", "written_by", "Ozu", 2),
            TripleRecord("Late Spring", "directed_by", "Ozu", 3), TripleRecord("Tokyo Story", "directed_by", "Ozu", 4)]
    BulkLoader(eng.graph, eng.vectors, eng.embedder, progress=False).load_records(recs, LoadSummary())
    pat = {"triples": [["Tokyo Story", "written_by", "UNKNOWN person 1"],
                       ["UNKNOWN movie 2", "written_by", "UNKNOWN person 1"],
                       ["UNKNOWN movie 2", "directed_by", "UNKNOWN person 3"]]}
    nodes = eng.retrieve(pat, k_node=1, k_rel=1)
    edges = eng.retrieve(pat, k_node=1, k_rel=1, injective="edges")
    none = eng.retrieve(pat, k_node=1, k_rel=1, injective="none")
    assert nodes.subgraphs == []
    assert [(s.gsd, s.mapping["UNKNOWN movie 2"].name, s.mapping["UNKNOWN person 3"].name) for s in edges.subgraphs] \
        == [(0.0, "Late Spring", "Ozu")]
    assert {s.mapping["UNKNOWN movie 2"].name for s in none.subgraphs} == {"Late Spring", "Tokyo Story"}


def test_direction_breaks_ties(make_engine: Any) -> None:
    """One entity that is a film and an actor ("Jesse James"): undirected matching prefers the pattern's
    direction among subgraphs of equal GSD; directed matching keeps only it."""
    eng = make_engine()
    recs = [TripleRecord("Jesse James", "starred_actors", f"Actor {i}", i) for i in range(4)]
    recs.append(TripleRecord("The Last Ride", "starred_actors", "Jesse James", 9))
    BulkLoader(eng.graph, eng.vectors, eng.embedder, progress=False).load_records(recs, LoadSummary())
    pat = {"triples": [["UNKNOWN movie 1", "starred_actors", "Jesse James"]]}
    und = eng.retrieve(pat, k=2, k_node=1, k_rel=1)
    assert [s.gsd for s in und.subgraphs] == [0.0, 0.0]
    assert und.answers[0].entity.name == "The Last Ride"
    assert und.subgraphs[1].mapping["UNKNOWN movie 1"].name.startswith("Actor")
    dire = eng.retrieve(pat, k=2, k_node=1, k_rel=1, directed=True)
    assert [a.entity.name for a in dire.answers] == ["The Last Ride"]


def test_same_name_entities_both_found(make_engine: Any) -> None:
    eng = make_engine()
    recs = [EntityRecord("m1", "Heat", (), 1), EntityRecord("m2", "Heat", (), 2),
            TripleRecord("m1", "directed_by", "Michael Mann", 3), TripleRecord("m2", "directed_by", "Dean Jones", 4)]
    BulkLoader(eng.graph, eng.vectors, eng.embedder, progress=False).load_records(recs, LoadSummary())
    res = eng.retrieve({"triples": [["Heat", "directed_by", "UNKNOWN director 1"]]}, k=2)
    assert sorted(a.entity.name for a in res.answers) == ["Dean Jones", "Michael Mann"]
    assert all(abs(s.gsd - res.subgraphs[0].gsd) < 1e-6 for s in res.subgraphs)


def test_deadline_is_reported(kg_engine: Any) -> None:
    pat = {"triples": [["Ada", "UNKNOWN relation 1", "UNKNOWN a 1"],
                       ["UNKNOWN a 1", "UNKNOWN relation 2", "UNKNOWN b 2"],
                       ["UNKNOWN b 2", "UNKNOWN relation 3", "UNKNOWN c 3"]]}
    t0 = time.perf_counter()
    res = kg_engine.retrieve(pat, k=10_000, k_node=12, deadline_s=0.001)
    assert time.perf_counter() - t0 < 5
    assert not res.exact and res.stats["deadline_hit"]
    assert any("deadline" in w for w in res.warnings)


def test_conjunction_narrows_the_unknown_and_stays_exact(make_engine: Any) -> None:
    """An unknown joined to two named entities is searched only among the entities adjacent to both."""
    eng = make_engine()
    recs = [TripleRecord(f"Film {i}", "starred_actors", "Ann Lee", i) for i in range(30)]
    recs += [TripleRecord(f"Film {i}", "directed_by", "Bo Chan", 100 + i) for i in range(25, 40)]
    BulkLoader(eng.graph, eng.vectors, eng.embedder, progress=False).load_records(recs, LoadSummary())
    pat = {"triples": [["UNKNOWN movie 1", "starred_actors", "Ann Lee"], ["UNKNOWN movie 1", "directed_by", "Bo Chan"]]}
    on = eng.retrieve(pat, k=5, k_node=1, k_rel=1, graph="expand")
    off = eng.retrieve(pat, k=5, k_node=1, k_rel=1, narrow=False, graph="expand")
    assert on.stats["narrowed"] == {"UNKNOWN movie 1": 5} and off.stats["narrowed"] == {}
    assert sorted(a.entity.name for a in on.answers) == [f"Film {i}" for i in range(25, 30)]
    assert [(s.gsd, sorted(s.mapping.items())) for s in on.subgraphs] \
        == [(s.gsd, sorted(s.mapping.items())) for s in off.subgraphs]
    assert on.stats["expansions"] < off.stats["expansions"]


def test_hub_sources_are_reached_from_the_candidates_side(make_engine: Any, monkeypatch: Any) -> None:
    """An expansion from a hub into a node with few candidates reads the candidates' relationships instead of
    the hub's; the subgraphs are the same."""
    import engine.retrieval.matcher as matching

    eng = make_engine()
    recs = [TripleRecord("Big Studio", "produced", f"Film {i}", i) for i in range(60)]
    recs += [TripleRecord(f"Film {i}", "starred_actors", f"Actor {i % 7}", 100 + i) for i in range(60)]
    recs += [TripleRecord("Small Studio", "produced", "Film 3", 200)]
    BulkLoader(eng.graph, eng.vectors, eng.embedder, progress=False).load_records(recs, LoadSummary())
    # the hub is the root (listed first; one candidate each), Film 3 the filtered destination
    for pat, k_node in (({"triples": [["Big Studio", "produced", "Film 3"]]}, 1),
                        ({"triples": [["Big Studio", "produced", "Film 3"],
                                      ["Big Studio", "produced", "UNKNOWN film 2"]]}, 1),
                        ({"triples": [["Big Studio", "produced", "Film 3"]]}, 4)):
        monkeypatch.setattr(matching, "DENSE_DEGREE", 2_000)
        usual = eng.retrieve(pat, k=3, k_node=k_node, k_rel=2, graph="expand")
        monkeypatch.setattr(matching, "DENSE_DEGREE", 10)
        hub = eng.retrieve(pat, k=3, k_node=k_node, k_rel=2, graph="expand")
        assert usual.stats["from_candidates"] == 0 and hub.stats["from_candidates"] >= 1
        assert usual.subgraphs and [(s.gsd, sorted(s.mapping.items()), sorted(map(str, s.triples)))
                                    for s in hub.subgraphs] \
            == [(s.gsd, sorted(s.mapping.items()), sorted(map(str, s.triples))) for s in usual.subgraphs]
        assert [a.entity.name for a in hub.answers] == [a.entity.name for a in usual.answers]
