"""Fact-verification jobs without a KG: reading claims (JSONL, CSV), labels, shards, verdict files cut short. The jobs
on a KG in the real stores, resumed after a kill or a cut output, and the CLI: tests/integration/test_verify_jobs.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import InputError, MalformedInputError
from engine._errors import ConfigError
from engine.jobs import BadRow, ClaimRow, is_correct, normalize_label, parse_shard, read_claims, read_verdicts, shard_of

from helpers.claims import CLAIMS, MALFORMED, write_claims


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
