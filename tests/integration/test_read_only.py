"""Read-only commands never create anything: a KG that does not exist is a KGNotFoundError naming both stores, and
Neo4j (the KG's nodes, the schema) and Milvus (the KG's collections) are the same after as before; a KG that one
store holds and the other does not is reported as such by ``stats``, never as "stores agree"."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from engine import Engine, EngineConfig, KGNotFoundError, MilvusSettings, Neo4jSettings
from engine.cli import main


PATTERN = '{"triples": [["Heat", "directed_by", "UNKNOWN 1"]]}'
TRIPLES = [("Heat", "directed_by", "Michael Mann"), ("Heat", "starred_actors", "Al Pacino"),
           ("Collateral", "directed_by", "Michael Mann")]


def missing_kg() -> str:
    return f"ro_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def stores(neo4j_uri: str, milvus_uri: str, embedder: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The servers as the commands see them (NEO4J_URI / MILVUS_URI), and a look at everything a KG could own."""
    from pymilvus import connections, utility

    from engine.stores.graph import GraphStore

    monkeypatch.setenv("NEO4J_URI", neo4j_uri)
    monkeypatch.setenv("MILVUS_URI", milvus_uri)
    for var in ("ISORAG_KG", "ISORAG_SCORER", "ISORAG_LLM_BASE_URL", "ISORAG_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    alias = f"ro-{uuid.uuid4().hex[:8]}"
    from engine.servers.milvus import local_token

    connections.connect(alias=alias, uri=milvus_uri, token=local_token(milvus_uri), timeout=10)
    graph = GraphStore(Neo4jSettings(uri=neo4j_uri), "default")

    class Stores:
        def snapshot(self, kg: str) -> dict[str, Any]:
            return {
                "collections": sorted(n for n in utility.list_collections(using=alias) if kg.lower() in n.lower()),
                # (the entity property is `kg`, or `isorag_kg` in the namespaced data model)
                "nodes": graph.read("MATCH (n) WHERE n.kg = $kg OR n.isorag_kg = $kg RETURN count(n) AS n",
                                    kg=kg)[0]["n"],
                "constraints": sorted(r["name"] for r in graph.read("SHOW CONSTRAINTS YIELD name")),
                "indexes": sorted(r["name"] for r in graph.read("SHOW INDEXES YIELD name")),
            }

        def engine(self, kg: str) -> Engine:
            eng = Engine(EngineConfig(kg=kg, neo4j=Neo4jSettings(uri=neo4j_uri),
                                      milvus=MilvusSettings(uri=milvus_uri)), llm=False, embedder=embedder)
            return eng

    yield Stores()
    connections.remove_connection(alias)


def inputs(tmp: Path) -> dict[str, str]:
    claims = tmp / "claims.jsonl"
    claims.write_text(json.dumps({"id": "c1", "claim": "Heat was directed by Michael Mann",
                                  "pattern": {"triples": [["Heat", "directed_by", "Michael Mann"]]}}) + "\n")
    items = tmp / "items.jsonl"
    items.write_text(json.dumps({"id": "q1", "question": "who directed Heat", "answers": ["Michael Mann"],
                                 "pattern": json.loads(PATTERN)}) + "\n")
    qa = tmp / "qa.jsonl"
    qa.write_text(json.dumps({"question": "who directed Heat", "topics": ["Heat"], "answers": ["Michael Mann"]})
                  + "\n")
    return {"claims": str(claims), "items": str(items), "qa": str(qa), "out": str(tmp / "out" / "o.jsonl"),
            "ckpt": str(tmp / "scorer.pt")}


def read_commands(kg: str, f: dict[str, str]) -> list[list[str]]:
    return [
        ["stats", "--kg", kg],
        ["stats", "--kg", kg, "--json"],
        ["match", PATTERN, "--kg", kg],
        ["ask", "who directed Heat", "--pattern", PATTERN, "--kg", kg, "--no-llm"],
        ["verify", f["claims"], "--out", f["out"], "--kg", kg, "--no-llm", "--quiet"],
        ["eval", f["items"], "--kg", kg, "--no-llm", "--quiet"],
        ["synth", "--out", f["out"], "--kg", kg, "--no-llm", "--n", "2"],
        ["train-scorer", "--qa", f["qa"], "--out", f["ckpt"], "--kg", kg, "--quiet", "--epochs", "1"],
        ["train-generator", "--qa", f["qa"], "--out", f["ckpt"] + ".generator", "--kg", kg, "--quiet"],
    ]


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(args)
    out, err = capsys.readouterr()
    return rc, out, err


def test_reads_of_a_missing_kg_create_nothing(stores: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              neo4j_uri: str, milvus_uri: str) -> None:
    kg = missing_kg()
    before = stores.snapshot(kg)
    assert before["collections"] == [] and before["nodes"] == 0
    for args in read_commands(kg, inputs(tmp_path)):
        rc, out, err = run(args, capsys)
        assert rc == 2, (args, rc, out, err)
        assert err.splitlines() == [f"isorag: error: KG {kg!r} does not exist in Neo4j at {neo4j_uri} nor in "
                                    f"Milvus at {milvus_uri}: load it first (isorag load --kg {kg} FILE)"], args
        assert "stores agree" not in out
        assert stores.snapshot(kg) == before, args
    assert not Path(tmp_path / "out").exists() and not Path(tmp_path / "scorer.pt").exists()
    assert not Path(tmp_path / "scorer.pt.generator").exists()


def test_drop_of_a_missing_kg_says_so_and_creates_nothing(stores: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """``drop`` of a KG that is in neither store is an error (not "dropped"), and takes no lease on the way."""
    kg = missing_kg()
    before = stores.snapshot(kg)
    lock_nodes = "MATCH (l:IsoragLock {kg: $kg}) RETURN count(l) AS n"
    rc, out, err = run(["drop", "--kg", kg, "--yes"], capsys)
    assert rc == 2 and "dropped" not in out and len(err.splitlines()) == 1
    assert err.startswith(f"isorag: error: KG {kg!r} does not exist in Neo4j")
    assert stores.snapshot(kg) == before
    eng = stores.engine(kg)
    try:
        with pytest.raises(KGNotFoundError):
            eng.drop()
        assert eng.graph.read(lock_nodes, kg=kg)[0]["n"] == 0
    finally:
        eng.close()


def test_api_reads_of_a_missing_kg_create_nothing(stores: Any, tmp_path: Path) -> None:
    kg = missing_kg()
    before = stores.snapshot(kg)
    reads: list[Callable[[Engine], Any]] = [
        lambda e: e.stats(),
        lambda e: e.retrieve(PATTERN),
        lambda e: e.require_kg(),
        lambda e: e.require_kg(vectors=False),
        lambda e: e.scorer,
        lambda e: e.scorer_features,
        lambda e: e.link_entities("who directed Heat"),
        lambda e: e.ask("who directed Heat", pattern=PATTERN),
        lambda e: e.verify("Heat was directed by Michael Mann", pattern=PATTERN.replace("UNKNOWN 1", "Michael Mann")),
    ]
    for read in reads:
        eng = stores.engine(kg)
        eng.config = eng.config.with_(scorer=str(tmp_path / "any.pt"))
        try:
            with pytest.raises(KGNotFoundError) as exc:
                read(eng)
            assert not exc.value.in_neo4j and not exc.value.in_milvus and kg in str(exc.value)
        finally:
            eng.close()
        assert stores.snapshot(kg) == before
    # without raising, the error is the answer's
    eng = stores.engine(kg)
    ans = eng.ask("who directed Heat", pattern=PATTERN, raise_errors=False)
    eng.close()
    assert ans.failed_stage and "does not exist in Neo4j" in ans.error
    assert stores.snapshot(kg) == before


def test_a_kg_in_neo4j_only(stores: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                            milvus_uri: str) -> None:
    """Loaded into Neo4j, never embedded: stats disagrees and says why; reads that need vectors refuse."""
    from loaders._model import TripleRecord
    from loaders.bulk import BulkLoader, LoadSummary

    kg = missing_kg()
    eng = stores.engine(kg)
    try:
        records = [TripleRecord(*t, i) for i, t in enumerate(TRIPLES, 1)]
        BulkLoader(eng.graph, None, None, progress=False).load_records(records, LoadSummary())
        before = stores.snapshot(kg)
        assert before["collections"] == [] and before["nodes"] > 0
        rc, out, err = run(["stats", "--kg", kg], capsys)
        assert rc == 1 and "STORES DISAGREE" in out and "no collection in Milvus" in out and not err
        rc, out, err = run(["stats", "--kg", kg, "--json"], capsys)
        st = json.loads(out)
        assert rc == 1 and st["neo4j"]["exists"] and not st["milvus"]["exists"] and not st["agree"]
        rc, out, err = run(["match", PATTERN, "--kg", kg], capsys)
        assert rc == 2 and err.splitlines() == [
            f"isorag: error: KG {kg!r} exists in Neo4j at {eng.graph.uri} but has no vectors in Milvus at "
            f"{milvus_uri}: run its load again to embed it"]
        eng.require_kg(vectors=False)  # what synth needs is there
        assert stores.snapshot(kg) == before
    finally:
        eng.drop()
        eng.close()


def test_a_kg_in_milvus_only(stores: Any, embedder: Any, capsys: pytest.CaptureFixture[str],
                             milvus_uri: str) -> None:
    """Collections without a graph (e.g. left by an earlier version's reads): never "stores agree"."""
    from engine.stores.vectors import VectorStore

    kg = missing_kg()
    with VectorStore(milvus_uri, kg=kg, model=embedder.slug, dim=embedder.dim) as vs:
        vs.ensure_collections()
        try:
            before = stores.snapshot(kg)
            assert len(before["collections"]) == 3 and before["nodes"] == 0
            rc, out, err = run(["stats", "--kg", kg], capsys)
            assert rc == 1 and "STORES DISAGREE" in out and "not in Neo4j" in out and "stores agree" not in out
            for args in (["match", PATTERN, "--kg", kg], ["synth", "--out", "/dev/null", "--kg", kg, "--no-llm"]):
                rc, out, err = run(args, capsys)
                assert rc == 2 and "does not exist in Neo4j" in err and len(err.splitlines()) == 1, (args, err)
            assert stores.snapshot(kg) == before
        finally:
            vs.drop()


def test_a_loaded_kg_still_reads(stores: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """The check passes for a KG in both stores, and a load after a failed read finds it (the check is not
    cached as a failure)."""
    from loaders._model import TripleRecord
    from loaders.bulk import BulkLoader, LoadSummary

    kg = missing_kg()
    eng = stores.engine(kg)
    try:
        with pytest.raises(KGNotFoundError):
            eng.retrieve(PATTERN)
        BulkLoader(eng.graph, eng.vectors, eng.embedder, progress=False).load_records(
            [TripleRecord(*t, i) for i, t in enumerate(TRIPLES, 1)], LoadSummary())
        assert eng.retrieve(PATTERN).answers[0].entity.name == "Michael Mann"
        rc, out, err = run(["stats", "--kg", kg], capsys)
        assert rc == 0 and "stores agree" in out and not err
    finally:
        eng.drop()
        eng.close()
