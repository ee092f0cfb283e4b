"""Fact-verification jobs on a KG in the real Neo4j and Milvus: verdicts and the summary, resuming after a kill or a
cut output, shards, retrying failed claims, the CLI. Reading claims, labels and shards:
tests/unit/test_verify_jobs.py."""

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

from engine import Engine, EngineConfig, MilvusSettings, Neo4jSettings
from engine.jobs import format_summary, run_verify_job, shard_of
from loaders._model import TripleRecord
from loaders.bulk import BulkLoader, LoadSummary

from helpers import ROOT
from helpers.claims import CLAIMS, MALFORMED, MOVIES, claim_rows, write_claims
from helpers.kg import unique_kg


def normalized(path: Path) -> dict[str, dict[str, Any]]:
    """The verdict lines by id, without what legitimately differs between runs (timings, LLM usage)."""
    out: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        rec.pop("timings"), rec.pop("usage")
        assert rec["id"] not in out, f"id {rec['id']} written twice"
        out[rec["id"]] = rec
    return out


@pytest.fixture(scope="module")
def kg_engine(neo4j_uri: str, milvus_uri: str, embedder: Any) -> Any:
    cfg = EngineConfig(kg=unique_kg("jobs"), neo4j=Neo4jSettings(uri=neo4j_uri), milvus=MilvusSettings(uri=milvus_uri))
    eng = Engine(cfg, llm=False, embedder=embedder)
    records = [TripleRecord(h, r, t, i) for i, (h, r, t) in enumerate(MOVIES, start=1)]
    BulkLoader(eng.graph, eng.vectors, embedder, progress=False).load_records(records, LoadSummary())
    yield eng
    eng.drop()
    eng.close()


def test_job_verdicts_and_summary(kg_engine: Engine, tmp_path: Path) -> None:
    claims = write_claims(tmp_path / "claims.jsonl")
    out = tmp_path / "out" / "verdicts.jsonl"
    echoed: list[str] = []
    summary = run_verify_job(kg_engine, claims, out, concurrency=3, progress=False, echo=echoed.append)
    assert summary["malformed"] == len(MALFORMED) == len([e for e in echoed if e.startswith(str(claims))])
    assert len(summary["malformed_rows"]) == len(MALFORMED)
    assert summary["verified"] == summary["verdicts"] == summary["rows"] == len(CLAIMS)
    assert summary["failed"] == 0 and summary["already_done"] == 0
    got = normalized(out)
    expected = {f"c0-{i}": rule for i, (_, _, rule) in enumerate(CLAIMS)}
    assert {i: r["label"] for i, r in got.items()} == expected
    assert summary["accuracy"] == 1.0 and summary["labeled"] == len(CLAIMS)
    assert summary["counts"] == {"SUPPORTED": 10, "REFUTED": 5, "NOT_ENOUGH_INFO": 2, "FAILED": 0}
    assert summary["confusion"]["False"] == {"SUPPORTED": 0, "REFUTED": 2, "NOT_ENOUGH_INFO": 0, "FAILED": 0}
    assert summary["confusion"]["NOT_ENOUGH_INFO"]["NOT_ENOUGH_INFO"] == 2
    rec = got["c0-9"]
    assert rec["claim"] == "Heat directed by Ridley Scott." and rec["gold"] == "REFUTED" and rec["correct"] is True
    assert "Michael Mann" in rec["evidence"] and rec["relaxed"] == "Ridley Scott" and rec["method"] == "rule"
    text = format_summary(summary)
    assert "accuracy 1.0000" in text and "gold \\ verdict" in text
    json.dumps(summary)
    # a rerun has nothing to do and changes nothing
    before = out.read_bytes()
    again = run_verify_job(kg_engine, claims, out, concurrency=2, progress=False, echo=lambda m: None)
    assert again["verified"] == 0 and again["already_done"] == len(CLAIMS) and out.read_bytes() == before
    assert again["accuracy"] == 1.0 and again["verdicts"] == len(CLAIMS)


def test_job_resumes_after_a_cut_output(kg_engine: Engine, tmp_path: Path) -> None:
    claims = write_claims(tmp_path / "claims.jsonl")
    full = tmp_path / "full.jsonl"
    run_verify_job(kg_engine, claims, full, concurrency=2, progress=False, echo=lambda m: None)
    lines = full.read_bytes().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(lines[:5]) + lines[5][: len(lines[5]) // 2])  # a kill in the middle of line 6
    summary = run_verify_job(kg_engine, claims, cut, concurrency=2, progress=False, echo=lambda m: None)
    assert summary["repaired_partial_line"] and summary["already_done"] == 5
    assert summary["verified"] == len(CLAIMS) - 5
    assert normalized(cut) == normalized(full)


def test_job_resumes_after_a_kill(kg_engine: Engine, tmp_path: Path) -> None:
    claims = write_claims(tmp_path / "claims.jsonl", copies=4, malformed=False)
    total = len(CLAIMS) * 4
    out = tmp_path / "killed.jsonl"
    env = {**os.environ, "NEO4J_URI": kg_engine.config.neo4j.uri or "", "MILVUS_URI": kg_engine.config.milvus.uri or "",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "engine.cli", "verify", str(claims), "--out", str(out), "--kg", kg_engine.kg,
           "--concurrency", "1", "--no-llm", "--quiet"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists() and out.read_bytes().count(b"\n") >= 4:
                break
            time.sleep(0.02)
        if proc.poll() is not None:
            pytest.fail(f"the job ended before it could be killed: {proc.returncode}\n"
                        f"{proc.stderr.read().decode()[-3000:]}")  # type: ignore[union-attr]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    written = out.read_bytes().count(b"\n")
    assert 4 <= written < total, written
    summary = run_verify_job(kg_engine, claims, out, concurrency=2, progress=False, echo=lambda m: None)
    assert summary["already_done"] == written and summary["verified"] == total - written
    full = tmp_path / "full.jsonl"
    run_verify_job(kg_engine, claims, full, concurrency=2, progress=False, echo=lambda m: None)
    assert normalized(out) == normalized(full) and len(normalized(out)) == total


def test_job_shards(kg_engine: Engine, tmp_path: Path) -> None:
    claims = write_claims(tmp_path / "claims.jsonl")
    outs, summaries = [], []
    for i in range(3):
        out = tmp_path / f"shard{i}.jsonl"
        summaries.append(run_verify_job(kg_engine, claims, out, shard=(i, 3), concurrency=2, progress=False,
                                        echo=lambda m: None))
        outs.append(set(normalized(out)))
    assert sum(len(o) for o in outs) == len(CLAIMS) and set().union(*outs) == {f"c0-{i}" for i in range(len(CLAIMS))}
    for i, ids in enumerate(outs):
        assert all(shard_of(x, 3) == i for x in ids)
        assert summaries[i]["in_shard"] == len(ids) and summaries[i]["shard"] == f"{i}/3"
    # every malformed row is reported by exactly one shard
    assert sum(s["malformed"] for s in summaries) == len(MALFORMED)


def test_job_retry_failed(kg_engine: Engine, tmp_path: Path) -> None:
    claims = tmp_path / "claims.jsonl"
    rows = claim_rows()[:3]
    del rows[1]["pattern"]  # no pattern and no LLM: this claim fails at the pattern stage
    claims.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "out.jsonl"
    s1 = run_verify_job(kg_engine, claims, out, progress=False, echo=lambda m: None)
    assert s1["failed"] == 1 and s1["counts"]["FAILED"] == 1 and s1["confusion"]["SUPPORTED"]["FAILED"] == 1
    failed = normalized(out)["c0-1"]
    assert failed["failed_stage"] == "pattern" and "ISORAG_LLM_BASE_URL" in failed["error"] and not failed["correct"]
    rows[1]["pattern"] = {"triples": [list(CLAIMS[1][0])]}
    claims.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    s2 = run_verify_job(kg_engine, claims, out, progress=False, echo=lambda m: None)
    assert s2["verified"] == 0  # without --retry-failed a failed id is done
    s3 = run_verify_job(kg_engine, claims, out, retry_failed=True, progress=False, echo=lambda m: None)
    assert s3["retried_failed"] == 1 and s3["verified"] == 1 and s3["failed"] == 0
    got = normalized(out)
    assert len(got) == 3 and got["c0-1"]["label"] == "SUPPORTED" and s3["accuracy"] == 1.0


def test_cli_verify_and_ask(kg_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    from engine.cli import main

    monkeypatch.setenv("NEO4J_URI", kg_engine.config.neo4j.uri or "")
    monkeypatch.setenv("MILVUS_URI", kg_engine.config.milvus.uri or "")
    claims = write_claims(tmp_path / "claims.jsonl")
    out = tmp_path / "verdicts.jsonl"
    rc = main(["verify", str(claims), "--out", str(out), "--kg", kg_engine.kg, "--no-llm", "--quiet", "--json",
               "--threshold", "0.5", "--concurrency", "2"])
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert rc == 1  # malformed rows make the status non-zero
    assert summary["malformed"] == len(MALFORMED) and summary["accuracy"] == 1.0
    assert f"{claims}:" in captured.err and "duplicate id" in captured.err
    assert len(normalized(out)) == len(CLAIMS)

    rc = main(["ask", "who directed Heat", "--kg", kg_engine.kg, "--no-llm", "-k", "1",
               "--pattern", '{"triples": [["Heat", "directed_by", "UNKNOWN director 1"]]}'])
    text = capsys.readouterr().out
    assert rc == 0
    assert "answer: Michael Mann" in text and "evidence graph [1]  GSD 0.0000" in text
    assert "Heat  directed_by  Michael Mann" in text and "timings (ms):" in text
    rc = main(["ask", "who directed Heat", "--kg", kg_engine.kg, "--no-llm", "--json",
               "--pattern", '{"triples": [["Heat", "directed_by", "UNKNOWN director 1"]]}'])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["answers"][0]["name"] == "Michael Mann"
    rc = main(["ask", "who directed Heat", "--kg", kg_engine.kg, "--no-llm"])
    assert rc == 2 and "ISORAG_LLM_BASE_URL" in capsys.readouterr().err
