"""The one-statement path: a connected pattern's exact top-k from one Cypher statement per query (usually).

Where the in-process replica cannot serve (over its memory guard, turned off, being built), a query's graph stage
would otherwise cost one round trip per batch of expansions (about four a query on MetaQA, up to fourteen). Here
the whole pattern is matched by one statement (``cypher/match_statement.cypher``) that enumerates the bindings
within a **cost tier** and returns those within the k-th smallest GSD, with their entities' names.

Cost tiers keep the statement small: tier θ keeps, for each pattern item (a named node's candidates, an edge's
candidate types), the candidates within θ of the item's nearest one. A binding that uses a left-out candidate costs
more than ``base + gap``, where ``base`` sums each item's nearest distance and ``gap`` is the smallest distance
between an item's nearest candidate and its first left-out one (> θ). So when the tier yields k bindings and the
k-th costs less than ``base + gap``, they are the exact top-k, ties included; otherwise the next, wider tier runs.
The last tier keeps every candidate (the exhaustive statement on the candidates).

A **path cap** bounds each statement: it enumerates at most :data:`PATH_CAP` bindings; a tier that reaches it
hands the query to the expansion path (best-first, exact), so a wide 3-hop pattern costs one capped statement
plus the usual expansions, never an unbounded enumeration.

Results are ordered as the best-first matcher orders them: by GSD summed in its plan's order, then the edges
walked against the pattern's direction, then the plan's key (:mod:`engine.retrieval.matcher`). A disconnected
pattern is left to the expansion path.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

from engine._errors import DeadlineExceeded
from engine.retrieval.matcher import INF, Candidates, KGEdge, Match, SearchStats, make_plan, run_before
from engine.retrieval.statements import match_statement

if TYPE_CHECKING:  # pragma: no cover
    from engine._config import MatchSettings
    from engine._protocols import CypherReader
    from engine.retrieval.pattern import Pattern

__all__ = ["PATH_CAP", "TIERS", "StatementMatcher"]

#: the cost tiers, as distances above each pattern item's nearest candidate (the last keeps every candidate)
TIERS = (0.35, 0.7, math.inf)
#: bindings one statement enumerates at most; a tier that reaches it goes to the expansion path
PATH_CAP = 4_000
#: rows within this much of the k-th smallest GSD (as Neo4j sums it) are returned: the ties of the k-th, whatever
#: the order of summation
EPS = 1e-9


class StatementMatcher:
    """The one-statement path over one KG (``graph``: any :class:`~engine._protocols.CypherReader`)."""

    name = "statement"

    def __init__(self, graph: CypherReader, settings: MatchSettings) -> None:
        self.graph, self.settings = graph, settings

    def top_k(self, pattern: Pattern, cands: Candidates, k: int, *,
              deadline: float) -> tuple[list[Match], SearchStats, dict[int, dict[str, Any]]] | None:
        """The exact top-k matches with the search's statistics and the names of their entities and of the named
        nodes' nearest candidates (``{eid: {eid, name, key}}``); None when the statement cannot serve (a
        disconnected pattern, a tier at the path cap), and the caller takes the expansion path."""
        if not pattern.is_connected():
            return None
        stats = SearchStats()
        plan = make_plan(pattern, cands)
        tiers = self._tiers(pattern, cands)
        if tiers is None:  # an item without candidates: no binding exists
            return [], stats, {}
        near = sorted({e for n in pattern.known_nodes
                       for e, _ in sorted((cands.nodes[n.id] or {}).items(), key=lambda kv: (kv[1], kv[0]))[:16]})
        st = self.settings
        # every edge filtered by its tier's types (the whole catalog for a wildcard relation), every tier present:
        # the text depends on the pattern's shape alone, and Neo4j plans it once
        query = match_statement(pattern, [n for n in pattern.nodes if cands.nodes[n] is not None],
                                [[e.index for e in pattern.edges]] * len(tiers), distinct=st.distinct,
                                directed=st.directed)
        params: dict[str, Any] = {f"tier{t}": p for t, p in enumerate(tiers)}
        params.update(cap=PATH_CAP, k=k, eps=EPS, near=near)
        try:
            rows = run_before(self.graph, query, params, deadline)
        except DeadlineExceeded:
            stats.deadline_hit = True
            stats.warnings.append(
                f"deadline of {st.deadline_s:g} s expired: results are the best found so far, not exact")
            return [], stats, {}
        stats.queries += 1
        row = rows[0]
        tier, n, top = int(row["tier"]), int(row["n"]), row["top"]
        stats.rows += len(top)
        stats.expansions = tier + 1  # the tiers that ran
        if tier < 0 or n >= PATH_CAP:
            return None  # too wide for one statement: the expansion path
        got = _ordered(pattern, cands, plan, top)
        bound, last = tiers[tier]["bound"], tiers[tier]["last"]
        if len(got) >= k and (last or got[k - 1].gsd < bound):
            return got[:k], stats, _names(row["names"])
        if len(got) < k and last and len(top) == n:
            return got, stats, _names(row["names"])
        # duplicate rows hid some bindings, or Neo4j's sum and the matcher's disagree at the bound's last digit
        return None

    def _tiers(self, pattern: Pattern, cands: Candidates) -> list[dict[str, Any]] | None:
        """Each tier's parameters (one per :data:`TIERS`): candidates, distances, ``bound`` (a binding that uses a
        left-out candidate costs more), ``last`` and ``skip`` (it would keep what the one before kept). None when
        some item has no candidate (no binding exists)."""
        out: list[dict[str, Any]] = []
        base = _base(pattern, cands)
        for theta in TIERS:
            params: dict[str, Any] = {"index": len(out)}
            gap = INF
            for i, nid in enumerate(pattern.nodes):
                c = cands.nodes[nid]
                if c is None:
                    continue
                if not c:
                    return None
                kept, g = _within(c, theta)
                gap = min(gap, g)
                params[f"c_n{i}"] = list(kept)
                if pattern.nodes[nid].known:
                    params[f"d_n{i}"] = {str(e): d for e, d in kept.items()}
            for e in pattern.edges:
                rel = cands.relations[e.index]
                if not rel:
                    return None
                kept_t, g = _within(rel, theta)
                gap = min(gap, g)
                params[f"t_r{e.index}"] = sorted(kept_t)
                params[f"d_r{e.index}"] = dict(kept_t)
            params["last"] = gap == INF
            # strictly below: a binding at exactly base + gap would tie the k-th; EPS covers the order of summation
            params["bound"] = base + gap - EPS if gap < INF else 1e300
            # a tier that keeps what the one before kept (or comes after the last) is not run
            params["skip"] = bool(out) and (out[-1]["last"] or out[-1]["bound"] == params["bound"])
            out.append(params)
        return out


def _within(c: Mapping[Any, float], theta: float) -> tuple[dict[Any, float], float]:
    """The candidates within ``theta`` of the nearest, and how far the first left-out one is from the nearest."""
    lo = min(c.values())
    kept = {x: d for x, d in c.items() if d - lo <= theta}
    out = [d - lo for d in c.values() if d - lo > theta]
    return kept, (min(out) if out else INF)


def _base(pattern: Pattern, cands: Candidates) -> float:
    """The smallest GSD any binding could have: each costed item (a known node, an edge) at its nearest candidate."""
    total = 0.0
    for n in pattern.known_nodes:
        c = cands.nodes[n.id] or {}
        total += min(c.values()) if c else INF
    for e in pattern.edges:
        r = cands.relations[e.index]
        total += min(r.values()) if r else INF
    return total


def _ordered(pattern: Pattern, cands: Candidates, plan: Any, top: list[list[Any]]) -> list[Match]:
    """The statement's rows as matches, costed and ordered as the best-first matcher emits them: GSD summed step by
    step in its plan's order, then edges against the pattern's direction, then the plan's key."""
    node_ids = list(pattern.nodes)
    out: list[Match] = []
    seen: set[Any] = set()
    for _gsd, eids, rels in top:
        nodes = dict(zip(node_ids, eids))
        edges = {e.index: KGEdge(int(r[0]), r[1], int(r[2])) for e, r in zip(pattern.edges, rels)}
        rd: dict[int, float] = {}
        for e in pattern.edges:
            d = cands.relations[e.index].get(edges[e.index].type)
            if d is not None:
                rd[e.index] = d
        if len(rd) < len(pattern.edges):
            continue  # a relationship type outside the catalog (an untyped wildcard edge found it)
        sig = (tuple(sorted(nodes.items())), tuple(sorted(edges.items())))
        if sig in seen:
            continue
        seen.add(sig)
        root_c = cands.nodes[plan.root] or {}
        cost = root_c[nodes[plan.root]]
        key: tuple[Any, ...] = (nodes[plan.root],)
        rev = 0
        for s in plan.steps:
            kge = edges[s.edge]
            dst_c = None if s.closes else cands.nodes[s.dst]
            node_cost = 0.0 if dst_c is None else dst_c[nodes[s.dst]]
            cost = cost + rd[s.edge] + node_cost
            if kge.start != kge.end and (kge.start == nodes[s.src]) != s.forward:
                rev += 1
            key += (kge.type, kge.start, kge.end)
        out.append(Match(cost, nodes, edges, key, rev))
    out.sort(key=lambda m: (m.gsd, m.reversed, m.key))
    return out


def _names(rows: list[list[Any]]) -> dict[int, dict[str, Any]]:
    return {int(e): {"eid": int(e), "name": name, "key": key} for e, name, key in rows}
