"""The graph read replica's arrays (engine.retrieval.replica), built from a stand-in of the streamed read: rows in both
directions, self-loops, names and keys, entity types, the expansions it answers, its file, its guard and its key.
Against Neo4j and the Cypher paths: tests/integration/test_graph_paths.py and test_replica_fresh.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable

import pytest

from engine.retrieval.matcher import Fetch, SearchStats, Step
from engine.retrieval.replica import (GraphReplica, ReplicaExpansions, ReplicaTooLarge, VersionKey, build_replica,
                                      version_key)

#: (eid, name, key, described, type ids, [(relationship type, tail eid)])
ROWS = [
    (30, "Heat", "Heat", False, [7], [("directed_by", 10), ("starred", 20), ("starred", 21)]),
    (10, "Michael Mann", "Michael Mann", False, [], [("directed_by", 10)]),  # a self-loop
    (20, "Al Pacino", "pacino", True, [8], [("married_to", 21)]),
    (21, "Diane", "diane", False, [8], []),
    (40, "Thief", "Thief", False, [7], [("directed_by", 10)]),
    (50, "Heat", "Heat (1972)", False, [7], []),  # a homonym, no relationship
]


class FakeGraph:
    """What a build reads: the version, the vector work state, the counts and the streamed rows."""

    kg = "fake"

    def __init__(self, rows: list[Any], versions: list[dict[str, Any]] | None = None,
                 cs_done: bool | None = True) -> None:
        self.rows, self.cs_done = rows, cs_done
        self.versions = list(versions or [{"seq": 3, "stamp": 9, "at": "2026-01-01T00:00:00Z"}])

    def version(self) -> dict[str, Any]:
        return self.versions.pop(0) if len(self.versions) > 1 else self.versions[0]

    def read(self, query: Any, **params: Any) -> list[dict[str, Any]]:
        if "pending_entities" in str(query):
            return [{"pending_entities": [], "pending_relations": [], "cs_done": self.cs_done}]
        return [{"entities": len(self.rows), "relationships": sum(len(r[5]) for r in self.rows)}]

    def read_stream(self, query: str, consume: Callable[[Iterable[Any]], Any], **params: Any) -> Any:
        return consume(iter(self.rows))


@pytest.fixture
def rep() -> GraphReplica:
    r = build_replica(FakeGraph(ROWS), 2**20)
    assert r is not None
    return r


def hits(rep: GraphReplica, eid: int, forward: bool | None) -> list[tuple[str, bool, int]]:
    i = int(rep.index([eid])[0])
    ty, nb, out = rep.row(i, forward)
    return sorted((rep.types[a], bool(b), int(rep.eids[c])) for a, c, b in zip(ty.tolist(), nb.tolist(), out.tolist()))


def test_rows_hold_both_directions_and_a_self_loop_once(rep: GraphReplica) -> None:
    assert rep.n == 6 and rep.m == 6 and rep.types == ["directed_by", "married_to", "starred"]
    assert hits(rep, 10, None) == [("directed_by", False, 30), ("directed_by", False, 40), ("directed_by", True, 10)]
    # walked outgoing or incoming, the self-loop is there once, as starting at the entity (Neo4j's startNode(r) = h)
    assert hits(rep, 10, True) == [("directed_by", True, 10)]
    assert hits(rep, 10, False) == [("directed_by", False, 30), ("directed_by", False, 40), ("directed_by", True, 10)]
    assert hits(rep, 30, True) == [("directed_by", True, 10), ("starred", True, 20), ("starred", True, 21)]
    assert hits(rep, 30, False) == []
    assert hits(rep, 21, None) == [("married_to", False, 20), ("starred", False, 30)]
    assert hits(rep, 50, None) == []


def test_names_keys_homonyms_descriptions_and_types(rep: GraphReplica) -> None:
    assert rep.entities([20, 21, 99]) == {20: {"eid": 20, "key": "pacino", "name": "Al Pacino"},
                                          21: {"eid": 21, "key": "diane", "name": "Diane"}}
    assert sorted((r["eid"], r["key"]) for r in rep.entities_by_name(["Heat", "Nobody"])) == [(30, "Heat"),
                                                                                            (50, "Heat (1972)")]
    # a described entity's vector is not its name's embedding: never taken for the name
    assert rep.name_vector_ids(["Al Pacino", "Diane", "Heat"]) == {"Diane": 21, "Heat": 30}
    assert rep.entities_of_types([7], 10) == [30, 40, 50] and rep.entities_of_types([7, 8], 2) == [20, 21]


def test_expansions_filter_types_candidates_closing_ends_and_the_cap(rep: GraphReplica) -> None:
    src = ReplicaExpansions(rep)
    rows = [{"id": 0, "h": 30, "types": None}, {"id": 1, "h": 30, "types": ["starred"]},
            {"id": 2, "h": 77, "types": None}]
    got = src.fetch(Fetch(Step(0, "a", "b", False, True), rows, None, rep.types, None, None, None), 1e18,
                    SearchStats(), {})
    assert sorted(map(tuple, got[0])) == [("directed_by", True, 10), ("starred", True, 20), ("starred", True, 21)]
    assert sorted(map(tuple, got[1])) == [("starred", True, 20), ("starred", True, 21)] and 2 not in got
    cands = src.fetch(Fetch(Step(0, "a", "b", False, True), rows[:1], None, rep.types, None, [21, 10], None), 1e18,
                      SearchStats(), {})
    assert sorted(map(tuple, cands[0])) == [("directed_by", True, 10), ("starred", True, 21)]
    closing = src.fetch(Fetch(Step(0, "a", "b", True, True), [{"id": 0, "h": 21, "types": None, "t": 20}], None,
                              rep.types, False, None, None), 1e18, SearchStats(), {})
    assert closing == {0: [["married_to", False, 20]]}
    capped = src.fetch(Fetch(Step(0, "a", "b", False, True), rows[:1], None, rep.types, None, None, 2), 1e18,
                       SearchStats(), {})
    assert len(capped[0]) == 2
    near = src.neighbours([{"id": 0, "cands": [30, 40], "types": ["directed_by"]},
                           {"id": 1, "cands": [21], "types": None}], 10, 1e18, SearchStats())
    assert near == {0: [10], 1: [20, 30]}


def test_a_replica_file_round_trips_and_refuses_another_version(rep: GraphReplica, tmp_path: Path) -> None:
    path = tmp_path / "r.npz"
    rep.save(path)
    again = GraphReplica.load(path, rep.key)
    assert again is not None and again.source == "file" and again.vectors_settled
    assert again.entities([20]) == rep.entities([20]) and hits(again, 10, None) == hits(rep, 10, None)
    other = VersionKey(rep.key.kg, rep.key.identity, rep.key.seq, rep.key.stamp + 1, rep.key.at)
    assert GraphReplica.load(path, other) is None


def test_a_build_across_a_commit_is_thrown_away_and_the_guard_holds() -> None:
    moved = FakeGraph(ROWS, [{"seq": 3, "stamp": 9, "at": "t"}, {"seq": 3, "stamp": 10, "at": "t"}])
    assert build_replica(moved, 2**20) is None
    # a change set under way: its batch may be read in part even where the stamp reads the same before and after
    assert build_replica(FakeGraph(ROWS, cs_done=False), 2**20) is None
    assert build_replica(FakeGraph(ROWS, cs_done=None), 2**20) is not None  # a KG no change set ever touched
    with pytest.raises(ReplicaTooLarge):
        build_replica(FakeGraph(ROWS), 100)


def test_a_row_torn_by_a_delete_throws_the_build_away() -> None:
    """Neo4j's reads are not snapshots: a stream that meets an entity a change set's batch is deleting reads its
    properties as null, with the stamp read the same before and after (the batch began after the stream had read
    the version). Such a build is thrown away and tried again, not failed with a TypeError (CI, test_replica_fresh)."""
    gone_head = [(None, None, None, False, [], [])] + ROWS
    gone_tail = [ROWS[0][:5] + ([("directed_by", None)] + ROWS[0][5][1:],)] + ROWS[1:]
    for rows in (gone_head, gone_tail):
        assert build_replica(FakeGraph(rows), 2**20) is None
    assert build_replica(FakeGraph(ROWS), 2**20) is not None


def test_the_version_key_reads_the_identity_when_there_is_one() -> None:
    assert version_key("kg", {"seq": 2, "stamp": 5, "at": None}) == VersionKey("kg", "", 2, 5, "")
    with_id = version_key("kg", {"seq": 2, "stamp": 5, "at": "x", "identity": "abc"})
    assert with_id.identity == "abc" and with_id.digest("bolt://a") != with_id.digest("bolt://b")
