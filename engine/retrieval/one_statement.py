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
plus the usual expansions, never an unbounded enumeration. A **time budget** (:data:`STATEMENT_BUDGET_S`) bounds
the rest (a statement that expands every relationship of hub candidates: Neo4j cannot filter them by a type list
before reading them); a pattern shape whose statements keep running over it goes straight to the expansion path
for a while (:data:`BACKOFF_AFTER`, :data:`BACKOFF_QUERIES`).

Results are ordered as the best-first matcher orders them: by GSD summed in its plan's order, then the edges
walked against the pattern's direction, then the plan's key (:mod:`engine.retrieval.matcher`). A disconnected
pattern is left to the expansion path, and so is a query whose degree cap (``MatchSettings.degree_cap``) is below
the path cap: the expansion path truncates a wildcard expansion at the cap and warns; a statement would not.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from engine._errors import DeadlineExceeded, StoreError
from engine.retrieval.matcher import INF, Candidates, KGEdge, Match, SearchStats, make_plan, run_before
from engine.retrieval.statements import match_statement

if TYPE_CHECKING:  # pragma: no cover
    from engine._config import MatchSettings
    from engine._protocols import CypherReader
    from engine.retrieval.pattern import Pattern

__all__ = ["PATH_CAP", "STATEMENT_BUDGET_S", "TIERS", "StatementMatcher", "forget_backoff"]

#: the cost tiers, as distances above each pattern item's nearest candidate (the last keeps every candidate)
TIERS = (0.3, 0.6, 0.9, 1.2, math.inf)
#: bindings one statement enumerates at most; a tier that reaches it goes to the expansion path
PATH_CAP = 2_000
#: rows within this much of the k-th smallest GSD (as Neo4j sums it) are returned: the ties of the k-th, whatever
#: the order of summation
EPS = 1e-9
#: seconds one statement may take (within the query's deadline); past it, the expansion path takes the query
STATEMENT_BUDGET_S = 0.25
#: ... the first statement of a pattern shape in a process (Neo4j plans its text: hundreds of ms on a busy machine)
FIRST_BUDGET_S = 3.0
#: a pattern shape whose statements ran over their budget this many times in a row goes straight to the expansion
#: path for the next BACKOFF_QUERIES queries of that shape, then tries one statement again (a statement at the path
#: cap is no such sign: the cap depends on the query's candidates, and a capped statement costs little)
BACKOFF_AFTER = 3
BACKOFF_QUERIES = 100

_FAILS: dict[tuple[str, str], int] = {}
_BACKOFF: dict[tuple[str, str], int] = {}
_SEEN: set[tuple[str, str]] = set()


def forget_backoff() -> None:
    """Forget which pattern shapes were sent to the expansion path for a while (every shape tries a statement)."""
    _FAILS.clear()
    _BACKOFF.clear()


def _abandoned(shape: tuple[str, str]) -> None:
    n = _FAILS[shape] = _FAILS.get(shape, 0) + 1
    if n >= BACKOFF_AFTER:
        _FAILS[shape] = BACKOFF_AFTER - 1  # one more failure after the pause backs off again
        _BACKOFF[shape] = BACKOFF_QUERIES


class StatementMatcher:
    """The one-statement path over one KG (``graph``: any :class:`~engine._protocols.CypherReader`)."""

    name = "statement"

    def __init__(self, graph: CypherReader, settings: MatchSettings) -> None:
        self.graph, self.settings = graph, settings

    def top_k(self, pattern: Pattern, cands: Candidates, k: int, *,
              deadline: float) -> tuple[list[Match], SearchStats, dict[int, dict[str, Any]]] | None:
        """The exact top-k matches with the search's statistics and the names of their entities and of the named
        nodes' nearest candidates (``{eid: {eid, name, key}}``); None when the statement cannot serve (a
        disconnected pattern, a tier at the path cap, a degree cap below the path cap), and the caller takes the
        expansion path."""
        if not pattern.is_connected() or self.settings.degree_cap < PATH_CAP:
            # a statement enumerates every relationship of a binding's nodes: a degree cap it cannot reach (the
            # default, above the path cap) changes nothing, a lower one is the expansion path's to apply and warn of
            return None
        stats = SearchStats()
        plan = make_plan(pattern, cands)
        made = self._tiers(pattern, cands)
        if made is None:  # an item without candidates: no binding exists
            return [], stats, {}
        shared, tiers = made
        near = sorted({e for n in pattern.known_nodes
                       for e, _ in sorted((cands.nodes[n.id] or {}).items(), key=lambda kv: (kv[1], kv[0]))[:16]})
        st = self.settings
        query = _statement(pattern, cands, len(tiers), st.distinct, st.directed)
        shape = (self.graph.kg, query)
        if _BACKOFF.get(shape, 0) > 0:  # this shape's statements were abandoned lately: straight to expansions
            _BACKOFF[shape] -= 1
            return None
        params: dict[str, Any] = {f"tier{t}": p for t, p in enumerate(tiers)}
        params.update(shared, cap=PATH_CAP, k=k, eps=EPS, near=near)
        # the first statement of a shape in this process may include Neo4j's planning of its text
        budget = min(deadline, time.monotonic() + (STATEMENT_BUDGET_S if shape in _SEEN else FIRST_BUDGET_S))
        _SEEN.add(shape)
        try:
            out = _read_one(self.graph, query, params, budget)
        except DeadlineExceeded:
            if time.monotonic() < deadline:  # over its own budget, not the query's: the expansion path takes it
                _abandoned(shape)
                return None
            stats.deadline_hit = True
            stats.warnings.append(
                f"deadline of {st.deadline_s:g} s expired: results are the best found so far, not exact")
            return [], stats, {}
        stats.queries += 1
        tier, n, top, names = int(out[0]), int(out[1]), out[2], out[3]
        stats.rows += len(top)
        stats.tier = tier + 1
        if tier < 0 or n >= PATH_CAP:
            return None  # too wide for one statement (this query's candidates): the expansion path
        _FAILS.pop(shape, None)
        got = _ordered(pattern, cands, plan, top)
        bound, last = tiers[tier]["bound"], tiers[tier]["last"]
        if len(got) >= k and (last or got[k - 1].gsd < bound):
            return got[:k], stats, _names(names)
        if len(got) < k and last and len(top) == n:
            return got, stats, _names(names)
        # duplicate rows hid some bindings, or Neo4j's sum and the matcher's disagree at the bound's last digit
        return None

    def _tiers(self, pattern: Pattern, cands: Candidates) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """The statement's candidate lists (nearest first) and distances, and each tier's parameters (one per
        :data:`TIERS`): how many of each list it keeps (a tier keeps a prefix), ``bound`` (a binding that uses a
        left-out candidate costs more), ``last`` and ``skip`` (it would keep what the one before kept). None when
        some item has no candidate (no binding exists)."""
        shared: dict[str, Any] = {}
        lists: list[tuple[str, list[float]]] = []  # (tier key, distances nearest first)
        for i, nid in enumerate(pattern.nodes):
            c = cands.nodes[nid]
            if c is None:
                continue
            if not c:
                return None
            ordered = sorted(c.items(), key=lambda kv: (kv[1], kv[0]))
            shared[f"c_n{i}"] = [e for e, _ in ordered]
            if pattern.nodes[nid].known:
                shared[f"d_n{i}"] = {str(e): d for e, d in ordered}
            lists.append((f"k_n{i}", [d for _, d in ordered]))
        for e in pattern.edges:
            rel = cands.relations[e.index]
            if not rel:
                return None
            ordered_t = sorted(rel.items(), key=lambda kv: (kv[1], kv[0]))
            shared[f"t_r{e.index}"] = [t for t, _ in ordered_t]
            shared[f"d_r{e.index}"] = dict(ordered_t)
            lists.append((f"k_r{e.index}", [d for _, d in ordered_t]))
        base = sum(ds[0] for key, ds in lists if not key.startswith("k_n") or _known(pattern, key))
        out: list[dict[str, Any]] = []
        for theta in TIERS:
            params: dict[str, Any] = {"index": len(out)}
            gap = INF
            for key, ds in lists:
                keep = sum(1 for d in ds if d - ds[0] <= theta)
                params[key] = keep
                if keep < len(ds) and (not key.startswith("k_n") or _known(pattern, key)):
                    gap = min(gap, ds[keep] - ds[0])
            params["last"] = gap == INF
            # strictly below: a binding at exactly base + gap would tie the k-th; EPS covers the order of summation
            params["bound"] = base + gap - EPS if gap < INF else 1e300
            # a tier that keeps what the one before kept (or comes after the last) is not run
            params["skip"] = bool(out) and (out[-1]["last"] or all(out[-1][k] == params[k] for k, _ in lists))
            out.append(params)
        return shared, out


#: statement texts by pattern shape (the text depends on nothing else; rendering one costs about 2 ms)
_TEXTS: dict[tuple[Any, ...], str] = {}
_TEXTS_MAX = 4096


def _statement(pattern: Pattern, cands: Candidates, tiers: int, distinct: str, directed: bool) -> str:
    """The statement for the pattern's shape: every edge filtered by its tier's types (the whole catalog for a
    wildcard relation), every tier present, so that the text depends on the shape alone and Neo4j plans it once."""
    ids = list(pattern.nodes)
    filtered = tuple(cands.nodes[n] is not None for n in ids)
    shape = (tuple((ids.index(e.head), ids.index(e.tail)) for e in pattern.edges),
             tuple(pattern.nodes[n].known for n in ids), filtered, tiers, distinct, directed)
    text = _TEXTS.get(shape)
    if text is None:
        text = match_statement(pattern, [n for n, f in zip(ids, filtered) if f],
                               [[e.index for e in pattern.edges]] * tiers, distinct=distinct, directed=directed)
        if len(_TEXTS) >= _TEXTS_MAX:
            _TEXTS.clear()
        _TEXTS[shape] = text
    return text


def _read_one(graph: CypherReader, query: str, params: dict[str, Any], deadline: float) -> Any:
    """The statement's one value, within the deadline: decoded as the driver gives it where the graph store can
    (:meth:`engine.stores.graph.GraphStore.read_one`: no conversion pass over its nested lists), else by ``read``."""
    one = getattr(graph, "read_one", None)
    if one is None:
        return run_before(graph, query, params, deadline)[0]["out"]
    import neo4j

    left = deadline - time.monotonic()
    if left <= 0:
        raise DeadlineExceeded("the query deadline expired")
    try:
        return one(neo4j.Query(query, timeout=max(left, 0.001)), **params)
    except DeadlineExceeded as e:
        raise DeadlineExceeded(f"the query deadline expired during graph search ({e})") from e
    except StoreError as e:
        if time.monotonic() >= deadline:
            raise DeadlineExceeded(f"the query deadline expired during graph search ({e})") from e
        raise


def _known(pattern: Pattern, key: str) -> bool:
    """Whether the node of a tier key ``k_n<i>`` is a named node (a typed unknown's candidates all cost 0)."""
    return pattern.nodes[list(pattern.nodes)[int(key[3:])]].known


def _ordered(pattern: Pattern, cands: Candidates, plan: Any, top: list[list[Any]]) -> list[Match]:
    """The statement's rows as matches, costed and ordered as the best-first matcher emits them: GSD summed step by
    step in its plan's order, then edges against the pattern's direction, then the plan's key."""
    node_ids = list(pattern.nodes)
    out: list[Match] = []
    seen: set[Any] = set()
    for _gsd, eids, rels in top:
        if any(x is None for x in eids) or any(x is None for r in rels for x in r):
            # an entity a change set deleted while the statement read it (Neo4j's reads are not snapshots: an
            # entity leaves with its last triple): the row is of no committed version of the KG
            continue
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
