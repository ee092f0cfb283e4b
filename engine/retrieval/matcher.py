"""Exact top-k subgraph matching by graph semantic distance (SimGRAG; the search: docs/architecture.md).

GSD(P, S) = sum over known pattern nodes v of ||z_v - z_f(v)|| + sum over pattern edges with a known
relation of ||z_r - z_f(r)||; unknown nodes and relations cost 0.

The search is best-first on an admissible lower bound, in Python, over a fixed edge order (DFS from the
root, the pattern node with the fewest candidates). The graph is never held in Python: the neighbours of a
batch of partial mappings along one pattern edge come from **one** Cypher query (``UNWIND $states ...``).

Queue entries are of two kinds:

* *expansion* ``(state, edge i, relationship type τ)``: its bound is
  ``cost(state) + d(τ) + minnode(node introduced by edge i) + suffix[i + 1]``, where ``suffix[j]`` sums,
  over the edges from j on, the minimum candidate relation distance plus the minimum candidate node distance
  of the node the edge introduces (a node is counted once, only where it is first reached: admissible on
  cyclic patterns too, unlike the published code's bound);
* *complete* ``state``: its bound is its cost (its GSD).

Entries leave the queue in (bound, reversed, key) order, where ``reversed`` counts the edges mapped against
the pattern's direction so far (undirected mode; it never decreases as a state grows, so it bounds itself)
and ``key`` lists what the state mapped, edge by edge. A complete state that reaches the front has a GSD at
most every bound left, so complete states leave the queue in exact (GSD, reversed, key) order: the first k
are the exact top-k, ties broken first in favour of the pattern's direction, then by key, and no isomorphic
subgraph with a smaller GSD exists (the bound is admissible).

What must be distinct is :attr:`MatchSettings.distinct`: KG nodes and relationships (``"nodes"``, subgraph
isomorphism), relationships only (``"edges"``; besides, an unknown node never binds the entity of a known
node: the question's named entities are not its answers), or nothing (``"none"``). Popping a batch of expansions at once
and expanding them with one query per pattern edge changes the number of round trips, never the result.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Container, Iterator, Mapping, NamedTuple, Protocol, Sequence

from engine._config import MatchSettings
from engine._cypher import cypher
from engine.retrieval.statements import expand_statement
from engine._errors import DeadlineExceeded, PatternError, StoreError
from engine.retrieval.pattern import Pattern

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import CypherReader
    from engine.linking.names import NameMatch

INF = math.inf
#: an unknown node's domain is narrowed by its known neighbours only when each gives at most this many entities
DOMAIN_CAP = 50_000
#: the expansion statements carry a relationship-type alternation only for KGs with at most this many types
ALTERNATION_MAX_CATALOG = 16
#: an expansion into a node with candidates reads the relationships of a source of at most this degree; a source
#: above it (a hub) is reached from the candidates' side when their total degree is smaller (``_expand``)
DENSE_DEGREE = 2_000
#: ... when the candidates' total degree is below this multiple of the hub sources' total degree
CANDIDATE_SIDE_RATIO = 1.0


# ---------------------------------------------------------------------------------------------------
# candidates
# ---------------------------------------------------------------------------------------------------
@dataclass
class Candidates:
    """Candidate KG items for each pattern item, with their distances.

    ``nodes[node_id]`` is ``{eid: distance}`` or ``None`` for a wildcard (an untyped unknown node);
    ``relations[edge_index]`` is ``{relationship type: distance}`` (an unknown relation maps every type of
    the KG's schema to 0).
    """

    nodes: dict[str, dict[int, float] | None]
    relations: dict[int, dict[str, float]]
    #: relationship type -> original relation name (the KG's catalog)
    type_names: dict[str, str] = field(default_factory=dict)
    #: node ids whose candidates were cut (a typed unknown past TYPE_CANDIDATE_LIMIT): the result is not exact
    cut: dict[str, str] = field(default_factory=dict)
    #: per named node: how each candidate matched its text (the name or alias, by spelling or meaning), whose
    #: ``distance`` is the one in ``nodes`` (:func:`engine.linking.names.node_distance`)
    names: dict[str, dict[int, NameMatch]] = field(default_factory=dict)

    def node_count(self, node_id: str) -> float:
        c = self.nodes[node_id]
        return INF if c is None else len(c)

    def node_min(self, node_id: str) -> float:
        c = self.nodes[node_id]
        if c is None:
            return 0.0
        return min(c.values()) if c else INF

    def rel_min(self, edge_index: int) -> float:
        c = self.relations[edge_index]
        return min(c.values()) if c else INF


# ---------------------------------------------------------------------------------------------------
# plan: root, edge order, bounds
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One pattern edge in search order: from an already-mapped node ``src`` to ``dst``."""

    edge: int          # index in the pattern's edges
    src: str           # mapped before this step
    dst: str           # mapped before (``closes``) or introduced by this step
    closes: bool       # both ends already mapped: a cycle-closing edge, a multi-edge or a self-loop
    forward: bool      # the pattern edge's head is ``src`` (direction matters only in directed mode)


@dataclass(frozen=True)
class Plan:
    root: str
    steps: tuple[Step, ...]
    #: suffix[i] = admissible lower bound of the cost added by steps i, i+1, ...
    suffix: tuple[float, ...]
    #: node_order[i]: pattern node introduced at step i (root at position 0 of ``nodes``)
    nodes: tuple[str, ...]


def make_plan(pattern: Pattern, cands: Candidates) -> Plan:
    """Root with the fewest candidates; edges in DFS order from it, high-degree neighbours first."""
    if not pattern.edges:
        raise PatternError("a pattern needs at least one triple")
    node_ids = list(pattern.nodes)
    root = min(node_ids, key=lambda n: (cands.node_count(n), -pattern.degree(n), node_ids.index(n)))
    if cands.nodes[root] is None:
        raise PatternError(
            "every node of the pattern (or of one of its connected components) is an unknown without a usable "
            "type: there is nothing to anchor the search. Name at least one entity, or type the unknown "
            "node (e.g. 'UNKNOWN person 1') in a KG that has entity types."
        )
    visited = {root}
    used: set[int] = set()
    steps: list[Step] = []
    order = [root]

    def dfs(u: str) -> None:
        nbrs = sorted(pattern.neighbors(u), key=lambda ev: (-pattern.degree(ev[1]), ev[0].index))
        for edge, v in nbrs:
            if edge.index in used:
                continue
            used.add(edge.index)
            closes = v in visited
            steps.append(Step(edge.index, u, v, closes, edge.head == u))
            if not closes:
                visited.add(v)
                order.append(v)
                dfs(v)

    dfs(root)
    if len(used) != len(pattern.edges):
        raise PatternError("make_plan needs a connected pattern (match each component separately)")
    suffix = [0.0] * (len(steps) + 1)
    for i in range(len(steps) - 1, -1, -1):
        s = steps[i]
        add = cands.rel_min(s.edge) + (0.0 if s.closes else cands.node_min(s.dst))
        suffix[i] = suffix[i + 1] + add
    return Plan(root, tuple(steps), tuple(suffix), tuple(order))


# ---------------------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------------------
class KGEdge(NamedTuple):
    """A KG relationship as stored: ``start -[type]-> end`` (a named tuple: the search makes one per candidate
    relationship, and a frozen dataclass costs several times as much to make and to hash)."""

    start: int
    type: str
    end: int


@dataclass
class Match:
    """A complete mapping of one (connected) pattern: node -> eid, edge -> KG relationship."""

    gsd: float
    nodes: dict[str, int]
    edges: dict[int, KGEdge]
    key: tuple[Any, ...] = ()
    #: edges mapped against the pattern's direction (0 in directed mode)
    reversed: int = 0


@dataclass
class SearchStats:
    queries: int = 0
    rows: int = 0
    expansions: int = 0
    pushed: int = 0
    truncated: int = 0          # wildcard expansions cut at the degree cap
    #: expansions from hubs answered from the side of the destination's candidates (see Matcher._expand_hubs)
    from_candidates: int = 0
    #: unknown nodes whose domain was narrowed by their known neighbours, and its size
    narrowed: dict[str, int] = field(default_factory=dict)
    deadline_hit: bool = False
    warnings: list[str] = field(default_factory=list)
    #: the one-statement path: the cost tier that settled the top-k (1 = the narrowest), 0 elsewhere
    tier: int = 0

    def merge(self, other: "SearchStats") -> None:
        self.queries += other.queries
        self.rows += other.rows
        self.expansions += other.expansions
        self.pushed += other.pushed
        self.truncated += other.truncated
        self.from_candidates += other.from_candidates
        self.narrowed.update(other.narrowed)
        self.deadline_hit = self.deadline_hit or other.deadline_hit
        self.warnings.extend(other.warnings)
        self.tier = max(self.tier, other.tier)


# ---------------------------------------------------------------------------------------------------
# the search
# ---------------------------------------------------------------------------------------------------
class _State:
    __slots__ = ("cost", "step", "nodes", "edges", "key", "rev")

    def __init__(self, cost: float, step: int, nodes: dict[str, int], edges: dict[int, KGEdge],
                 key: tuple[Any, ...], rev: int) -> None:
        self.cost = cost
        self.rev = rev          # edges mapped against the pattern's direction (never more as the state grows)
        self.step = step        # index of the next step to take
        self.nodes = nodes
        self.edges = edges
        self.key = key


_EXPAND = 0
_DONE = 1


@dataclass(frozen=True)
class Fetch:
    """What one batch of expansions along a pattern edge asks of the graph (:meth:`ExpansionSource.fetch`).

    ``rows``: ``{"id", "h", "types"}`` (and ``"t"``, the entity the edge closes on, when ``step.closes``), one per
    distinct expansion; ``types`` lists the relationship types the row wants, ``None`` any type. ``alt``: the
    edge's candidate types written into the statement (small catalogs only; ``None``: untyped), ``allowed`` the
    KG's catalog, ``forward`` the direction from the mapped node (``None``: either), ``cands`` the destination's
    candidates (``None``: any entity) and ``cap`` the most relationships one row returns (a wildcard edge into a
    wildcard node; ``None``: no cap).
    """

    step: Step
    rows: list[dict[str, Any]]
    alt: Sequence[str] | None
    allowed: Container[str]
    forward: bool | None
    cands: list[int] | None
    cap: int | None


class ExpansionSource(Protocol):
    """Where the best-first search reads the graph: the relationships of a batch of expansions, and the domains
    that narrow unknown nodes. :class:`CypherExpansions` reads Neo4j; the in-process read replica
    (:class:`engine.retrieval.replica.ReplicaExpansions`) answers the same calls from its arrays. Both return the
    same rows for the same KG version (the order within a row may differ), so the search, its bound, its tie-break
    and its result do not depend on the source."""

    #: names the source in a result's statistics (``"expand"``, ``"replica"``)
    name: str

    def fetch(self, f: Fetch, deadline: float, stats: SearchStats, memo: dict[str, Any]) -> dict[int, list[list[Any]]]:
        """Row id -> its relationships ``[type, starts at h, other end's eid]`` (``memo``: per search, the
        source's own)."""
        ...

    def neighbours(self, rows: list[dict[str, Any]], cap: int, deadline: float,
                   stats: SearchStats) -> dict[int, list[int]]:
        """For rows ``{"id", "cands", "types"}``: the distinct entities adjacent to any of ``cands`` through any of
        ``types`` (``None``: any type), either direction; at least ``cap`` of them when there are that many."""
        ...


class CypherExpansions:
    """The expansion path: one statement per batch of expansions along a pattern edge (``cypher/match_expand*``),
    hubs above :data:`DENSE_DEGREE` reached from the candidates' side when that is cheaper."""

    name = "expand"

    def __init__(self, graph: CypherReader) -> None:
        self.graph = graph

    @staticmethod
    def statement(types: Sequence[str] | None, allowed: Container[str], forward: bool | None,
                  closes: bool, filter_nodes: bool, capped: bool, dense: int | None = None) -> str:
        """One statement for a batch of states along one pattern edge
        (:func:`engine.retrieval.statements.expand_statement`: ``types`` checked against ``allowed``, the KG's
        catalog); every value is a parameter."""
        return expand_statement(types, allowed, forward, closes=closes, filter_nodes=filter_nodes,
                                capped=capped, split=filter_nodes and dense is not None)

    def run(self, query: str, params: dict[str, Any], deadline: float) -> list[dict[str, Any]]:
        """The rows of a read, with what is left of the deadline as its timeout."""
        return run_before(self.graph, query, params, deadline)

    def fetch(self, f: Fetch, deadline: float, stats: SearchStats, memo: dict[str, Any]) -> dict[int, list[list[Any]]]:
        step = f.step
        split = f.cands is not None and not step.closes
        query = self.statement(f.alt, f.allowed, f.forward, step.closes, f.cands is not None, f.cap is not None,
                               dense=DENSE_DEGREE if split else None)
        params: dict[str, Any] = {"states": f.rows}
        if f.cands is not None:
            params["cands"] = f.cands
        if f.cap is not None:
            params["cap"] = f.cap
        if split:
            params["dense"] = DENSE_DEGREE
        rows = self.run(query, params, deadline)
        stats.queries += 1
        # one record per row (a record per relationship costs the driver ~0.1 ms each)
        hits_of: dict[int, list[list[Any]]] = {r["sid"]: r["hits"] for r in rows}
        if split:
            dense_rows = {r["sid"]: r["deg"] for r in rows if r["deg"] > DENSE_DEGREE}
            if dense_rows:
                by_id = {row["id"]: row for row in f.rows}
                hubs: dict[str, int] = memo.setdefault("candidate_degree", {})
                hits_of.update(self._expand_hubs(f, [by_id[sid] for sid in dense_rows], sum(dense_rows.values()),
                                                 deadline, stats, hubs))
        return hits_of

    def _expand_hubs(self, f: Fetch, rows_in: list[dict[str, Any]], degree: int, deadline: float,
                     stats: SearchStats, hubs: dict[str, int]) -> dict[int, list[list[Any]]]:
        """Hits of expansions whose sources have more than DENSE_DEGREE relationships (``degree`` in all).

        When the candidates of ``step.dst`` have fewer relationships in all than those sources, the
        relationships between them and the sources are fetched from the candidates' side; each source then
        takes its own, filtered by its types and the edge's direction. Otherwise the sources are expanded as
        usual. The rows are the same either way. ``hubs``: per search, the candidates' total degree by pattern node.
        """
        step, dst_eids, forward = f.step, f.cands or [], f.forward
        cand_degree = hubs.get(step.dst)
        if cand_degree is None:
            res = self.run(cypher("candidates_degree"), {"cands": dst_eids}, deadline)
            stats.queries += 1
            cand_degree = hubs[step.dst] = int(res[0]["degree"] or 0) if res else 0
        if cand_degree >= degree * CANDIDATE_SIDE_RATIO:
            query = self.statement(f.alt, f.allowed, forward, False, True, False)
            res = self.run(query, {"states": rows_in, "cands": dst_eids}, deadline)
            stats.queries += 1
            return {r["sid"]: r["hits"] for r in res}
        res = self.run(cypher("expand_from_candidates"),
                       {"cands": dst_eids, "srcs": sorted({row["h"] for row in rows_in})}, deadline)
        stats.queries += 1
        side: dict[int, list[list[Any]]] = {r["h"]: r["hits"] for r in res}
        stats.from_candidates += len(rows_in)
        out: dict[int, list[list[Any]]] = {}
        for row in rows_in:
            types = row["types"]
            keep = set(types) if types is not None else None
            # (a self-loop matches either direction)
            out[row["id"]] = [x for x in side.get(row["h"], ()) if (keep is None or x[0] in keep)
                              and (forward is None or x[1] == forward or x[2] == row["h"])]
        return out

    def neighbours(self, rows: list[dict[str, Any]], cap: int, deadline: float,
                   stats: SearchStats) -> dict[int, list[int]]:
        res = self.run(cypher("domain_neighbours"), {"rows": rows, "cap": cap}, deadline)
        stats.queries += 1
        return {r["id"]: r["eids"] for r in res}


def run_before(graph: CypherReader, query: str, params: dict[str, Any], deadline: float) -> list[dict[str, Any]]:
    """The rows of a read through ``graph``, with what is left of ``deadline`` (``time.monotonic()``) as its
    timeout; a read stopped by it, or stopped otherwise once it had passed, is :class:`DeadlineExceeded`."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise DeadlineExceeded("the query deadline expired")
    import neo4j

    q = neo4j.Query(query, timeout=max(left, 0.001))
    try:
        return graph.read(q, **params)
    except DeadlineExceeded as e:  # the graph store recognises a timeout by Neo4j's status code
        raise DeadlineExceeded(f"the query deadline expired during graph search ({e})") from e
    except StoreError as e:
        if time.monotonic() >= deadline:  # stopped otherwise (terminated) once the deadline had passed
            raise DeadlineExceeded(f"the query deadline expired during graph search ({e})") from e
        raise


class Matcher:
    """Best-first exact matcher over one KG (``graph``: an :class:`engine.stores.graph.GraphStore`, or any
    :class:`~engine._protocols.CypherReader`), reading the graph through ``source`` (default: the expansion
    path, :class:`CypherExpansions` over ``graph``)."""

    def __init__(self, graph: CypherReader, settings: MatchSettings | None = None, *,
                 source: ExpansionSource | None = None) -> None:
        self.graph = graph
        self.settings = settings or MatchSettings()
        self.source: ExpansionSource = source if source is not None else CypherExpansions(graph)

    # -- best-first ------------------------------------------------------------------------------------
    def iter_matches(self, pattern: Pattern, cands: Candidates, *, deadline: float | None = None,
                     stats: SearchStats | None = None) -> Iterator[Match]:
        """Complete matches of a connected pattern in exact (GSD, key) order.

        Kept whole: one best-first search, a generator over one ``heap``: the per-step tables (``step_rels``,
        ``step_node_min``, ``whole``), ``counter``, ``cache`` and ``memo`` are shared by the closures that push and the
        loop that pops, batches and yields, and the lazy per-type pushes keep the exact order only with both in view.
        """
        st = self.settings
        stats = stats if stats is not None else SearchStats()
        deadline = deadline if deadline is not None else time.monotonic() + st.deadline_s
        if st.narrow:
            try:
                cands = self._narrow(pattern, cands, deadline, stats)
            except DeadlineExceeded:
                stats.deadline_hit = True
                stats.warnings.append(
                    f"deadline of {st.deadline_s:g} s expired: results are the best found so far, not exact")
                return
        plan = make_plan(pattern, cands)
        steps, suffix = plan.steps, plan.suffix
        edges = pattern.edges
        all_types = sorted(cands.type_names)
        distinct, directed = st.distinct, st.directed
        known = frozenset(n.id for n in pattern.known_nodes)
        # per step: relation candidates sorted by distance
        step_rels: list[list[tuple[float, str]]] = [
            sorted((d, t) for t, d in cands.relations[s.edge].items()) for s in steps
        ]
        step_node_min = [0.0 if s.closes else cands.node_min(s.dst) for s in steps]
        # a typed / known endpoint is filtered in Cypher; a wildcard endpoint with a wildcard relation is capped
        wildcard_rel = [edges[s.edge].relation is None for s in steps]
        # an edge into a bounded set (a closing edge, or an endpoint with candidates) is fetched for all its
        # candidate types at once: the rows are few, and each child carries its exact cost. An edge into a
        # wildcard endpoint is split per type, so that the bound includes the type's distance and a far type's
        # (possibly large) expansion is fetched only when the search reaches it.
        whole = [wildcard_rel[i] or s.closes or cands.nodes[s.dst] is not None for i, s in enumerate(steps)]
        step_rel_min = [min(d for d, _ in rels) if rels else INF for rels in step_rels]
        # (bound, reversed, key, _EXPAND or _DONE, push order, (state, type, type index) or the complete state)
        heap: list[tuple[float, int, tuple[Any, ...], int, int, Any]] = []
        counter = itertools.count()
        cache: dict[tuple[int, int, int | None, str | None], list[list[Any]]] = {}
        memo: dict[str, Any] = {}  # the source's own, per search

        def push_state(state: _State) -> None:
            if state.step == len(steps):
                heapq.heappush(heap, (state.cost, state.rev, state.key, _DONE, next(counter), state))
                stats.pushed += 1
                return
            i = state.step
            base = state.cost + step_node_min[i] + suffix[i + 1]
            if wildcard_rel[i]:
                heapq.heappush(heap, (base, state.rev, state.key, _EXPAND, next(counter), (state, None, -1)))
                stats.pushed += 1
                return
            if not step_rels[i]:
                return
            if whole[i]:
                heapq.heappush(heap, (base + step_rel_min[i], state.rev, state.key, _EXPAND, next(counter),
                                      (state, None, -1)))
                stats.pushed += 1
                return
            push_type(state, base, 0)

        def push_type(state: _State, base: float, j: int) -> None:
            # per-type entries are pushed lazily, the next one when this one is popped: types are sorted by
            # (distance, name), so the successor's (bound, key) never precedes its predecessor's and the order
            # of the search, ties included, is that of pushing them all at once (1024 root candidates x 64
            # types would be 65k entries, most never popped)
            d, t = step_rels[state.step][j]
            heapq.heappush(heap, (base + d, state.rev, state.key + (t,), _EXPAND, next(counter), (state, t, j)))
            stats.pushed += 1

        root_c = cands.nodes[plan.root] or {}
        for eid, d in sorted(root_c.items(), key=lambda kv: (kv[1], kv[0])):
            push_state(_State(d, 0, {plan.root: eid}, {}, (eid,), 0))

        window = 0.3
        while heap:
            if time.monotonic() > deadline:
                stats.deadline_hit = True
                stats.warnings.append(
                    f"deadline of {st.deadline_s:g} s expired: results are the best found so far, not exact")
                return
            top = heap[0]
            if top[3] == _DONE:
                heapq.heappop(heap)
                s: _State = top[5]
                yield Match(s.cost, dict(s.nodes), dict(s.edges), s.key, s.rev)
                continue
            # pop a batch of expansions: consecutive (bound order) entries, stopping at a complete state
            first = top[0]
            batch: list[tuple[_State, str | None]] = []
            while heap and heap[0][3] == _EXPAND and len(batch) < st.batch_size and heap[0][0] <= first + window:
                state, t, j = heapq.heappop(heap)[5]
                batch.append((state, t))
                if j >= 0 and j + 1 < len(step_rels[state.step]):
                    i = state.step
                    push_type(state, state.cost + step_node_min[i] + suffix[i + 1], j + 1)
            by_step: dict[int, list[tuple[_State, str | None]]] = {}
            for state, t in batch:
                by_step.setdefault(state.step, []).append((state, t))
            try:
                for i, group in by_step.items():
                    for child in self._expand(steps[i], group, cands, all_types, distinct, known, directed,
                                              wildcard_rel[i], deadline, stats, cache, memo):
                        push_state(child)
            except DeadlineExceeded:
                stats.deadline_hit = True
                stats.warnings.append(
                    f"deadline of {st.deadline_s:g} s expired: results are the best found so far, not exact")
                return

    def _expand(self, step: Step, group: list[tuple[_State, str | None]], cands: Candidates,
                all_types: list[str], distinct: str, known: frozenset[str], directed: bool, wildcard_rel: bool,
                deadline: float, stats: SearchStats,
                cache: dict[tuple[int, int, int | None, str | None], list[list[Any]]],
                memo: dict[str, Any]) -> Iterator[_State]:
        """The children of the states of ``group`` at ``step``: their rows fetched at once, filtered and costed.

        Kept whole: the fetch fills ``cache`` under the key (edge, source, closing entity, type) that the filter
        loop reads back per state, and both use ``types``, ``dst_c`` and ``capped`` worked out at the top.
        """
        st = self.settings
        rel_c = cands.relations[step.edge]
        dst_c = None if step.closes else cands.nodes[step.dst]
        types = sorted(rel_c) if not wildcard_rel else all_types
        if not types:
            return
        # The statement's text must not depend on the candidate types: Neo4j plans every new text (300+ ms
        # for a 64-type alternation, measured), so a per-pattern alternation would be planned on every query
        # of a KG with thousands of types. The alternation is written only when the KG's catalog is small
        # (few distinct texts, each planned once, and a type-selective expansion of dense nodes); otherwise,
        # or when the edge admits every type, the relationship is untyped and each row filters by its types.
        full = len(types) >= len(all_types)
        alt = types if (not full and len(all_types) <= ALTERNATION_MAX_CATALOG) else None
        forward = (step.forward if directed else None)
        capped = (not step.closes) and wildcard_rel and dst_c is None
        # What one expansion fetches depends only on (edge, source entity, closing entity, type): states that
        # share them (the same centre reached with different seeds) are fetched once per search, and a source
        # popped with several of its types is one row.
        need: dict[tuple[int, int | None], set[str | None]] = {}
        for state, t in group:
            h = state.nodes[step.src]
            td = state.nodes[step.dst] if step.closes else None
            if (step.edge, h, td, t) not in cache:
                need.setdefault((h, td), set()).add(t)
        if need:
            keys = list(need)
            rows_in: list[dict[str, Any]] = []
            for sid, (h, td) in enumerate(keys):
                ts = need[(h, td)]
                # None: every candidate type of the edge (no filter when that is the whole catalog)
                row: dict[str, Any] = {"id": sid, "h": h,
                                       "types": (None if full else types) if None in ts else sorted(ts)}
                if step.closes:
                    row["t"] = td
                rows_in.append(row)
            fetch = Fetch(step, rows_in, alt, cands.type_names, forward, list(dst_c) if dst_c is not None else None,
                          st.degree_cap + 1 if capped else None)
            hits_of = self.source.fetch(fetch, deadline, stats, memo)
            for sid, (h, td) in enumerate(keys):
                hits = hits_of.get(sid, [])
                stats.rows += len(hits)
                for t in need[(h, td)]:
                    cache[(step.edge, h, td, t)] = hits if t is None else [x for x in hits if x[0] == t]
        stats.expansions += len(group)
        edge_key = step.edge
        for state, want in group:
            got = cache[(step.edge, state.nodes[step.src], state.nodes[step.dst] if step.closes else None, want)]
            if capped and len(got) > st.degree_cap:
                got = got[: st.degree_cap]
                stats.truncated += 1
                if stats.truncated == 1:
                    stats.warnings.append(
                        f"degree cap {st.degree_cap} reached expanding a wildcard edge: results may miss subgraphs")
            h = state.nodes[step.src]
            seen: set[KGEdge] = set()
            if step.closes or distinct == "none":
                used_nodes = None
            elif distinct == "nodes":
                used_nodes = set(state.nodes.values())
            else:  # "edges": an unknown never binds a named entity of the pattern, nor a named one an unknown's
                dst_known = step.dst in known
                used_nodes = {e for n, e in state.nodes.items() if (n in known) != dst_known}
            used_edges = set(state.edges.values()) if distinct != "none" else None
            closing = state.nodes[step.dst] if step.closes else None
            # the cheap filters first (type, then the other end); each depends on (type, other end) only, so a
            # relationship that comes back twice (an undirected self-loop) is kept or dropped alike both times
            for rtype, out, t in got:
                rd = rel_c.get(rtype)
                if rd is None:
                    continue
                if closing is not None:
                    if t != closing:
                        continue
                    node_cost = 0.0
                else:
                    if used_nodes is not None and t in used_nodes:
                        continue
                    if dst_c is None:
                        node_cost = 0.0
                    else:
                        nd = dst_c.get(t)
                        if nd is None:
                            continue
                        node_cost = nd
                start, end = (h, t) if out else (t, h)
                kge = KGEdge(start, rtype, end)
                if kge in seen:  # an undirected self-loop can come back twice
                    continue
                seen.add(kge)
                if used_edges is not None and kge in used_edges:
                    continue
                nodes = state.nodes if closing is not None else {**state.nodes, step.dst: t}
                edges = {**state.edges, edge_key: kge}
                # against the pattern's direction (undirected mode): counted for the tie-break
                rev = state.rev + (out != step.forward and start != end)
                yield _State(state.cost + rd + node_cost, state.step + 1, nodes, edges,
                             state.key + (rtype, start, end), rev)

    # -- domains -------------------------------------------------------------------------------------
    def _narrow(self, pattern: Pattern, cands: Candidates, deadline: float, stats: SearchStats) -> Candidates:
        """Candidates whose unknown nodes with two or more known neighbours keep only the entities adjacent
        to a candidate of each of those neighbours (through a candidate type of the edge between them).

        One query for the whole pattern. Every complete match binds such a node inside this intersection, so
        the top-k is unchanged; what changes is the work: a conjunction or a star whose centre is unknown is
        searched from a handful of entities instead of every neighbour of the first seed's candidates.
        """
        known = {n.id for n in pattern.known_nodes}
        by_node: dict[str, list[tuple[int, str]]] = {}
        for e in pattern.edges:
            if e.head == e.tail:
                continue
            for v, u in ((e.head, e.tail), (e.tail, e.head)):
                if v not in known and u in known and cands.nodes.get(u):
                    by_node.setdefault(v, []).append((e.index, u))
        targets = {v: es for v, es in by_node.items() if len(es) >= 2}
        if not targets:
            return cands
        n_types = len(cands.type_names)
        rows: list[dict[str, Any]] = []
        owner: list[str] = []
        for v, es in targets.items():
            for ei, u in es:
                rel = cands.relations[ei]
                rows.append({"id": len(rows), "cands": list(cands.nodes[u] or ()),
                             "types": None if len(rel) >= n_types else sorted(rel)})
                owner.append(v)
        found = self.source.neighbours(rows, DOMAIN_CAP, deadline, stats)
        sets: dict[str, set[int] | None] = {}
        for rid, eids in sorted(found.items()):
            if len(eids) >= DOMAIN_CAP:
                continue  # capped: this neighbour does not narrow
            v = owner[rid]
            cur = sets.get(v)
            sets[v] = set(eids) if cur is None else (cur & set(eids))
        if not sets:
            return cands
        nodes = dict(cands.nodes)
        for v, dom in sets.items():
            if dom is None:
                continue
            old = nodes[v]
            nodes[v] = {e: 0.0 for e in dom} if old is None else {e: d for e, d in old.items() if e in dom}
            stats.narrowed[v] = len(nodes[v] or ())
        return Candidates(nodes, cands.relations, cands.type_names, cands.cut)

    # -- public ----------------------------------------------------------------------------------------
    def top_k(self, pattern: Pattern, cands: Candidates, k: int | None = None, *,
              deadline: float | None = None) -> tuple[list[Match], SearchStats]:
        """Exact top-k matches of a pattern (connected or not), with the search's statistics."""
        k = k or self.settings.k
        stats = SearchStats()
        deadline = deadline if deadline is not None else time.monotonic() + self.settings.deadline_s
        comps = pattern.components()
        if len(comps) == 1:
            return list(itertools.islice(self.iter_matches(pattern, cands, deadline=deadline, stats=stats), k)), stats
        # disconnected: combine the components' ordered streams, best sum first (exact, lazily pulled)
        gens = [self.iter_matches(c, _sub_candidates(c, cands), deadline=deadline, stats=stats) for c in comps]
        lists: list[list[Match]] = [[] for _ in comps]
        exhausted = [False] * len(comps)

        def get(ci: int, j: int) -> Match | None:
            lst = lists[ci]
            while len(lst) <= j and not exhausted[ci]:
                try:
                    lst.append(_remap(next(gens[ci]), comps[ci]))
                except StopIteration:
                    exhausted[ci] = True
            return lst[j] if j < len(lst) else None

        def fetched(idx: tuple[int, ...]) -> list[Match]:
            # the parts of an index on the heap: each was fetched (and found) before the index was pushed
            return [lists[ci][j] for ci, j in enumerate(idx)]

        start = tuple(0 for _ in comps)
        if any(m is None for m in [get(ci, 0) for ci in range(len(comps))]):  # each component's best, fetched
            return [], stats
        first = fetched(start)
        heap = [(sum(m.gsd for m in first), sum(m.reversed for m in first), tuple(m.key for m in first), start)]
        seen = {start}
        out: list[Match] = []
        while heap and len(out) < k:
            gsd, _rev, _key, idx = heapq.heappop(heap)
            parts = fetched(idx)
            combined = _combine(parts, self.settings.distinct, frozenset(n.id for n in pattern.known_nodes))
            if combined is not None:
                out.append(combined)
            for ci in range(len(comps)):
                nxt = idx[:ci] + (idx[ci] + 1,) + idx[ci + 1:]
                if nxt in seen:
                    continue
                m = get(ci, nxt[ci])
                if m is None:
                    continue
                seen.add(nxt)
                ps = fetched(nxt)
                heapq.heappush(heap, (sum(p.gsd for p in ps), sum(p.reversed for p in ps), tuple(p.key for p in ps),
                                      nxt))
        return out, stats


def _sub_candidates(comp: Pattern, cands: Candidates) -> Candidates:
    rel = {new: cands.relations[orig] for new, orig in enumerate(comp.edge_origin)}
    return Candidates({n: cands.nodes[n] for n in comp.nodes}, rel, cands.type_names,
                      {n: w for n, w in cands.cut.items() if n in comp.nodes})


def _remap(m: Match, comp: Pattern) -> Match:
    """Edge indices of a component's match back to the whole pattern's."""
    return Match(m.gsd, m.nodes, {comp.edge_origin[i]: e for i, e in m.edges.items()}, m.key, m.reversed)


def _combine(parts: Sequence[Match], distinct: str, known: frozenset[str] | None = None) -> Match | None:
    nodes: dict[str, int] = {}
    edges: dict[int, KGEdge] = {}
    for p in parts:
        nodes.update(p.nodes)
        edges.update(p.edges)
    if distinct == "nodes" and len(set(nodes.values())) != len(nodes):
        return None
    if distinct == "edges" and known is not None:
        if {e for n, e in nodes.items() if n in known} & {e for n, e in nodes.items() if n not in known}:
            return None
    if distinct != "none" and len(set(edges.values())) != len(edges):
        return None
    return Match(sum(p.gsd for p in parts), nodes, edges, tuple(p.key for p in parts),
                 sum(p.reversed for p in parts))


def gsd_of(pattern: Pattern, cands: Candidates, nodes: Mapping[str, int], edges: Mapping[int, KGEdge]) -> float:
    """GSD of a complete mapping (for checks)."""
    total = 0.0
    for nid, eid in nodes.items():
        c = cands.nodes[nid]
        if c is not None:
            total += c[eid]
    for ei, kge in edges.items():
        total += cands.relations[ei][kge.type]
    return total
