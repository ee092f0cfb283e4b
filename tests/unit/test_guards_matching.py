"""Guards on the matcher's plan (engine.retrieval.matcher), each a mistake no other test caught: its suffix sums are an
admissible bound on cycles, multi-edges and self-loops, its root has the fewest candidates. Self-loops and direction,
disconnected patterns and the narrowing of conjunctions run against the real local Neo4j in
tests/integration/test_guards_matching.py."""

from __future__ import annotations

import itertools

import pytest

from engine.retrieval.matcher import Candidates, KGEdge, gsd_of, make_plan
from engine.retrieval.pattern import Pattern


# ---------------------------------------------------------------------------------------------------------
# the plan's suffix sums: admissible on cycles whose closing node has a non-zero distance
# ---------------------------------------------------------------------------------------------------------

TRIANGLE = Pattern.from_triples([("Ann", "r0", "Bo"), ("Bo", "r1", "Cy"), ("Cy", "r2", "Ann")])
TRIANGLE_CANDS = Candidates(
    {"Ann": {1: 0.5}, "Bo": {2: 0.2, 3: 0.4}, "Cy": {4: 0.3, 5: 0.6, 6: 0.7}},
    {0: {"x": 0.1, "y": 0.2}, 1: {"x": 0.05}, 2: {"y": 0.15, "x": 0.3}},
    {"x": "x", "y": "y"},
)


def test_plan_of_a_triangle_counts_the_closing_node_once() -> None:
    plan = make_plan(TRIANGLE, TRIANGLE_CANDS)
    assert plan.root == "Ann"  # the fewest candidates
    assert [(s.edge, s.src, s.dst, s.closes) for s in plan.steps] \
        == [(0, "Ann", "Bo", False), (1, "Bo", "Cy", False), (2, "Cy", "Ann", True)]
    assert plan.nodes == ("Ann", "Bo", "Cy")
    # suffix[i]: min relation distance of each step from i on + min node distance of the nodes they introduce;
    # the closing step adds its relation only (Ann, at 0.5, was paid for at the root)
    assert plan.suffix == pytest.approx((0.1 + 0.2 + 0.05 + 0.3 + 0.15, 0.05 + 0.3 + 0.15, 0.15, 0.0))


def test_plan_bound_never_exceeds_the_cost_of_a_completion() -> None:
    """Admissible: for every prefix of every mapping (graph aside), cost so far + suffix <= its full GSD."""
    plan = make_plan(TRIANGLE, TRIANGLE_CANDS)
    c = TRIANGLE_CANDS
    best = float("inf")
    for a, b, d, r0, r1, r2 in itertools.product(c.nodes["Ann"], c.nodes["Bo"], c.nodes["Cy"],  # type: ignore[arg-type]
                                                 c.relations[0], c.relations[1], c.relations[2]):
        nodes = {"Ann": a, "Bo": b, "Cy": d}
        edges = {0: KGEdge(a, r0, b), 1: KGEdge(b, r1, d), 2: KGEdge(d, r2, a)}
        total = gsd_of(TRIANGLE, c, nodes, edges)
        best = min(best, total)
        # after the root, after step 0, after step 1, after step 2
        paid = [c.nodes["Ann"][a],  # type: ignore[index]
                c.nodes["Ann"][a] + c.relations[0][r0] + c.nodes["Bo"][b],  # type: ignore[index]
                c.nodes["Ann"][a] + c.relations[0][r0] + c.nodes["Bo"][b] + c.relations[1][r1] + c.nodes["Cy"][d],  # type: ignore[index]
                total]
        for i in range(4):
            assert paid[i] + plan.suffix[i] <= total + 1e-12
    assert 0.5 + plan.suffix[0] == pytest.approx(best)  # and tight on this pattern


def test_plan_of_a_multi_edge_and_a_self_loop_adds_no_node_twice() -> None:
    pat = Pattern.from_triples([("Ann", "r0", "Bo"), ("Bo", "r1", "Ann"), ("Bo", "r2", "Bo")])
    cands = Candidates({"Ann": {1: 0.4}, "Bo": {2: 0.25, 3: 0.5}},
                       {0: {"x": 0.1}, 1: {"x": 0.2, "y": 0.3}, 2: {"y": 0.05}}, {"x": "x", "y": "y"})
    plan = make_plan(pat, cands)
    assert plan.root == "Ann"
    # from Bo, the self-loop first (its other end, Bo, has the higher degree)
    assert [(s.edge, s.closes) for s in plan.steps] == [(0, False), (2, True), (1, True)]
    assert plan.suffix == pytest.approx((0.1 + 0.25 + 0.05 + 0.2, 0.05 + 0.2, 0.2, 0.0))


def test_plan_root_has_the_fewest_candidates_and_an_unknown_costs_nothing() -> None:
    pat = Pattern.from_triples([("Ann", "r0", "UNKNOWN 1"), ("UNKNOWN 1", "r1", "Bo"), ("Bo", "r2", "Ann")])
    cands = Candidates({"Ann": {1: 0.3, 2: 0.35}, "UNKNOWN 1": None, "Bo": {3: 0.6}},
                       {0: {"x": 0.1}, 1: {"x": 0.2}, 2: {"y": 0.3}}, {"x": "x", "y": "y"})
    plan = make_plan(pat, cands)
    assert plan.root == "Bo"
    # Bo -r1- U1 (free node), U1 -r0- Ann (Ann at 0.3), Ann -r2- Bo closes
    assert [(s.edge, s.dst, s.closes) for s in plan.steps] == [(1, "UNKNOWN 1", False), (0, "Ann", False),
                                                              (2, "Bo", True)]
    assert plan.suffix == pytest.approx((0.2 + 0.1 + 0.3 + 0.3, 0.1 + 0.3 + 0.3, 0.3, 0.0))
