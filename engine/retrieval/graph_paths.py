"""Which path serves a query's graph stage (the one place that chooses):

``replica``    the best-first matcher over the in-process read replica (:mod:`engine.retrieval.replica`): no round
               trip; names from the replica too.
``statement``  one Cypher statement per query and cost tier (:mod:`engine.retrieval.one_statement`), names in the
               same statement; a pattern it cannot serve (disconnected, a tier at its path cap) goes to ``expand``.
``expand``     the best-first matcher with one Cypher statement per batch of expansions
               (:class:`engine.retrieval.matcher.CypherExpansions`), names in one more read.

:attr:`engine._config.MatchSettings.graph` picks: ``"auto"`` (the default) takes the replica when it is fresh for
the version the query read, else the statement path while a replica is built in the background (or for good, over
``graph_cache_mb``); ``"replica"`` waits for the replica's build; ``"statement"`` and ``"expand"`` force a path. All
three return the same top-k (the replica and the expansion path the same list; the statement path the same GSDs,
its ties ordered alike unless narrowing changed the expansion path's root).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from engine.retrieval.matcher import CypherExpansions, ExpansionSource, Matcher, Match, SearchStats
from engine.retrieval.one_statement import StatementMatcher
from engine.retrieval.replica import GraphReplica, ReplicaExpansions, ReplicaState, VersionKey, replica_for

if TYPE_CHECKING:  # pragma: no cover
    from engine._config import MatchSettings
    from engine._protocols import GraphReader
    from engine.retrieval.matcher import Candidates
    from engine.retrieval.pattern import Pattern

__all__ = ["GraphPath", "choose_path"]

EntityReader = Callable[[Sequence[int]], Mapping[int, Mapping[str, Any]]]


@dataclass
class GraphPath:
    """The path chosen for one query: its name, the matcher's source of expansions, and the replica's state."""

    name: str
    graph: GraphReader
    source: ExpansionSource
    replica: GraphReplica | None = None
    state: ReplicaState = field(default_factory=lambda: ReplicaState("off"))

    def entities(self, eids: Sequence[int]) -> Mapping[int, Mapping[str, Any]]:
        """Names and keys of entities, from the replica when the path has one (else one read)."""
        if self.replica is not None:
            return self.replica.entities(eids)
        return self.graph.entities(eids)

    def top_k(self, pattern: Pattern, cands: Candidates, k: int, settings: MatchSettings, *,
              deadline: float) -> tuple[list[Match], SearchStats, EntityReader, str]:
        """The exact top-k, the search's statistics, where the entities' names are read, and the path that
        served (``statement`` hands a pattern it cannot serve to ``expand``)."""
        if self.name == "statement":
            got = StatementMatcher(self.graph, settings).top_k(pattern, cands, k, deadline=deadline)
            if got is not None:
                matches, stats, names = got
                return matches, stats, _names_then(names, self.graph.entities), "statement"
        matches, stats = Matcher(self.graph, settings, source=self.source).top_k(pattern, cands, k,
                                                                                  deadline=deadline)
        return matches, stats, self.entities, self.source.name

    def info(self) -> dict[str, Any]:
        """What a result's ``stats`` reports of the replica: its state and size."""
        out: dict[str, Any] = {"state": self.state.state}
        if self.state.why:
            out["why"] = self.state.why
        if self.replica is not None:
            out.update(self.replica.info())
        elif self.state.mb is not None:
            out["mb"] = self.state.mb
        return out


def _names_then(names: Mapping[int, Mapping[str, Any]], read: EntityReader) -> EntityReader:
    """An entity reader that answers from ``names`` and reads only what they lack."""
    def entities(eids: Sequence[int]) -> Mapping[int, Mapping[str, Any]]:
        missing = [e for e in eids if e not in names]
        return {**{e: names[e] for e in eids if e in names}, **(read(missing) if missing else {})}
    return entities


def choose_path(graph: GraphReader, key: VersionKey | None, settings: MatchSettings, cache_mb: int) -> GraphPath:
    """The path for a query on ``graph`` whose version (read at its start) is ``key`` (None: a graph without
    versions, which gets no replica). ``cache_mb``: the replica's memory guard (0: no replica)."""
    want = settings.graph
    expand = CypherExpansions(graph)
    if want == "expand":
        return GraphPath("expand", graph, expand)
    state = ReplicaState("off")
    if want != "statement":
        if key is None:
            state = ReplicaState("unavailable", "the graph has no version to stamp a replica with")
        else:
            replica, state = replica_for(graph, key, cache_mb, wait=want == "replica")
            if replica is not None:
                return GraphPath("replica", graph, ReplicaExpansions(replica), replica, state)
    return GraphPath("statement", graph, expand, None, state)


def wait_for_replica(graph: GraphReader, key: VersionKey, cache_mb: int, timeout_s: float = 600.0) -> ReplicaState:
    """Block until the replica of version ``key`` is ready (or cannot be); its state."""
    end = time.monotonic() + timeout_s
    while True:
        replica, state = replica_for(graph, key, cache_mb, wait=True)
        if replica is not None or state.state != "building" or time.monotonic() > end:
            return state
