"""The offline import (neo4j-admin database import) into a local Neo4j of its own, against the online loader."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any, Iterator

import pytest

from engine._errors import OfflineImportError
from engine.servers.neo4j import LocalNeo4j

from helpers.kg import unique_kg


NODES = ("id,name,type\n"
         "n1,Acme Corp,Company\n"
         "n2,Jane Doe,Person\n"
         'n3,"Bob ""The Builder"", Jr.",Person\n'
         "n4,Springfield,City\n")
EDGES = ("source,relation,target\n"
         "n2,works at,n1\n"
         "n3,works at,n1\n"
         "n2,works at,n1\n"  # a repeated line: one relationship
         "n1,based in,n4\n"
         "n3,lives in,n4\n"
         "n5,lives in,n4\n"  # n5 has no node row: the tables loader skips the edge
         "n2,knows,n3\n"
         "n2,ISORAG_IS_A,n3\n")  # a relation named like the reserved type


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write(tmp: Path) -> Path:
    d = tmp / "tables"
    d.mkdir()
    (d / "nodes.csv").write_text(NODES, encoding="utf-8")
    (d / "edges.csv").write_text(EDGES, encoding="utf-8")
    return d


def _graph(eng: Any) -> dict[str, Any]:
    kg = eng.kg
    g = eng.graph
    return {
        "entities": sorted((r["key"], r["name"], sorted(r["types"] or []), r["eid"] is not None) for r in g.read(
            "MATCH (n:IsoragEntity {isorag_kg: $kg}) RETURN n.isorag_key AS key, n.isorag_name AS name, "
            "n.isorag_types AS types, n.isorag_eid AS eid",
            kg=kg)),
        "triples": sorted((r["h"], r["type"], r["name"], r["t"]) for r in g.read(
            "MATCH (h:IsoragEntity {isorag_kg: $kg})-[r]->(t:IsoragEntity) RETURN h.isorag_key AS h, "
            "type(r) AS type, r.isorag_name AS name, t.isorag_key AS t", kg=kg)),
        "relations": sorted((r["name"], r["type"]) for r in g.read(
            "MATCH (rt:IsoragRelationType {kg: $kg}) RETURN rt.name AS name, rt.type AS type", kg=kg)),
        "is_a": sorted((r["n"], r["t"]) for r in g.read(
            "MATCH (n:IsoragEntity {isorag_kg: $kg})-[:ISORAG_IS_A]->(t:IsoragEntityType {kg: $kg}) "
            "RETURN n.isorag_key AS n, t.name AS t", kg=kg)),
    }


@pytest.fixture
def private(tmp_path: Path, milvus_uri: str, embedder: Any) -> Iterator[tuple[LocalNeo4j, Any]]:
    """A local Neo4j of its own (empty) and an engine on it; the KG's Milvus collections are dropped after."""
    from engine._config import EngineConfig, MilvusSettings, Neo4jSettings
    from engine._engine import Engine

    srv = LocalNeo4j(home=tmp_path / "neo4j", port=_free_port(), heap="512m", pagecache="64m")
    eng = Engine(EngineConfig(kg=unique_kg("off"), neo4j=Neo4jSettings(uri=srv.uri),
                              milvus=MilvusSettings.from_env(uri=milvus_uri)), llm=False, embedder=embedder)
    try:
        yield srv, eng
    finally:
        try:
            eng.vectors.drop()
        finally:
            srv.stop()


def test_offline_import_equals_the_online_load(private: Any, make_engine: Any, tmp_path: Path) -> None:
    srv, eng = private
    src = _write(tmp_path)
    online = make_engine()
    online.load(src, progress=False)
    s1 = eng.load(src, progress=False, offline_import=True, local_neo4j=srv)
    # the same graph as the online loader's: entities (names, types), typed triples with their names, catalog
    assert _graph(eng) == _graph(online)
    st = eng.stats()
    assert st["agree"], st
    assert st["neo4j"]["entities"] == 4 and st["neo4j"]["triples"] == 6 and st["neo4j"]["relations"] == 5
    assert st["milvus"]["types"] == 3
    assert s1.relationships_created == 6 and s1.entities_created == 4 and s1.embedded_entities == 4
    assert s1.triples == 7 and s1.lines_skipped == 1  # the repeated line is one relationship
    # the constraints exist afterwards: a second entity with the same eid is refused
    with pytest.raises(Exception, match="(?i)already exists|constraint"):
        eng.graph.write("CREATE (:IsoragEntity {isorag_eid: $eid})", eid=eng.graph.read(
            "MATCH (n:IsoragEntity) RETURN n.isorag_eid AS e LIMIT 1")[0]["e"])
    # retrieval on the imported KG gives what it gives on the online one
    pat = {"triples": [["Jane Doe", "works at", "UNKNOWN company 1"]]}
    a, b = eng.retrieve(pat, k=2), online.retrieve(pat, k=2)
    assert [x.entity.name for x in a.answers] == [x.entity.name for x in b.answers]
    assert a.answers[0].entity.name == "Acme Corp"
    assert [round(sg.gsd, 6) for sg in a.subgraphs] == [round(sg.gsd, 6) for sg in b.subgraphs]
    # the same file again adds nothing; another file is refused: the import would replace the database
    s2 = eng.load(src, progress=False, offline_import=True, local_neo4j=srv)
    assert s2.relationships_created == 0 and s2.entities_created == 0 and s2.embedded_entities == 0
    assert eng.stats()["agree"]
    other = tmp_path / "other.txt"
    other.write_text("X|r|Y\n", encoding="utf-8")
    with pytest.raises(OfflineImportError, match="holds data"):
        eng.load(other, progress=False, offline_import=True, local_neo4j=srv)


def test_offline_import_resumes_after_failures(private: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """A broken import (store left half-written) and an embedding stage that dies: run again, it completes."""
    import loaders.offline as off

    srv, eng = private
    path = tmp_path / "kb.txt"
    lines = [f"Movie {i}|directed_by|Director {i % 7}\nMovie {i}|release_year|{1990 + i % 11}\n" for i in range(60)]
    path.write_text("".join(lines), encoding="utf-8")
    real_import = LocalNeo4j.import_full

    def broken_import(self: LocalNeo4j, *a: Any, **kw: Any) -> None:
        (self.home / "data" / "databases" / "neo4j").mkdir(parents=True, exist_ok=True)
        (self.home / "data" / "databases" / "neo4j" / "neostore").write_bytes(b"half written")
        raise RuntimeError("killed")

    monkeypatch.setattr(LocalNeo4j, "import_full", broken_import)
    with pytest.raises(RuntimeError, match="killed"):
        eng.load(path, progress=False, offline_import=True, local_neo4j=srv, batch_size=20)
    assert (srv.home / "import" / eng.kg / "state.json").exists()
    monkeypatch.setattr(LocalNeo4j, "import_full", real_import)
    calls = {"n": 0}
    real_embed = off.embed_batch

    def dying_embed(*a: Any, **kw: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("embedder died")
        real_embed(*a, **kw)

    monkeypatch.setattr(off, "embed_batch", dying_embed)
    with pytest.raises(RuntimeError, match="embedder died"):
        eng.load(path, progress=False, offline_import=True, local_neo4j=srv, batch_size=20)
    monkeypatch.setattr(off, "embed_batch", real_embed)
    before = eng.vectors.count("entities")
    assert before >= 40  # at least the two batches before the failure
    s = eng.load(path, progress=False, offline_import=True, local_neo4j=srv, batch_size=20)
    st = eng.stats()
    assert st["agree"], st
    n_ent = 60 + 7 + 11
    assert st["neo4j"]["entities"] == n_ent and st["neo4j"]["triples"] == 120 and st["neo4j"]["relations"] == 2
    assert s.embedded_entities == n_ent - before  # what was embedded before the failures is not redone
    assert not list((srv.home / "import" / eng.kg).glob("*.csv"))  # the CSV files are gone once done
