"""The three paths of the graph stage give the same top-k: the best-first matcher over the in-process replica, over
Cypher expansions, and the one-statement path, against the exhaustive Cypher oracle, on random KGs and patterns in
the real Neo4j (engine.retrieval.graph_paths)."""

from __future__ import annotations

import dataclasses

import random
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

import engine.retrieval.one_statement as one_statement
from engine._config import MatchSettings
from engine._errors import PatternError
from engine.retrieval.matcher import CypherExpansions, Matcher, gsd_of
from engine.retrieval.one_statement import StatementMatcher
from engine.retrieval.oracle import oracle_matches
from engine.retrieval.pattern import Pattern
from engine.retrieval.replica import ReplicaExpansions, build_replica
from loaders._model import EntityRecord, TripleRecord
from loaders.bulk import BulkLoader, LoadSummary

from helpers.kg import unique_kg

pytestmark = pytest.mark.long  # minutes of work: `make test` deals this file out first (tests/conftest.py)

NAMES = ["Ada", "Bob", "Cleo", "Dan", "Eve", "Fay", "Gus", "Hal", "Ivy", "Jon", "Kim", "Lou"]
RELS = ["knows", "likes", "works with", "married to", "lives near"]
#: (seed, entities, triples): a sparse KG, a dense one with a hub, a tiny one full of self-loops and parallels
SHAPES = [(7, 24, 70), (11, 16, 110), (3, 8, 40)]


def random_kg(seed: int, n: int, m: int) -> list[Any]:
    """Entities e0..e(n-1) named from a small pool (names repeat), random triples, some self-loops, a hub (e0)."""
    rng = random.Random(seed)
    recs: list[Any] = [EntityRecord(f"e{i}", rng.choice(NAMES), (), 0) for i in range(n)]
    for j in range(m):
        h = 0 if rng.random() < 0.2 else rng.randrange(n)
        t = h if rng.random() < 0.06 else rng.randrange(n)
        recs.append(TripleRecord(f"e{h}", rng.choice(RELS), f"e{t}", j))
    return recs


@pytest.fixture(scope="module")
def kgs(neo4j_uri: str, milvus_uri: str, embedder: Any) -> Any:
    from engine._config import EngineConfig, MilvusSettings, Neo4jSettings
    from engine._engine import Engine

    out = []
    for seed, n, m in SHAPES:
        eng = Engine(EngineConfig(kg=unique_kg("paths"), neo4j=Neo4jSettings(uri=neo4j_uri),
                                  milvus=MilvusSettings(uri=milvus_uri)), embedder=embedder, llm=False)
        BulkLoader(eng.graph, eng.vectors, embedder, progress=False).load_records(random_kg(seed, n, m), LoadSummary())
        rep = build_replica(eng.graph, 64 * 2**20)
        assert rep is not None and rep.m > 0
        out.append((eng, rep))
    yield out
    for eng, _ in out:
        eng.drop()
        eng.close()


@st.composite
def patterns(draw: Any) -> Pattern:
    shape = draw(st.sampled_from(["path", "star", "cycle", "multi", "disconnected", "loop", "conj"]))
    size = draw(st.integers(1, 3))
    n_nodes = {"path": size + 1, "star": size + 1, "cycle": max(size, 2) + 1, "multi": 2, "disconnected": 4,
               "loop": 2, "conj": 3}[shape]
    nodes: list[str] = []
    for i in range(n_nodes):
        if i > 0 and draw(st.booleans()):
            nodes.append(f"UNKNOWN thing {i}")
        else:
            nodes.append(draw(st.sampled_from(NAMES + ["Adam", "Evelyn"])))
    seen: set[str] = set()
    for i, n in enumerate(nodes):
        if n in seen:
            nodes[i] = f"UNKNOWN thing {i}"
        seen.add(nodes[i])

    def rel() -> str:
        return draw(st.sampled_from(RELS + ["UNKNOWN relation 1", "friend of"]))

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
    elif shape == "conj":  # an unknown between two named nodes: narrowing applies
        a, b = draw(st.sampled_from(NAMES)), draw(st.sampled_from(NAMES))
        if a == b:
            b = "Evelyn"
        triples = [(a, rel(), "UNKNOWN hub 1"), (b, rel(), "UNKNOWN hub 1")]
    else:
        triples = [(nodes[0], rel(), nodes[1]), (nodes[2], rel(), nodes[3])]
    if draw(st.booleans()):
        triples = [(t, r, h) for h, r, t in triples]
    return Pattern.from_triples(triples)


def sig(m: Any) -> Any:
    return (tuple(sorted(m.nodes.items())), tuple(sorted(m.edges.items())))


def same_top_k(got: list[Any], want: list[Any], k: int) -> None:
    """The top-k GSDs equal, and the matches strictly better than the k-th equal (ties at the k-th may differ)."""
    want = want[:k]
    assert [round(m.gsd, 6) for m in got] == [round(m.gsd, 6) for m in want]
    if want:
        kth = want[-1].gsd
        assert {sig(m) for m in got if m.gsd < kth - 1e-6} == {sig(m) for m in want if m.gsd < kth - 1e-6}


def reversed_edges(pattern: Pattern, m: Any) -> int:
    return sum(1 for e in pattern.edges
               if m.edges[e.index].start != m.edges[e.index].end and m.edges[e.index].start != m.nodes[e.head])


MODES = [(True, False), (False, False), ("edges", False), (True, True), (False, True), ("edges", True)]


def _paths_agree(eng: Any, rep: Any, pattern: Pattern, ms: MatchSettings, k: int) -> None:
    try:
        cands = eng.retriever.candidates(pattern, ms, {})
        expand, s_expand = Matcher(eng.graph, ms, source=CypherExpansions(eng.graph)).top_k(pattern, cands, k)
    except PatternError:
        assert any(all(not n.known for n in c.nodes.values()) for c in pattern.components())
        event("refused: nothing to anchor")
        return
    replica, s_replica = Matcher(eng.graph, ms, source=ReplicaExpansions(rep)).top_k(pattern, cands, k)
    assert not s_expand.deadline_hit and not s_replica.deadline_hit
    # what was cut at the degree cap is the same for both until the first cut: both cut, or neither
    assert (s_expand.truncated > 0) == (s_replica.truncated > 0)
    if s_expand.truncated:
        event("cut at the degree cap")
        return
    # the replica walks the same search: the same list, ties and their order included, and the same narrowing
    assert [(m.gsd, m.nodes, m.edges, m.reversed, m.key) for m in replica] \
        == [(m.gsd, m.nodes, m.edges, m.reversed, m.key) for m in expand]
    assert s_replica.narrowed == s_expand.narrowed and s_replica.expansions == s_expand.expansions
    assert s_replica.queries == 0
    want = oracle_matches(eng.graph, pattern, cands, limit=100_000, injective=ms.injective, directed=ms.directed)
    same_top_k(replica, want, k)
    pairs = [(round(m.gsd, 6), reversed_edges(pattern, m)) for m in replica]
    assert pairs == sorted((round(m.gsd, 6), reversed_edges(pattern, m)) for m in want)[:k]
    for m in replica:
        assert abs(gsd_of(pattern, cands, m.nodes, m.edges) - m.gsd) < 1e-9
    one_statement.forget_backoff()
    if ms.degree_cap < one_statement.PATH_CAP:  # a low degree cap is the expansion path's
        assert StatementMatcher(eng.graph, ms).top_k(pattern, cands, k, deadline=time.monotonic() + 30) is None
        # nothing was cut at the cap: the statement path must find the same without it
        ms = dataclasses.replace(ms, degree_cap=MatchSettings().degree_cap)
    got = StatementMatcher(eng.graph, ms).top_k(pattern, cands, k, deadline=time.monotonic() + 30)
    if got is None:  # disconnected, past the path cap, over its time budget: the expansion path serves it
        assert not pattern.is_connected() or one_statement.PATH_CAP < 10_000
        event("statement: left to the expansion path")
        return
    event(f"statement: settled by tier {got[1].tier}; narrowed {bool(s_replica.narrowed)}; "
          f"top-k {'empty' if not got[0] else 'found'}")
    stmt, s_stmt, names = got
    assert s_stmt.queries == 1  # one statement, whatever the tiers it ran
    same_top_k(stmt, want, k)
    assert [(round(m.gsd, 6), m.reversed) for m in stmt] == [(round(m.gsd, 6), m.reversed) for m in replica]
    if not s_replica.narrowed:  # the same plan: the same order among ties, key by key
        assert [(m.gsd, m.key) for m in stmt] == [(m.gsd, m.key) for m in replica]
    for m in stmt:
        assert all(e in names for e in m.nodes.values())


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, len(SHAPES) - 1), pattern=patterns(), k=st.integers(1, 6), mode=st.sampled_from(MODES),
       k_node=st.sampled_from([1, 3, 12]), k_rel=st.sampled_from([1, 3]), cap=st.sampled_from([10_000, 3]),
       tiny_path_cap=st.booleans())
@example(which=1, pattern=Pattern.from_triples([("Ada", "UNKNOWN relation 1", "UNKNOWN 1")]), k=6, mode=(True, False),
         k_node=1, k_rel=1, cap=3, tiny_path_cap=False)
def test_replica_expand_statement_and_oracle_agree(kgs: Any, which: int, pattern: Pattern, k: int,
                                                    mode: tuple[Any, bool], k_node: int, k_rel: int, cap: int,
                                                    tiny_path_cap: bool) -> None:
    eng, rep = kgs[which]
    injective, directed = mode
    ms = MatchSettings(k_node=k_node, k_rel=k_rel, k=k, injective=injective, directed=directed, batch_size=8,
                       degree_cap=cap)
    saved = one_statement.PATH_CAP
    one_statement.PATH_CAP = 5 if tiny_path_cap else saved
    try:
        _paths_agree(eng, rep, pattern, ms, k)
    finally:
        one_statement.PATH_CAP = saved


def warm_statement(eng: Any, pat: Any, **kw: Any) -> None:
    """Neo4j plans a statement's text at its first run (which may pass the statement's budget on a busy machine and
    go to expansions): run it until planned, then forget the shapes sent to expansions meanwhile."""
    for _ in range(5):
        one_statement.forget_backoff()
        if eng.retrieve(pat, graph="statement", **kw).stats["graph_path"] == "statement":
            break
    one_statement.forget_backoff()


def test_each_path_serves_a_retrieve_and_says_so(kgs: Any) -> None:
    eng, _ = kgs[0]
    pat = {"triples": [["Ada", "knows", "UNKNOWN person 1"], ["UNKNOWN person 1", "likes", "UNKNOWN thing 2"]]}
    warm_statement(eng, pat, k=5)
    got = {g: eng.retrieve(pat, k=5, graph=g) for g in ("expand", "statement", "replica")}
    assert {g: r.stats["graph_path"] for g, r in got.items()} == {g: g for g in got}
    assert got["replica"].stats["queries"] == 0 and got["statement"].stats["queries"] == 1
    assert got["replica"].stats["replica"]["state"] == "ready" and got["replica"].stats["replica"]["mb"] > 0
    subs = {g: [(round(s.gsd, 6), sorted((n, e.name) for n, e in s.mapping.items())) for s in r.subgraphs]
            for g, r in got.items()}
    assert subs["replica"] == subs["expand"] == subs["statement"]
    assert [a.entity.name for a in got["replica"].answers] == [a.entity.name for a in got["expand"].answers]


def test_a_pattern_past_the_path_cap_goes_to_expansions(kgs: Any, monkeypatch: Any) -> None:
    eng, _ = kgs[1]
    pat = {"triples": [["Ada", "UNKNOWN relation 1", "UNKNOWN 1"], ["UNKNOWN 1", "UNKNOWN relation 2", "UNKNOWN 2"]]}
    warm_statement(eng, pat, k=4, k_node=1)
    wide = eng.retrieve(pat, k=4, k_node=1, graph="statement")
    monkeypatch.setattr(one_statement, "PATH_CAP", 2)
    capped = eng.retrieve(pat, k=4, k_node=1, graph="statement")
    assert wide.stats["graph_path"] == "statement" and capped.stats["graph_path"] == "expand"
    assert [round(s.gsd, 6) for s in capped.subgraphs] == [round(s.gsd, 6) for s in wide.subgraphs]
    # the cap depends on the query's candidates: the shape keeps trying statements
    assert eng.retrieve(pat, k=4, k_node=1, graph="statement").stats["graph_path"] == "expand"
    monkeypatch.setattr(one_statement, "PATH_CAP", 2_000)
    assert eng.retrieve(pat, k=4, k_node=1, graph="statement").stats["graph_path"] == "statement"


def test_a_statement_over_its_budget_goes_to_expansions(kgs: Any, monkeypatch: Any) -> None:
    eng, _ = kgs[1]
    pat = {"triples": [["Ada", "UNKNOWN relation 1", "UNKNOWN 1"], ["UNKNOWN 1", "UNKNOWN relation 2", "UNKNOWN 2"]]}
    one_statement.forget_backoff()
    warm_statement(eng, pat, k=4, k_node=1)
    monkeypatch.setattr(one_statement, "STATEMENT_BUDGET_S", 1e-6)
    res = eng.retrieve(pat, k=4, k_node=1, graph="statement")
    assert res.stats["graph_path"] == "expand" and res.exact and not res.stats["deadline_hit"]
    # three in a row over the budget: the shape goes straight to expansions for a while, then tries again
    for _ in range(2):
        assert eng.retrieve(pat, k=4, k_node=1, graph="statement").stats["graph_path"] == "expand"
    monkeypatch.setattr(one_statement, "STATEMENT_BUDGET_S", 30.0)
    skipped = eng.retrieve(pat, k=4, k_node=1, graph="statement")
    assert skipped.stats["graph_path"] == "expand"
    one_statement.forget_backoff()
    assert eng.retrieve(pat, k=4, k_node=1, graph="statement").stats["graph_path"] == "statement"


def test_the_replica_path_keeps_the_deadline(kgs: Any) -> None:
    eng, _ = kgs[1]
    pat = {"triples": [["Ada", "UNKNOWN relation 1", "UNKNOWN a 1"],
                       ["UNKNOWN a 1", "UNKNOWN relation 2", "UNKNOWN b 2"],
                       ["UNKNOWN b 2", "UNKNOWN relation 3", "UNKNOWN c 3"]]}
    eng.retrieve(pat, k=1, graph="replica")  # built and fresh
    res = eng.retrieve(pat, k=100_000, k_node=12, deadline_s=0.002, graph="replica")
    assert res.stats["graph_path"] == "replica"
    assert not res.exact and res.stats["deadline_hit"] and any("deadline" in w for w in res.warnings)


def test_the_degree_cap_warns_alike_on_the_replica(kgs: Any) -> None:
    eng, _ = kgs[1]
    pat = {"triples": [["Ada", "UNKNOWN relation 1", "UNKNOWN 1"]]}
    exp = eng.retrieve(pat, k=50, k_node=1, degree_cap=2, graph="expand")
    rep = eng.retrieve(pat, k=50, k_node=1, degree_cap=2, graph="replica")
    assert exp.stats["truncated"] == rep.stats["truncated"] > 0
    assert not exp.exact and not rep.exact and exp.warnings == rep.warnings
    # which relationships a capped state keeps is the path's (Cypher's LIMIT reads the first it finds, the replica
    # its row in order): each keeps at most the cap per state, and whatever it returns is a true match of the
    # pattern, as the uncapped search finds it
    full = {(round(s.gsd, 6), tuple(sorted((n, e.key) for n, e in s.mapping.items())))
            for s in eng.retrieve(pat, k=50, k_node=1, graph="expand").subgraphs}
    for res in (exp, rep):
        got = [(round(s.gsd, 6), tuple(sorted((n, e.key) for n, e in s.mapping.items()))) for s in res.subgraphs]
        assert 0 < len(got) <= 2 and set(got) <= full, (res.stats["graph_path"], got)
