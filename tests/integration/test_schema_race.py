"""Two processes that start on a fresh Neo4j create isorag's schema at the same moment: both pass a statement's
``IF NOT EXISTS`` check, and the one that commits second is refused with ``EquivalentSchemaRuleAlreadyExists`` (CI
saw a load fail so: its two test workers made the first write at once). The graph store runs such a statement again
(engine.stores.graph.GraphStore.write_schema, SCHEMA_RACE_CODES); any other refusal is still an error.

isorag's own indexes exist by now on the shared test server and must stay, so the race is run on indexes of a
throwaway label made for the test (and dropped after it)."""

from __future__ import annotations

import threading
import uuid

import pytest

from engine._config import Neo4jSettings
from engine._errors import StoreError
from engine.stores.graph import GraphStore

WRITERS = 6


@pytest.fixture
def graph(neo4j_uri: str) -> GraphStore:
    """The writers share it; each statement runs in a session and on a connection of its own (the driver's pool),
    which is what the server sees of separate processes."""
    return GraphStore(Neo4jSettings(uri=neo4j_uri), "schemarace")


def _index_names(graph: GraphStore, prefix: str) -> list[str]:
    rows = graph.read("SHOW INDEXES YIELD name WHERE name STARTS WITH $prefix RETURN name", prefix=prefix)
    return sorted(r["name"] for r in rows)


def _at_once(graph: GraphStore, statement: str) -> list[BaseException]:
    """Run ``statement`` through write_schema from WRITERS threads released together; the errors they raised."""
    barrier = threading.Barrier(WRITERS)
    errors: list[BaseException] = []

    def create() -> None:
        barrier.wait()
        try:
            graph.write_schema(statement)
        except BaseException as e:  # noqa: BLE001 - collected and asserted by the caller
            errors.append(e)

    threads = [threading.Thread(target=create) for _ in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return errors


def test_the_same_schema_statement_from_several_processes_at_once_succeeds(graph: GraphStore) -> None:
    prefix = f"isoragschemarace{uuid.uuid4().hex[:8]}"
    try:
        for trial in range(5):
            label = f"IsoragSchemaRace{uuid.uuid4().hex[:8]}"
            name = f"{prefix}_{trial}"
            errors = _at_once(graph, f"CREATE INDEX {name} IF NOT EXISTS FOR (n:{label}) ON (n.p)")
            assert errors == [], f"trial {trial}: {errors[0]}"
            assert _index_names(graph, name) == [name]  # made once
        # a refusal that is not that race stays an error: the name taken by an index of another schema
        with pytest.raises(StoreError, match="already exists"):
            graph.write_schema(f"CREATE INDEX {prefix}_0 FOR (n:IsoragSchemaRaceOther) ON (n.q)")
    finally:
        for name in _index_names(graph, prefix):
            graph.write(f"DROP INDEX {name} IF EXISTS")
    assert _index_names(graph, prefix) == []
