"""A statement stopped by its timeout on the real Neo4j is the engine's DeadlineExceeded, recognised by Neo4j's
status code inside the graph store (engine.stores.graph.TIMEOUT_CODES), never by the error's text."""

from __future__ import annotations

import time

import neo4j
import pytest

from engine._config import Neo4jSettings
from engine._errors import DeadlineExceeded
from engine.stores.graph import TIMEOUT_CODES, GraphStore
from engine.retrieval.matcher import CypherExpansions

SLOW = "UNWIND range(1, 2000000000) AS x RETURN sum(x * x) AS s"  # tens of seconds of work on any server


@pytest.fixture
def graph(neo4j_uri: str) -> GraphStore:
    return GraphStore(Neo4jSettings(uri=neo4j_uri), "default")


def test_a_read_past_its_timeout_is_deadline_exceeded(graph: GraphStore) -> None:
    t0 = time.monotonic()
    with pytest.raises(DeadlineExceeded) as info:
        graph.read(neo4j.Query(SLOW, timeout=0.3))  # type: ignore[arg-type]
    assert time.monotonic() - t0 < 20
    cause = info.value.__cause__
    assert isinstance(cause, neo4j.exceptions.Neo4jError) and cause.code in TIMEOUT_CODES
    assert cause.code in str(info.value)


def test_the_matcher_reports_the_deadline(graph: GraphStore) -> None:
    with pytest.raises(DeadlineExceeded, match="during graph search"):
        CypherExpansions(graph).run(SLOW, {}, time.monotonic() + 0.3)


def test_other_errors_stay_store_errors(graph: GraphStore) -> None:
    from engine._errors import StoreError

    with pytest.raises(StoreError) as info:
        graph.read("RETURN 1 +")
    assert not isinstance(info.value, DeadlineExceeded)
