"""Bulk loading into the real Neo4j and Milvus: counts, idempotence, resume after a kill, every format."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from engine._errors import MalformedInputError, StoreUnavailableError

from helpers import ROOT
from helpers.loads import check_stats, expected_counts, write_hrt

pytestmark = pytest.mark.long  # minutes of work: `make test` deals this file out first (tests/conftest.py)


def test_load_counts_and_idempotence(engine: Any, tmp_path: Path) -> None:
    path = tmp_path / "kb.txt"
    triples = write_hrt(path)
    s1 = engine.load(path, progress=False, batch_size=50)
    want = expected_counts(triples)
    assert s1.triples == len(triples) and s1.relationships_created == want["triples"]
    assert s1.entities_created == want["entities"] and s1.embedded_entities == want["entities"]
    check_stats(engine, want)
    s2 = engine.load(path, progress=False, batch_size=50)  # the same file again adds nothing
    assert s2.entities_created == 0 and s2.relationships_created == 0
    assert s2.embedded_entities == 0 and s2.embedded_relations == 0
    check_stats(engine, want)
    # stored with the relation name, typed relationships, direction as in the source
    rows = engine.graph.read("MATCH (h:IsoragEntity {isorag_kg: $kg, isorag_name: 'Movie 3'})-[r]->(t) "
                             "RETURN type(r) AS type, r.isorag_name AS name, t.isorag_name AS tail "
                             "ORDER BY type, tail", kg=engine.kg)
    assert {"type": "directed_by", "name": "directed_by", "tail": "Director 3"} in rows


def test_a_load_asks_milvus_about_a_relation_once(engine: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """Every batch names the same relations; a load asks Milvus whether a relation has its vector once, not once a
    batch (it holds the KG's writer lease, so nothing deletes the vectors it wrote meanwhile; asking each batch cost
    a strongly consistent query a batch and loaded the relation collection in the middle of the load). A relation
    vector deleted between two loads is embedded again by the next one."""
    from collections import Counter

    from engine.stores.graph import relation_id

    path = tmp_path / "kb.txt"
    triples = write_hrt(path)  # 160 triples, 3 relations in each batch of 20
    asked: list[tuple[str, list[int]]] = []
    existing_ids = engine.vectors.existing_ids

    def spy(kind: str, ids: Any) -> set[int]:
        asked.append((kind, list(ids)))
        return existing_ids(kind, ids)

    monkeypatch.setattr(engine.vectors, "existing_ids", spy)
    s1 = engine.load(path, progress=False, batch_size=20)
    per_relation = Counter(i for kind, ids in asked if kind == "relations" for i in ids)
    assert s1.embedded_relations == 3 and sorted(per_relation.values()) == [1, 1, 1]
    check_stats(engine, expected_counts(triples))
    engine.vectors.delete("relations", [relation_id(engine.kg, "directed_by")])
    asked.clear()
    s2 = engine.load(path, progress=False, batch_size=20)
    assert s2.embedded_relations == 1 and s2.relationships_created == 0
    assert sorted(Counter(i for kind, ids in asked if kind == "relations" for i in ids).values()) == [1, 1, 1]
    check_stats(engine, expected_counts(triples))


def test_created_heads_and_repeated_triples(engine: Any, tmp_path: Path) -> None:
    """Triples of heads created by the load are CREATEd: duplicate lines, a head split over batches, a tail
    that is a head later and a second file adding triples to existing heads still give each triple once."""
    first = [("A", "r", "B"), ("A", "r", "B"), ("A", "s", "B"), ("A", "r", "C"),  # batch 1 (duplicate line)
             ("A", "r", "D"), ("B", "r", "A"), ("B", "r", "A"), ("C", "r", "A"),  # batch 2: A again, B, C fresh
             ("A", "r", "B"), ("D", "s", "E"), ("E", "r", "A"), ("E", "r", "A")]  # batch 3: a repeat, D, E
    p1 = tmp_path / "one.txt"
    p1.write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in first), encoding="utf-8")
    s1 = engine.load(p1, progress=False, batch_size=4)
    assert s1.relationships_created == len(set(first)) and s1.entities_created == 5
    second = [("A", "r", "B"), ("A", "t", "F"), ("F", "r", "A"), ("F", "r", "A"), ("G", "s", "F")]
    p2 = tmp_path / "two.txt"
    p2.write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in second), encoding="utf-8")
    s2 = engine.load(p2, progress=False, batch_size=2)
    assert s2.relationships_created == len(set(second) - set(first)) and s2.entities_created == 2
    check_stats(engine, expected_counts(first + second))
    rows = engine.graph.read("MATCH (h:IsoragEntity {isorag_kg: $kg})-[r]->(t) RETURN h.isorag_key AS h, "
                             "type(r) AS type, r.isorag_name AS name, t.isorag_key AS t", kg=engine.kg)
    assert sorted((r["h"], r["name"], r["t"]) for r in rows) == sorted(set(first + second))
    assert all(r["type"] == r["name"] for r in rows)


def test_resume_after_kill(make_engine: Any, tmp_path: Path, neo4j_uri: str, milvus_uri: str) -> None:
    """A load killed between batches (SIGKILL) and run again, once its lease ran out, completes: nothing missing,
    nothing twice."""
    eng = make_engine()
    path = tmp_path / "kb.txt"
    triples = write_hrt(path, n_movies=400)
    want = expected_counts(triples)
    env = {**os.environ, "NEO4J_URI": neo4j_uri, "MILVUS_URI": milvus_uri, "HF_HUB_OFFLINE": "1",
           "ISORAG_LOCK_TTL_S": "3"}
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "load", str(path), "--kg", eng.kg,
                             "--batch-size", "40", "--quiet"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    seen = 0
    while time.monotonic() < deadline and proc.poll() is None:
        seen = eng.graph.stats()["entities"]
        if seen > want["entities"] // 4:
            break
        time.sleep(0.2)
    assert proc.poll() is None, f"the load ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = eng.graph.stats()
    assert 0 < partial["entities"] < want["entities"] or partial["triples"] < want["triples"]
    time.sleep(3.5)  # the dead loader's lease expires
    summary = eng.load(path, progress=False, batch_size=40)
    check_stats(eng, want)
    assert summary.entities_created == want["entities"] - partial["entities"]
    dup = eng.graph.read("MATCH (n:IsoragEntity {isorag_kg: $kg}) WITH n.isorag_key AS key, count(*) AS c "
                         "WHERE c > 1 RETURN count(*) AS d",
                         kg=eng.kg)[0]["d"]
    assert dup == 0


def test_every_format(make_engine: Any, tmp_path: Path) -> None:
    (tmp_path / "t.tsv").write_text("head\trelation\ttail\nA\tknows\tB\nB\tknows\tC\n", encoding="utf-8")
    (tmp_path / "t.csv").write_text("src,rel,dst\nA,likes,C\n", encoding="utf-8")
    (tmp_path / "t.jsonl").write_text(json.dumps({"head": "C", "relation": "knows", "tail": "D"}) + "\n",
                                      encoding="utf-8")
    (tmp_path / "t.nt").write_text(
        '<http://ex.org/Alan_Turing> <http://www.w3.org/2000/01/rdf-schema#label> "Alan Turing"@en .\n'
        '<http://ex.org/Alan_Turing> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex.org/Person> .\n'
        '<http://ex.org/Alan_Turing> <http://ex.org/birthYear> "1912" .\n'
        '<http://ex.org/Alan_Turing> <http://ex.org/fieldOf> <http://ex.org/Computer_science> .\n', encoding="utf-8")
    (tmp_path / "t.ttl").write_text(
        "@prefix ex: <http://ex.org/> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
        'ex:Ada rdfs:label "Ada Lovelace" ; ex:colleagueOf ex:Charles_Babbage .\n', encoding="utf-8")
    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "nodes.csv").write_text("id,name,type\nn1,Acme Corp,Company\nn2,Jane Doe,Person\n", encoding="utf-8")
    (tables / "edges.csv").write_text("source,relation,target\nn2,works at,n1\n", encoding="utf-8")

    eng = make_engine()
    eng.load(tmp_path / "t.tsv", progress=False)
    eng.load(tmp_path / "t.csv", progress=False, head="src", relation="rel", tail="dst")
    eng.load(tmp_path / "t.jsonl", progress=False)
    eng.load(tmp_path / "t.nt", progress=False)
    eng.load(tmp_path / "t.ttl", progress=False)
    eng.load(tables, progress=False)
    st = eng.stats()
    assert st["agree"], st
    names = {r["name"] for r in eng.graph.read(
        "MATCH (n:IsoragEntity {isorag_kg: $kg}) RETURN n.isorag_name AS name", kg=eng.kg)}
    # RDF: the label is the name, the IRI's local name otherwise, literals are entities
    assert {"A", "B", "C", "D", "Alan Turing", "1912", "Computer science", "Ada Lovelace", "Charles Babbage",
            "Acme Corp", "Jane Doe"} <= names
    types = eng.graph.read("MATCH (n:IsoragEntity {isorag_kg: $kg})-[:ISORAG_IS_A]->(t:IsoragEntityType) "
                           "RETURN n.isorag_name AS n, t.name AS t",
                           kg=eng.kg)
    assert {"n": "Alan Turing", "t": "Person"} in types and {"n": "Jane Doe", "t": "Person"} in types
    assert st["milvus"]["types"] == st["neo4j"]["types"] >= 2
    # the names were embedded: the labelled entity is found by its label
    res = eng.retrieve({"triples": [["Alan Turing", "birth year", "UNKNOWN year 1"]]}, k=1)
    assert res.answers[0].entity.name == "1912"
    res = eng.retrieve({"triples": [["Jane Doe", "works at", "UNKNOWN company 1"]]}, k=1)
    assert res.answers[0].entity.name == "Acme Corp"


def test_malformed_lines_are_counted_and_strict_stops(engine: Any, tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(b"A|knows|B\nonly|two\n|knows|C\nB|knows|\xff\xfe\nC|knows|D\n")
    s = engine.load(path, progress=False)
    assert s.triples == 2 and s.lines_skipped == 3
    assert any("bad.txt:2:" in e for e in s.skip_examples)
    assert sum(s.skip_reasons.values()) == 3
    with pytest.raises(MalformedInputError) as ei:
        engine.load(path, progress=False, strict=True)
    assert ei.value.line == 2 and "bad.txt:2:" in str(ei.value)


def test_existing_graph_is_adopted_in_place(engine: Any) -> None:
    label = f"Person_{engine.kg}"
    engine.graph.write(
        f"CREATE (a:`{label}` {{pid: 1, fullname: 'Grace Hopper'}}), (b:`{label}` {{pid: 2, fullname: 'Navy'}}), "
        f"(c:`{label}` {{pid: 3, fullname: 'COBOL'}}), (a)-[:SERVED_IN]->(b), (a)-[:CREATED]->(c)")
    try:
        s = engine.load_existing(label, "pid", "fullname", progress=False)
        assert s.entities_created == 3 and s.embedded_entities == 3
        st = engine.stats()
        assert st["agree"] and st["neo4j"]["entities"] == 3 and st["neo4j"]["relations"] == 2
        res = engine.retrieve({"triples": [["Grace Hopper", "created", "UNKNOWN thing 1"]]}, k=1)
        assert res.answers[0].entity.name == "COBOL"
        again = engine.load_existing(label, "pid", "fullname", progress=False)
        assert again.entities_created == 0 and again.embedded_entities == 0
    finally:
        engine.graph.write(f"MATCH (n:`{label}`) DETACH DELETE n")


def test_dead_server_names_the_uri() -> None:
    from engine._config import Neo4jSettings
    from engine.stores.graph import GraphStore

    g = GraphStore(Neo4jSettings(uri="bolt://127.0.0.1:1", connection_timeout=2), "dead")
    t0 = time.monotonic()
    with pytest.raises(StoreUnavailableError, match="127.0.0.1:1"):
        g.verify()
    with pytest.raises(StoreUnavailableError, match="127.0.0.1:1"):
        g.read("RETURN 1")
    assert time.monotonic() - t0 < 30
