"""The pieces of a sync that need no server: the eid partitions and the spill files (engine/changes/sync.py)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.changes.sync import PARTITION_TRIPLES, SyncReport, Spill, partition_bounds
from engine.stores.graph import entity_id


@settings(max_examples=200, deadline=None)
@given(parts=st.integers(1, 4096), eid=st.integers(0, (1 << 63) - 1))
def test_an_eid_lies_in_the_range_of_its_partition(parts: int, eid: int) -> None:
    """The file side puts an eid in partition ``eid * parts >> 63``; the store side reads ``[lo, hi]`` of each
    partition: the two must agree for every eid, or a triple would be compared against the wrong range."""
    bounds = partition_bounds(parts)
    p = (eid * parts) >> 63
    lo, hi = bounds[p]
    assert lo <= eid <= hi


@settings(max_examples=50, deadline=None)
@given(parts=st.integers(1, 4096))
def test_the_partitions_cover_the_eid_space_without_overlap(parts: int) -> None:
    bounds = partition_bounds(parts)
    assert len(bounds) == parts and bounds[0][0] == 0 and bounds[-1][1] == (1 << 63) - 1
    assert all(hi + 1 == nxt_lo for (_, hi), (nxt_lo, _) in zip(bounds, bounds[1:]))
    assert all(lo <= hi for lo, hi in bounds)
    assert all(b[1] <= (1 << 63) - 1 for b in bounds)  # an upper bound Bolt can send (a signed 64-bit integer)


def test_keys_spread_evenly_over_partitions() -> None:
    parts = 8
    counts = [0] * parts
    for i in range(8000):
        counts[(entity_id("kg", f"key {i}") * parts) >> 63] += 1
    assert min(counts) > 800 and max(counts) < 1200


def test_spill_files_give_back_what_was_spilled_per_partition(tmp_path: Path) -> None:
    spill = Spill(tmp_path, "file", 3)
    items = {p: [("T", p, i, "key \u00e9\n\t|", None) for i in range(10_000 + p)] for p in range(3)}
    for i in range(10_002):
        for p in range(3):
            if i < len(items[p]):
                spill.add(p, items[p][i])
    spill.close()
    for p in range(3):
        assert list(spill.read(p)) == items[p]
    assert list(Spill(tmp_path, "none", 2).read(1)) == []


def test_a_report_counts_its_changes_and_says_what_it_did() -> None:
    rep = SyncReport(path="kb.txt", kg="k", triples=10, triples_added=2, triples_removed=1, entities_removed=1,
                     dry_run=True, partitions=1)
    assert rep.changes == 4 and rep.to_dict()["changes"] == 4
    text = "\n".join(rep.lines())
    assert "would change: triples +2 -1, entities set 0, removed 1" in text and "dry run: nothing was written" in text
    assert PARTITION_TRIPLES >= 10_000
