"""The table of name vectors kept beside the graph read replica (engine.retrieval.name_vectors), over the replica of
the stand-in streamed read of test_replica.py and a plain-Python stand-in of the vector store's reads: its rows
aligned with the replica's entities, a key it was not read for never served, the memory guard, its file, a read
that saw the KG move. Against Milvus and Neo4j: tests/integration/test_name_vectors.py."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from engine.retrieval.name_vectors import (NameTableTooLarge, NameVectorTable, file_suffix, forget_name_tables,
                                           name_table_for, read_name_table, vector_source)
from engine.retrieval.replica import GraphReplica, VersionKey, build_replica, version_file

from unit.test_replica import ROWS, FakeGraph

DIM = 8


class FakeVectors:
    """The reads a table takes: every stored row in batches (as Milvus' query iterator), and its dimension."""

    uri = "http://127.0.0.1:1"
    names = {"entities": "fake__m__entities"}

    def __init__(self, ids: list[int], dim: int = DIM) -> None:
        rng = np.random.default_rng(5)
        self.dim = dim
        self.stored = {eid: rng.standard_normal(dim).astype(np.float32) for eid in ids}
        self.passes = 0

    def iter_vectors(self, kind: str, batch: int = 2) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        assert kind == "entities"
        self.passes += 1
        ids = sorted(self.stored)
        for s in range(0, len(ids), 2):  # batches of two, as pages of the iterator
            chunk = ids[s:s + 2]
            yield np.asarray(chunk, dtype=np.int64), np.stack([self.stored[e] for e in chunk])


@pytest.fixture
def rep() -> GraphReplica:
    r = build_replica(FakeGraph(ROWS), 2**20)
    assert r is not None and r.vectors_settled
    return r


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("ISORAG_HOME", str(tmp_path))
    forget_name_tables(FakeGraph(ROWS))  # (what this process holds of the stand-in KG: each test starts bare)
    yield tmp_path
    forget_name_tables(FakeGraph(ROWS))


def other_key(key: VersionKey) -> VersionKey:
    return VersionKey(key.kg, key.identity, key.seq + 1, key.stamp + 1, key.at)


def test_rows_are_aligned_with_the_replica_and_hold_the_stored_floats(rep: GraphReplica) -> None:
    # 99: a row Milvus holds of an entity the replica lacks; 21 is missing from Milvus
    vectors = FakeVectors([10, 20, 30, 40, 50, 99])
    table = read_name_table(FakeGraph(ROWS), vectors, rep, 2**20)
    assert table is not None and table.key == rep.key and table.origin == "milvus"
    assert len(table.rows) == rep.n
    got = table.vectors(rep, [10, 20, 21, 30, 40, 50, 99, 7])
    # 20 has a description (its vector is not its name's embedding): not held; 21 is not in Milvus; 99, 7 no entity
    assert sorted(got) == [10, 30, 40, 50]
    for eid, v in got.items():
        assert v.dtype == np.float32 and np.array_equal(v, vectors.stored[eid])
        i = int(rep.index([eid])[0])
        assert np.array_equal(table.mat[table.rows[i]], vectors.stored[eid])
    assert table.count == 4
    # the texts a query asks for go through name_vector_ids: both "Heat"s are plain, one is taken
    ids = rep.name_vector_ids(["Heat", "Al Pacino", "Diane"])
    assert set(ids) == {"Heat", "Diane"} and ids["Heat"] in (30, 50)
    # copies: a caller's vector outlives (and cannot change) the table
    got[10][:] = 0
    assert np.array_equal(table.vectors(rep, [10])[10], vectors.stored[10])


def test_a_table_is_never_served_for_another_version(rep: GraphReplica) -> None:
    table = read_name_table(FakeGraph(ROWS), FakeVectors([10, 30]), rep, 2**20)
    assert table is not None
    moved = build_replica(FakeGraph(ROWS, versions=[{"seq": 4, "stamp": 10, "at": "2026-01-02T00:00:00Z"}]), 2**20)
    assert moved is not None and moved.key != rep.key
    with pytest.raises(ValueError):
        table.vectors(moved, [10])
    graph = FakeGraph(ROWS)
    vectors = FakeVectors([10, 30])
    got, state = name_table_for(graph, vectors, rep, 1, wait=True)
    assert got is not None and state.state == "ready" and got.key == rep.key
    # the replica of the next version: the table of the last is not served, one is read for it
    graph2 = FakeGraph(ROWS, versions=[moved.key.__dict__ | {"kg_id": None}])
    first, state = name_table_for(graph2, vectors, moved, 1)
    assert first is None or first.key == moved.key
    again, state = name_table_for(graph2, vectors, moved, 1, wait=True)
    assert again is not None and again.key == moved.key and state.state == "ready"


def test_a_read_that_saw_the_kg_move_is_dropped(rep: GraphReplica) -> None:
    later = {"seq": 3, "stamp": 10, "at": "2026-01-01T00:00:00Z"}
    before = {"seq": 3, "stamp": 9, "at": "2026-01-01T00:00:00Z"}
    assert read_name_table(FakeGraph(ROWS, versions=[before, later]), FakeVectors([10]), rep, 2**20) is None
    assert read_name_table(FakeGraph(ROWS, versions=[later]), FakeVectors([10]), rep, 2**20) is None
    got, state = name_table_for(FakeGraph(ROWS, versions=[later]), FakeVectors([10]), rep, 1, wait=True)
    assert got is None and state.state == "failed" and "changed" in state.why


def test_the_memory_guard(rep: GraphReplica) -> None:
    with pytest.raises(NameTableTooLarge):
        read_name_table(FakeGraph(ROWS), FakeVectors([10]), rep, 5 * DIM * 4)  # 5 plain entities, + their rows
    big = FakeVectors([10, 30], dim=60_000)  # 5 x 60,000 x 4 bytes: 1.1 MB
    got, state = name_table_for(FakeGraph(ROWS), big, rep, 1, wait=True)
    assert got is None and state.state == "too large" and "MB" in state.why
    assert big.passes == 0  # refused before anything was read
    got, state = name_table_for(FakeGraph(ROWS), big, rep, 0)
    assert got is None and state.state == "off"
    got, state = name_table_for(FakeGraph(ROWS), big, rep, 2, wait=True)
    assert got is not None and state.state == "ready" and got.mb == state.mb and state.info(got)["vectors"] == 2


def test_an_unsettled_replica_or_a_store_that_cannot_iterate_gets_none(rep: GraphReplica) -> None:
    rep.vectors_settled = False
    got, state = name_table_for(FakeGraph(ROWS), FakeVectors([10]), rep, 1, wait=True)
    assert got is None and state.state == "unsettled"
    rep.vectors_settled = True
    got, state = name_table_for(FakeGraph(ROWS), object(), rep, 1, wait=True)
    assert got is None and state.state == "unavailable"


def test_the_file_round_trips_and_refuses_another_version_or_source(rep: GraphReplica, tmp_path: Path) -> None:
    vectors = FakeVectors([10, 21, 30, 40, 50])
    table = read_name_table(FakeGraph(ROWS), vectors, rep, 2**20)
    assert table is not None
    path = tmp_path / "t.npz"
    table.save(path)
    again = NameVectorTable.load(path, rep.key, table.source, rep.n)
    assert again is not None and again.origin == "file"
    assert np.array_equal(again.rows, table.rows) and np.array_equal(again.mat, table.mat)
    assert NameVectorTable.load(path, other_key(rep.key), table.source, rep.n) is None
    assert NameVectorTable.load(path, rep.key, "elsewhere", rep.n) is None
    assert NameVectorTable.load(path, rep.key, table.source, rep.n + 1) is None


def test_a_new_process_loads_the_file_beside_the_replica(rep: GraphReplica, home: Path) -> None:
    graph, vectors = FakeGraph(ROWS), FakeVectors([10, 30])
    got, _ = name_table_for(graph, vectors, rep, 1, wait=True)
    assert got is not None and vectors.passes == 1
    path = version_file(graph, rep.key, file_suffix(vector_source(vectors)))
    assert path.exists() and path.parent == home / "replicas" / graph.kg
    forget_name_tables(graph)  # as a new process: nothing held, the file there
    again, state = name_table_for(graph, vectors, rep, 1, wait=True)
    assert again is not None and again.origin == "file" and vectors.passes == 1
    assert np.array_equal(again.mat, got.mat)


def test_the_setting_and_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine._config import DEFAULT_NAME_VECTOR_CACHE_MB, EngineConfig
    from engine._errors import ConfigError

    assert EngineConfig().name_vector_cache_mb == DEFAULT_NAME_VECTOR_CACHE_MB == 256
    monkeypatch.setenv("ISORAG_NAME_VECTOR_CACHE_MB", "0")
    assert EngineConfig.from_env().name_vector_cache_mb == 0
    monkeypatch.setenv("ISORAG_NAME_VECTOR_CACHE_MB", "-1")
    with pytest.raises(ConfigError, match="ISORAG_NAME_VECTOR_CACHE_MB"):
        EngineConfig.from_env()
    with pytest.raises(ConfigError, match="name_vector_cache_mb"):
        EngineConfig(name_vector_cache_mb=True)
