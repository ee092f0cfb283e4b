"""Sync (``isorag sync``, ``Engine.sync``, ``Engine.resync_existing``) on the real Neo4j and Milvus.

A sync makes a KG equal to a file: the tests compare the synced KG with a fresh load of the same file, item by item
(triples, entities with their names and types, the relation catalog, and every vector, compared by key), so a sync
that is exact passes and one that leaves a stale or missing item fails.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.changes.ops import MergeEntity, SetEntity
from engine.stores.graph import entity_id, relation_id
from helpers.kg import kg_triples
from helpers.loads import write_hrt

pytestmark = pytest.mark.long  # minutes of work: `make test` deals this file out first (tests/conftest.py)


def state(eng: Any) -> dict[str, Any]:
    """A KG as its items keyed by source keys and names (ids differ between KGs): triples, entities (name, types),
    relation names, and the vectors of its entities and relations."""
    g = eng.graph
    ents = g.read("MATCH (n:IsoragEntity {isorag_kg: $kg}) RETURN n.isorag_eid AS eid, n.isorag_key AS key, "
                  "n.isorag_name AS name, n.isorag_types AS types", kg=eng.kg)
    rels = sorted(ri.name for ri in g.relation_catalog(refresh=True).values())
    evec = eng.vectors.get_vectors("entities", [e["eid"] for e in ents])
    rvec = eng.vectors.get_vectors("relations", [relation_id(eng.kg, r) for r in rels])
    return {
        "triples": kg_triples(eng, relation="name"),
        "entities": sorted((e["key"], e["name"], tuple(e["types"] or ())) for e in ents),
        "relations": rels,
        "entity_vectors": {e["key"]: evec.get(e["eid"]) for e in ents},
        "relation_vectors": {r: rvec.get(relation_id(eng.kg, r)) for r in rels},
        "milvus": {k: eng.vectors.count(k) for k in ("entities", "relations", "types")},
    }


def assert_same(a: dict[str, Any], b: dict[str, Any]) -> None:
    for part in ("triples", "entities", "relations", "milvus"):
        assert a[part] == b[part], part
    for part in ("entity_vectors", "relation_vectors"):
        assert a[part].keys() == b[part].keys(), part
        for key, vec in a[part].items():
            other = b[part][key]
            assert vec is not None and other is not None, (part, key)
            assert np.allclose(vec, other, atol=1e-5), (part, key)


def test_sync_of_a_file_against_itself_changes_nothing(make_engine: Any, tmp_path: Path) -> None:
    eng = make_engine()
    path = tmp_path / "kb.txt"
    write_hrt(path)
    eng.load(path, progress=False)
    before, version = state(eng), eng.version()["seq"]
    rep = eng.sync(path, progress=False)
    assert (rep.triples_added, rep.triples_removed, rep.entities_set, rep.entities_removed) == (0, 0, 0, 0)
    assert rep.applied is None and rep.version == version == eng.version()["seq"]
    assert rep.triples == rep.store_triples == len(before["triples"])
    assert_same(state(eng), before)


def _edit(path: Path, triples: list[tuple[str, str, str]]) -> tuple[list[tuple[str, str, str]], int, int]:
    """Edit the file as a user would: drop every line of one movie, change one line's tail, add two lines (one
    with a new entity). Returns the new triples and how many lines were added and removed."""
    gone = [t for t in triples if t[0] == "Movie 3"]
    edited = [t for t in triples if t[0] != "Movie 3"]
    i = edited.index(("Movie 5", "directed_by", "Director 5"))
    edited[i] = ("Movie 5", "directed_by", "Director 6")
    edited += [("Movie 7", "written_by", "Writer Zero"), ("Movie 8", "starred_actors", "Actor 1")]
    path.write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in edited), encoding="utf-8")
    added = len(set(edited) - set(triples))
    removed = len(set(triples) - set(edited))
    assert (added, removed) == (3, len(gone) + 1)
    return edited, added, removed


def test_sync_after_editing_a_file_changes_exactly_the_edited_lines(make_engine: Any, tmp_path: Path) -> None:
    eng = make_engine()
    path = tmp_path / "kb.txt"
    triples = write_hrt(path)
    eng.load(path, progress=False)
    edited, added, removed = _edit(path, triples)
    before, version = state(eng), eng.version()["seq"]

    dry = eng.sync(path, dry_run=True, progress=False)
    assert (dry.triples_added, dry.triples_removed) == (added, removed)
    assert dry.entities_removed == 1  # Movie 3: no line names it any more (its director, actors stay in others)
    assert dry.dry_run and dry.applied is None
    assert_same(state(eng), before)  # a dry run writes nothing
    assert eng.version()["seq"] == version

    rep = eng.sync(path, progress=False)
    assert (rep.triples_added, rep.triples_removed, rep.entities_removed) == (added, removed, 1)
    assert rep.version == version + 1 == eng.version()["seq"]
    assert rep.applied is not None and rep.applied["skipped"] == 0

    fresh = make_engine()
    fresh.load(path, progress=False)
    assert_same(state(eng), state(fresh))
    assert eng.stats()["agree"]

    again = eng.sync(path, progress=False)
    assert again.changes == 0 and again.version == rep.version  # applied twice: the second changes nothing


def test_sync_sets_names_and_types_from_entity_records_and_resolves_aliases(make_engine: Any,
                                                                            tmp_path: Path) -> None:
    """Names and types come from the file's entity records (a ``tables`` source): a sync sets them as a fresh load
    does; a key that a merge made an alias resolves to its target, so the merge is kept."""
    eng = make_engine()
    src = tmp_path / "tables"
    src.mkdir()
    nodes = src / "nodes.csv"
    edges = src / "edges.csv"
    nodes.write_text("id,name,types\nm1,Heat,film\nm2,Ronin,film\np1,Michael Mann,person\np2,John Frankenheimer,"
                     "person\np3,Robert De Niro,person\n", encoding="utf-8")
    edges.write_text("source,relation,target\nm1,directed_by,p1\nm2,directed_by,p2\nm1,starred,p3\nm2,starred,p3\n",
                     encoding="utf-8")
    eng.load(src, progress=False)
    # the user renames one, retypes another; later a duplicate key "deniro" of p3 is merged into p3
    eng.apply([SetEntity("m1", name="Heat (1995)"), SetEntity("p2", types=("director",))], progress=False)
    rep = eng.sync(None, nodes=str(nodes), edges=str(edges), progress=False)  # (the files named one by one)
    assert (rep.entities_set, rep.triples_added, rep.triples_removed) == (2, 0, 0)
    fresh = make_engine()
    fresh.load(src, progress=False)
    assert_same(state(eng), state(fresh))

    edges.write_text(edges.read_text(encoding="utf-8") + "m1,starred,deniro\n", encoding="utf-8")
    nodes.write_text(nodes.read_text(encoding="utf-8") + "deniro,Robert De Niro,person\n", encoding="utf-8")
    eng.sync(src, progress=False)
    eng.apply([MergeEntity("deniro", "p3")], progress=False)
    merged = state(eng)
    assert "deniro" not in {k for k, _, _ in merged["entities"]}
    rep = eng.sync(src, progress=False)  # the file still names "deniro": it is p3 now
    assert rep.changes == 0
    assert_same(state(eng), merged)
    # as in a load, the last name an entity record gives wins: "deniro"'s record names p3 now
    nodes.write_text(nodes.read_text(encoding="utf-8").replace("deniro,Robert De Niro", "deniro,Bobby"),
                     encoding="utf-8")
    rep = eng.sync(src, progress=False)
    assert (rep.entities_set, rep.changes) == (1, 1)
    assert ("p3", "Bobby", ("person",)) in state(eng)["entities"]


def test_a_sync_never_empties_a_kg_and_strict_writes_nothing(make_engine: Any, tmp_path: Path) -> None:
    from engine._errors import InputError, MalformedInputError

    eng = make_engine()
    path = tmp_path / "kb.txt"
    write_hrt(path, n_movies=5)
    eng.load(path, progress=False)
    before = state(eng)
    empty = tmp_path / "empty.txt"
    empty.write_text("only one field\n", encoding="utf-8")
    with pytest.raises(InputError, match="nothing to sync from: every line was skipped"):
        eng.sync(empty, fmt="hrt", progress=False)
    bad = tmp_path / "bad.txt"
    bad.write_text("Movie 0|directed_by|Director 0\nbroken line\nNew|r|x\n", encoding="utf-8")
    with pytest.raises(MalformedInputError, match="bad.txt:2:"):
        eng.sync(bad, strict=True, progress=False)
    assert_same(state(eng), before)


def test_cli_sync_dry_run_and_json(make_engine: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from engine.cli import main

    eng = make_engine()
    path = tmp_path / "kb.txt"
    triples = write_hrt(path, n_movies=6)
    eng.load(path, progress=False)
    # without its first line, (Movie 0, directed_by, Director 0): Director 0 directed nothing else of the 6
    path.write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in triples[1:]), encoding="utf-8")
    assert main(["sync", str(path), "--kg", eng.kg, "--dry-run", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "would change: triples +0 -1, entities set 0, removed 1" in out and "dry run: nothing was written" in out
    assert main(["sync", str(path), "--kg", eng.kg, "--quiet", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert (rep["triples_removed"], rep["entities_removed"], rep["changes"]) == (1, 1, 2) and rep["version"] >= 2


# -- adoption re-sync ------------------------------------------------------------------------------------------
def _user_dump(graph: Any, marker: str) -> dict[str, Any]:
    """The user's own data: every node with the marker (its labels but isorag's, its properties but isorag_*) and
    every relationship between them not written by isorag."""
    nodes = graph.read("MATCH (n) WHERE n.marker = $m RETURN elementId(n) AS id, "
                       "[l IN labels(n) WHERE l <> 'IsoragEntity'] AS labels, "
                       "[k IN keys(n) WHERE NOT k STARTS WITH 'isorag_' | [k, toString(n[k])]] AS props", m=marker)
    rels = graph.read("MATCH (a)-[r]->(b) WHERE a.marker = $m AND b.marker = $m AND r.isorag_name IS NULL "
                      "AND NOT type(r) STARTS WITH 'ISORAG_' RETURN elementId(r) AS id, type(r) AS type, "
                      "[k IN keys(r) | [k, toString(r[k])]] AS props", m=marker)
    return {"nodes": sorted((r["id"], sorted(r["labels"]), sorted(map(tuple, r["props"]))) for r in nodes),
            "rels": sorted((r["id"], r["type"], sorted(map(tuple, r["props"]))) for r in rels)}


def test_adoption_resync_picks_up_the_users_changes_and_never_modifies_the_users_graph(make_engine: Any) -> None:
    eng = make_engine()
    marker = uuid.uuid4().hex
    label = f"Person_{marker[:8]}"
    g = eng.graph
    g.write(f"CREATE (a:`{label}` {{pid: 'a', fullname: 'Ada Lovelace', marker: $m}}), "
            f"(b:`{label}` {{pid: 'b', fullname: 'Charles Babbage', marker: $m}}), "
            f"(c:`{label}` {{pid: 'c', fullname: 'Mary Somerville', marker: $m}}), "
            f"(d:`{label}` {{pid: 'd', fullname: 'Luigi Menabrea', marker: $m}}), "
            f"(a)-[:WORKED_WITH {{since: 1833}}]->(b), (a)-[:CORRESPONDED_WITH]->(c), (d)-[:TRANSLATED]->(a)",
            m=marker)
    try:
        eng.load_existing(label, "pid", "fullname", progress=False)
        assert eng.stats()["neo4j"]["entities"] == 4
        nothing = eng.resync_existing(label, "pid", "fullname", progress=False)
        assert nothing.changes == 0

        # the user changes their graph: a node added, one renamed, one re-keyed, one deleted, one relationship
        # type gone and a new one
        g.write(f"CREATE (e:`{label}` {{pid: 'e', fullname: 'Augustus De Morgan', marker: $m}}) WITH e "
                f"MATCH (a:`{label}` {{pid: 'a'}}) CREATE (e)-[:TUTORED]->(a)", m=marker)
        g.write(f"MATCH (b:`{label}` {{pid: 'b'}}) SET b.fullname = 'Charles Babbage FRS'")
        g.write(f"MATCH (c:`{label}` {{pid: 'c'}}) SET c.pid = 'c2'")
        g.write(f"MATCH (d:`{label}` {{pid: 'd'}}) DETACH DELETE d")
        user_before = _user_dump(g, marker)
        version = eng.version()["seq"]

        dry = eng.resync_existing(label, "pid", "fullname", dry_run=True, progress=False)
        assert (dry.entities_added, dry.entities_set) == (2, 1)  # e, and c under its new key
        assert dry.entities_removed == 2  # d deleted (its vector), c's old key given back
        assert dry.relations_removed == 1  # TRANSLATED: no relationship of that type any more
        assert eng.version()["seq"] == version

        rep = eng.resync_existing(label, "pid", "fullname", progress=False)
        assert (rep.entities_added, rep.entities_set, rep.entities_removed) == (2, 1, 2)
        assert rep.relations_added == 1 and rep.relations_removed == 1
        assert rep.version is not None and rep.version > version
        assert _user_dump(g, marker) == user_before  # only isorag's labels and properties were written

        st = eng.stats()
        assert st["agree"] and st["neo4j"]["entities"] == 4 and st["neo4j"]["triples"] == 3
        keys = {e["key"]: e for e in g.read("MATCH (n:IsoragEntity {isorag_kg: $kg}) RETURN n.isorag_key AS key, "
                                            "n.isorag_name AS name, n.isorag_eid AS eid", kg=eng.kg)}
        assert sorted(keys) == ["a", "b", "c2", "e"]
        assert keys["b"]["name"] == "Charles Babbage FRS"
        vecs = eng.vectors.get_vectors("entities", [entity_id(eng.kg, k) for k in ("b", "d", "c")])
        assert list(vecs) == [entity_id(eng.kg, "b")]  # d's and c's old vectors are gone
        assert np.allclose(vecs[entity_id(eng.kg, "b")], eng.embedder.encode(["Charles Babbage FRS"])[0], atol=1e-5)
        assert sorted(ri.type for ri in g.relation_catalog(refresh=True).values()) == [
            "CORRESPONDED_WITH", "TUTORED", "WORKED_WITH"]
        res = eng.retrieve({"triples": [["Augustus De Morgan", "tutored", "UNKNOWN person 1"]]}, k=1)
        assert res.answers[0].entity.name == "Ada Lovelace"

        again = eng.resync_existing(label, "pid", "fullname", progress=False)
        assert again.changes == 0 and again.version == rep.version
        eng.drop()
        assert _user_dump(g, marker) == user_before  # dropped: the user's graph as the user left it
    finally:
        g.write(f"MATCH (n:`{label}`) DETACH DELETE n")
        g.write("MATCH (n) WHERE n.marker = $m DETACH DELETE n", m=marker)


def test_a_sync_killed_midway_and_run_again_ends_as_a_clean_run(make_engine: Any, tmp_path: Path, neo4j_uri: str,
                                                                 milvus_uri: str) -> None:
    """kill -9 while the sync applies its batches; run again: the KG equals a fresh load of the file (triples,
    entities, names, every vector compared by key), and a third run changes nothing."""
    import os
    import signal
    import subprocess
    import sys
    import time

    eng = make_engine()
    path = tmp_path / "kb.txt"
    triples = write_hrt(path, n_movies=300)
    eng.load(path, progress=False)
    edited = [t for t in triples if int(t[0].split()[1]) % 3 != 0]  # a third of the movies gone
    edited += [(f"Movie {i}", "written_by", f"Writer {i % 17}") for i in range(0, 600, 2)]  # new lines
    path.write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in edited), encoding="utf-8")
    env = {**os.environ, "NEO4J_URI": neo4j_uri, "MILVUS_URI": milvus_uri, "ISORAG_LOCK_TTL_S": "4",
           "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "sync", str(path), "--kg", eng.kg, "--quiet",
                             "--batch-size", "20"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            rows = eng.graph.read_named("changes_state", kg=eng.kg)
            if rows and (rows[0]["cs_batches"] or 0) >= 3 and not rows[0]["cs_done"]:
                break
            time.sleep(0.05)
        assert proc.poll() is None, f"the sync ended before it could be killed: {proc.stderr.read()!r}"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    time.sleep(5)  # the killed writer's lease runs out
    rep = eng.sync(path, progress=False)
    assert rep.changes > 0  # what the killed run had not applied yet
    fresh = make_engine()
    fresh.load(path, progress=False)
    assert_same(state(eng), state(fresh))
    assert eng.check(progress=False).ok
    assert eng.sync(path, progress=False).changes == 0


def test_a_hub_is_compared_in_parts_so_memory_stays_bounded(make_engine: Any, tmp_path: Path) -> None:
    """One entity with far more triples than a partition holds (a hub) put all of them in one partition, whatever
    the partition size. Its partition is compared in parts cut by the tails' eids: at most about two partitions'
    worth of triples of one side in memory at a time (``peak_triples``), and the result is what a fresh load gives."""
    from engine.changes.sync import HUB_FACTOR, sync_file

    eng = make_engine()
    path = tmp_path / "kb.txt"
    hub = [("Hub", "links", f"Leaf {i}") for i in range(1_500)]
    rest = [(f"Movie {i}", "directed_by", f"Director {i % 7}") for i in range(60)]
    path.write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in hub + rest), encoding="utf-8")
    eng.load(path, progress=False)
    edited = hub[100:] + [("Hub", "links", f"New leaf {i}") for i in range(40)] + rest
    path.write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in edited), encoding="utf-8")
    per = 50
    dry = sync_file(eng.graph, None, None, path, dry_run=True, progress=False, partition_triples=per)
    assert (dry.triples_added, dry.triples_removed, dry.entities_removed) == (40, 100, 100)
    assert dry.peak_triples <= HUB_FACTOR * per * 1.5, dry.peak_triples  # parts of about `per`, never the hub
    rep = sync_file(eng.graph, eng.vectors, eng.embedder, path, progress=False, partition_triples=per)
    assert (rep.triples_added, rep.triples_removed) == (40, 100) and rep.peak_triples == dry.peak_triples
    eng.invalidate()
    fresh = make_engine()
    fresh.load(path, progress=False)
    assert_same(state(eng), state(fresh))
