"""Fact-verification jobs: reading claims, shards, resuming after a kill or a cut output, the summary, the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from engine import Engine, EngineConfig, InputError, MalformedInputError, MilvusSettings, Neo4jSettings
from engine._errors import ConfigError
from engine.jobs import (
    BadRow,
    ClaimRow,
    format_summary,
    is_correct,
    normalize_label,
    parse_shard,
    read_claims,
    read_verdicts,
    run_verify_job,
    shard_of,
)
from loaders._model import Triple
from loaders.bulk import BulkLoader, LoadSummary

from helpers import ROOT
from helpers.kg import unique_kg


MOVIES = [
    ("Heat", "directed_by", "Michael Mann"),
    ("Heat", "starred_actors", "Al Pacino"),
    ("Heat", "release_year", "1995"),
    ("Collateral", "directed_by", "Michael Mann"),
    ("Collateral", "starred_actors", "Tom Cruise"),
    ("Alien", "directed_by", "Ridley Scott"),
    ("Alien", "release_year", "1979"),
    ("Gladiator", "starred_actors", "Russell Crowe"),
    ("Top Gun", "starred_actors", "Tom Cruise"),
]

# (claim triple, gold label as a file would give it, the label the rule gives)
CLAIMS = [
    *[((h, r, t), "SUPPORTED", "SUPPORTED") for h, r, t in MOVIES],
    (("Heat", "directed_by", "Ridley Scott"), "REFUTED", "REFUTED"),             # swapped tail
    (("Alien", "directed_by", "Michael Mann"), "refutes", "REFUTED"),
    (("Alien", "release_year", "1995"), False, "REFUTED"),
    (("Heat", "release_year", "Michael Mann"), "False", "REFUTED"),            # wrong relation
    (("Top Gun", "directed_by", "Tom Cruise"), "REFUTED", "REFUTED"),
    (("Heat", "directed_by", "Steven Spielberg"), "NOT ENOUGH INFO", "NOT_ENOUGH_INFO"),  # unknown entity
    (("Jaws", "directed_by", "Steven Spielberg"), "nei", "NOT_ENOUGH_INFO"),
    (("Heat", "starred_actors", "Al Pacino"), True, "SUPPORTED"),
]


def claim_rows(copies: int = 1) -> list[dict[str, Any]]:
    rows = []
    for c in range(copies):
        for i, ((h, r, t), gold, _) in enumerate(CLAIMS):
            rows.append({"id": f"c{c}-{i}", "claim": f"{h} {r.replace('_', ' ')} {t}.", "label": gold,
                         "pattern": {"triples": [[h, r, t]]}})
    return rows


MALFORMED = [
    "{not json",
    json.dumps({"claim": "no id here"}),
    json.dumps({"id": "c0-0", "claim": "a duplicate id"}),
    json.dumps({"id": "m1", "claim": "a bad label", "label": "maybe"}),
    json.dumps({"id": "m2", "claim": "a bad pattern", "pattern": {"triples": [["only", "two"]]}}),
    json.dumps({"id": "m3", "claim": "   "}),
    json.dumps(["a", "list"]),
]


def write_claims(path: Path, copies: int = 1, malformed: bool = True) -> Path:
    lines = [json.dumps(r) for r in claim_rows(copies)]
    if malformed:
        # spread the bad rows among the good ones; a blank line is not a row
        for j, bad in enumerate(MALFORMED):
            lines.insert(3 + 2 * j, bad)
        lines.insert(1, "")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def normalized(path: Path) -> dict[str, dict[str, Any]]:
    """The verdict lines by id, without what legitimately differs between runs (timings, LLM usage)."""
    out: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        rec.pop("timings"), rec.pop("usage")
        assert rec["id"] not in out, f"id {rec['id']} written twice"
        out[rec["id"]] = rec
    return out


# ---------------------------------------------------------------------------------------------------------
# reading claims, labels, shards (no database)
# ---------------------------------------------------------------------------------------------------------


def test_read_claims_jsonl(tmp_path: Path) -> None:
    path = write_claims(tmp_path / "claims.jsonl")
    rows = list(read_claims(path))
    good = [r for r in rows if isinstance(r, ClaimRow)]
    bad = [r for r in rows if isinstance(r, BadRow)]
    assert len(good) == len(CLAIMS) and len(bad) == len(MALFORMED)
    reasons = [str(b) for b in bad]
    lines = path.read_text().splitlines()
    for b in bad:  # file:line: reason, with the line where the bad row is
        assert str(b).startswith(f"{path}:{b.line}: ") and lines[b.line - 1] in MALFORMED
    assert any("not valid JSON" in r for r in reasons)
    assert any("missing or empty id" in r for r in reasons)
    assert any("duplicate id 'c0-0' (first at line 1)" in r for r in reasons)
    assert any("unknown label 'maybe'" in r for r in reasons)
    assert any("bad pattern" in r for r in reasons)
    assert any("missing or empty claim" in r for r in reasons)
    assert any("expected an object" in r for r in reasons)
    assert isinstance(bad[0].error(), MalformedInputError)
    assert good[0].pattern == {"triples": [["Heat", "directed_by", "Michael Mann"]]}
    assert [g.gold for g in good][-8:] == ["REFUTED", "REFUTED", "False", "False", "REFUTED", "NOT_ENOUGH_INFO",
                                           "NOT_ENOUGH_INFO", "True"]


def test_read_claims_csv(tmp_path: Path) -> None:
    path = tmp_path / "claims.csv"
    path.write_text(
        'id,claim,label,pattern\n'
        '1,"Heat was directed by Michael Mann.",True,"{""triples"": [[""Heat"", ""directed_by"", ""Michael Mann""]]}"\n'
        '2,"A claim\non two lines",SUPPORTS,\n'
        '3,too,many,cells,here\n'
        '4,"Bad pattern",,"[[""a"", ""b""]"\n'
        ',"no id",,\n'
        '5,"ok, no label",,\n',
        encoding="utf-8",
    )
    rows = list(read_claims(path))
    good = {r.id: r for r in rows if isinstance(r, ClaimRow)}
    bad = [str(r) for r in rows if isinstance(r, BadRow)]
    assert sorted(good) == ["1", "2", "5"]
    assert good["1"].gold == "True" and good["1"].pattern == {"triples": [["Heat", "directed_by", "Michael Mann"]]}
    assert good["2"].claim == "A claim\non two lines" and good["2"].gold == "SUPPORTED" and good["2"].line == 3
    assert good["5"].gold is None and good["5"].pattern is None
    assert bad[0].startswith(f"{path}:5: expected 4 cells")
    assert bad[1].startswith(f"{path}:6: id '4': bad pattern")
    assert bad[2].startswith(f"{path}:7: missing or empty id")
    (tmp_path / "nohead.csv").write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="'id' and 'claim'"):
        list(read_claims(tmp_path / "nohead.csv"))
    with pytest.raises(ConfigError, match="format"):
        list(read_claims(tmp_path / "claims.txt"))


def test_labels() -> None:
    assert normalize_label("supported") == normalize_label("SUPPORTS") == "SUPPORTED"
    assert normalize_label("Refuted") == normalize_label("REFUTES") == "REFUTED"
    assert normalize_label("NOT ENOUGH INFO") == normalize_label("not_enough_info") == normalize_label("NEI") \
        == "NOT_ENOUGH_INFO"
    assert normalize_label(True) == normalize_label("true") == "True"
    assert normalize_label(False) == normalize_label("FALSE") == "False"
    with pytest.raises(ValueError):
        normalize_label("maybe")
    with pytest.raises(ValueError):
        normalize_label(1)
    # binary gold labels: True means SUPPORTED, False means anything else (SimGRAG's FactKG accuracy)
    assert is_correct("SUPPORTED", "True") and is_correct("REFUTED", "False") and is_correct("NOT_ENOUGH_INFO", "False")
    assert not is_correct("NOT_ENOUGH_INFO", "True") and not is_correct("FAILED", "False")
    assert is_correct("REFUTED", "REFUTED") and not is_correct("NOT_ENOUGH_INFO", "REFUTED")


def test_shards_partition_ids() -> None:
    ids = [f"claim-{i}" for i in range(2000)]
    for n in (1, 3, 8):
        parts = [{i for i in ids if shard_of(i, n) == s} for s in range(n)]
        assert sum(len(p) for p in parts) == len(ids) and set().union(*parts) == set(ids)
        if n > 1:
            assert min(len(p) for p in parts) > len(ids) / n * 0.8  # roughly even
    # stable across processes and runs (not Python's salted hash)
    assert [shard_of(f"c{i}", 4) for i in range(8)] == [3, 2, 1, 2, 0, 0, 2, 1]
    assert parse_shard("2/5") == (2, 5) and parse_shard(None) is None
    for bad in ("5/5", "-1/3", "1", "a/b", "0/0"):
        with pytest.raises(ConfigError):
            parse_shard(bad)


def test_read_verdicts_partial_last_line(tmp_path: Path) -> None:
    out = tmp_path / "v.jsonl"
    out.write_bytes(b'{"id": "a", "label": "SUPPORTED"}\n{"id": "b", "lab')
    records, partial = read_verdicts(out)
    assert [r["id"] for r in records] == ["a"] and partial
    assert out.read_bytes().endswith(b"lab")  # read only
    records, partial = read_verdicts(out, repair=True)
    assert partial and out.read_bytes() == b'{"id": "a", "label": "SUPPORTED"}\n'
    out.write_bytes(b'{"id": "a"}\ngarbage\n{"id": "c"}\n')
    with pytest.raises(MalformedInputError, match=r"v.jsonl:2: not a verdict line"):
        read_verdicts(out)


# ---------------------------------------------------------------------------------------------------------
# jobs on a KG in the real Neo4j and Milvus
# ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kg_engine(neo4j_uri: str, milvus_uri: str, embedder: Any) -> Any:
    cfg = EngineConfig(kg=unique_kg("jobs"), neo4j=Neo4jSettings(uri=neo4j_uri), milvus=MilvusSettings(uri=milvus_uri))
    eng = Engine(cfg, llm=False, embedder=embedder)
    records = [Triple(h, r, t, i) for i, (h, r, t) in enumerate(MOVIES, start=1)]
    BulkLoader(eng.graph, eng.vectors, embedder, progress=False).load_records(records, LoadSummary())
    yield eng
    eng.drop()
    eng.close()


@pytest.mark.integration
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


@pytest.mark.integration
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


@pytest.mark.integration
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


@pytest.mark.integration
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


@pytest.mark.integration
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


@pytest.mark.integration
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
