"""The table of name vectors kept beside the graph read replica (engine.retrieval.name_vectors) on the real servers:
its vectors are Milvus' own floats, a change set that renames an entity leaves the old table unused and the new one
right, and retrievals with the table equal those without it (read from Milvus, or embedded)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from engine.changes.ops import SetEntity
from engine.retrieval.name_vectors import forget_name_tables
from engine.retrieval.replica import GraphReplica, replica_dir
from loaders._model import TripleRecord
from loaders.bulk import BulkLoader, LoadSummary

TRIPLES = [("Heat", "directed_by", "Michael Mann"), ("Heat", "starred_actors", "Al Pacino"),
           ("Heat", "starred_actors", "Robert De Niro"), ("Thief", "directed_by", "Michael Mann"),
           ("Thief", "starred_actors", "James Caan"), ("The Godfather", "starred_actors", "Al Pacino"),
           ("The Godfather", "starred_actors", "James Caan"), ("The Godfather", "directed_by", "Francis Ford Coppola"),
           ("Collateral", "directed_by", "Michael Mann"), ("Collateral", "starred_actors", "Tom Cruise")]
PATTERNS = [{"triples": [["Heat", "directed_by", "UNKNOWN director 1"]]},
            {"triples": [["Al Pacino", "starred_actors", "UNKNOWN movie 1"]]},
            {"triples": [["Michael Mann", "directed_by", "UNKNOWN movie 1"],
                         ["UNKNOWN movie 1", "starred_actors", "UNKNOWN actor 1"]]},
            {"triples": [["James Caan", "starred_actors", "UNKNOWN movie 1"],
                         ["UNKNOWN movie 1", "directed_by", "UNKNOWN director 1"]]}]


@pytest.fixture
def eng(make_engine: Any) -> Any:
    e = make_engine()
    BulkLoader(e.graph, e.vectors, e.embedder, progress=False).load_records(
        [TripleRecord(h, r, t, i) for i, (h, r, t) in enumerate(TRIPLES)], LoadSummary())
    return e


def ready(eng: Any) -> GraphReplica:
    """The replica of the KG's current version, and its name table, both ready."""
    eng.retrieve(PATTERNS[0], graph="replica")
    rep = eng.retriever.replica_now()
    assert rep is not None and rep.vectors_settled
    table, state = eng.retriever.name_table(rep, wait=True)
    assert table is not None and state.state == "ready", state
    return rep


def outcome(eng: Any, pattern: Any) -> list[Any]:
    """What a retrieval returned: each subgraph's GSD, its node bindings and its nodes' distances (exact floats)."""
    texts = [t for tr in pattern["triples"] for t in (tr[0], tr[2]) if not t.startswith("UNKNOWN")]
    eng.retriever.forget_text(*texts)  # embedded (or read) anew, as for a new question
    res = eng.retrieve(pattern, graph="replica")
    assert res.stats["graph_path"] == "replica"
    return [(s.gsd, sorted((n, e.eid) for n, e in s.mapping.items()), sorted(s.node_distances.items()))
            for s in res.subgraphs]


def test_the_table_holds_milvus_own_floats_and_retrievals_equal_those_without_it(eng: Any) -> None:
    rep = ready(eng)
    table, _ = eng.retriever.name_table(rep)
    assert table is not None
    eids = [int(e) for e in rep.eids]
    got = table.vectors(rep, eids)
    want = eng.vectors.get_vectors("entities", eids)
    assert sorted(got) == sorted(want) == sorted(eids)  # no entity here has a description
    for eid in eids:
        assert got[eid].dtype == np.float32 and np.array_equal(got[eid], want[eid])
    res = eng.retrieve(PATTERNS[0], graph="replica")
    info = res.stats["replica"]["name_vectors"]
    assert info["state"] == "ready" and info["vectors"] == len(eids) and info["mb"] > 0
    with_table = [outcome(eng, p) for p in PATTERNS]
    eng.retriever.name_vector_cache_mb = 0  # the stored vectors read from Milvus, as before the table
    assert eng.retrieve(PATTERNS[0], graph="replica").stats["replica"]["name_vectors"]["state"] == "off"
    from_milvus = [outcome(eng, p) for p in PATTERNS]
    eng.retriever.name_vectors = False  # the names embedded
    embedded = [outcome(eng, p) for p in PATTERNS]
    assert with_table == from_milvus
    assert [[(g, b) for g, b, _ in o] for o in with_table] == [[(g, b) for g, b, _ in o] for o in embedded]
    heat, mann = (int(rep.entities_by_name([n])[0]["eid"]) for n in ("Heat", "Michael Mann"))
    assert sorted(e for _, e in with_table[0][0][1]) == sorted([heat, mann])


def test_a_rename_leaves_the_old_table_unused_and_the_new_one_right(eng: Any) -> None:
    rep = ready(eng)
    old_table, _ = eng.retriever.name_table(rep)
    assert old_table is not None
    heat = int(rep.entities_by_name(["Heat"])[0]["eid"])
    before = old_table.vectors(rep, [heat])[heat]
    eng.apply([SetEntity("Heat", name="Heat (1995)")], progress=False)
    pat = {"triples": [["Heat (1995)", "directed_by", "UNKNOWN director 1"]]}
    res = eng.retrieve(pat, graph="replica")
    new = eng.retriever.replica_now()
    assert new is not None and new.key != rep.key and new.key.seq > rep.key.seq
    assert res.answers[0].entity.name == "Michael Mann"
    with pytest.raises(ValueError):  # the old table never serves the new version
        old_table.vectors(new, [heat])
    table, state = eng.retriever.name_table(new, wait=True)
    assert table is not None and table is not old_table and table.key == new.key and state.state == "ready"
    after = table.vectors(new, [heat])[heat]
    assert np.array_equal(after, eng.vectors.get_vectors("entities", [heat])[heat])
    assert not np.array_equal(after, before)
    assert np.allclose(after, eng.embedder.encode(["Heat (1995)"])[0], atol=1e-5)
    assert new.name_vector_ids(["Heat (1995)", "Heat"]) == {"Heat (1995)": heat}
    # the new name, from the table, finds its entity at distance 0; results as read from Milvus
    with_table = outcome(eng, pat)
    node = next(n for n, e in with_table[0][1] if e == heat)
    assert dict(with_table[0][2])[node] == pytest.approx(0.0, abs=1e-5)
    eng.retriever.name_vector_cache_mb = 0
    assert outcome(eng, pat) == with_table
    # its file, beside the replica's: a new process loads it; the old version's went with the old replica's
    files = sorted(p.name for p in replica_dir(eng.kg).glob("*.npz"))
    assert len(files) == 2 and sum(".names." in f for f in files) == 1, files
    eng.retriever.name_vector_cache_mb = 256
    forget_name_tables(eng.graph)
    again, state = eng.retriever.name_table(new, wait=True)
    assert again is not None and again.origin == "file" and np.array_equal(again.mat, table.mat)
    eng.drop()
    assert not replica_dir(eng.kg).exists()
