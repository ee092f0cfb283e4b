"""Loads that never leave a KG half-written or doubled: store limits, --strict, one writer per KG, duplicate vectors,
progress bars a person can read."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine._errors import KGLockedError, KGNotFoundError, MalformedInputError
from engine.cli import main
from helpers import ROOT
from helpers.loads import check_stats, expected_counts, write_hrt

pytestmark = pytest.mark.long  # minutes of work: `make test` deals this file out first (tests/conftest.py)


def _env(neo4j_uri: str, milvus_uri: str, **extra: str) -> dict[str, str]:
    return {**os.environ, "NEO4J_URI": neo4j_uri, "MILVUS_URI": milvus_uri, "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": str(ROOT), **extra}


# -- names beyond a store's limit ---------------------------------------------------------------------------------


def test_names_past_the_stores_limits_load_and_agree(make_engine: Any, tmp_path: Path) -> None:
    """An entity name of 80 kB (over Neo4j's 8 kB index key) and a relation name of 70 kB in 35,000 characters
    (over Milvus' 65,535-byte VARCHAR, under it in characters) load in a batch with ordinary lines; the stores agree;
    a second run adds nothing; the entity is found by its full name."""
    eng = make_engine()
    long_entity = "Ω" * 40_000  # 80,000 bytes
    long_relation = "ü" * 35_000  # 70,000 bytes
    path = tmp_path / "long.txt"
    path.write_text(f"A|knows|B\n{long_entity}|knows|A\nA|{long_relation}|C\nC|knows|D\n", encoding="utf-8")
    s = eng.load(path, progress=False, batch_size=2)
    assert s.triples == 4 and s.lines_skipped == 0
    check_stats(eng, {"entities": 5, "relations": 2, "triples": 4})
    again = eng.load(path, progress=False, batch_size=2)
    assert again.entities_created == 0 and again.relationships_created == 0 and again.embedded_entities == 0
    check_stats(eng, {"entities": 5, "relations": 2, "triples": 4})
    rows = eng.graph.entities_by_name([long_entity])
    assert len(rows) == 1 and eng.graph.entities([rows[0]["eid"]])[rows[0]["eid"]]["name"] == long_entity
    # the relation keeps its full name in the catalog; its type is cut and carries a digest
    (info,) = [ri for ri in eng.graph.relation_catalog().values() if ri.name == long_relation]
    assert len(info.type) < 250 and info.type != long_relation
    res = eng.retrieve({"triples": [["A", "ü" * 20, "UNKNOWN thing 1"]]}, k=1)
    assert res.answers[0].entity.name == "C"


def test_fit_varchar_cuts_bytes_at_a_character() -> None:
    from engine.stores.vectors import fit_varchar

    assert fit_varchar("abc", 2) == "ab"
    assert fit_varchar("üü", 3) == "ü"  # 4 bytes: the second ü would be cut in half
    text = "ü" * 35_000
    cut = fit_varchar(text)
    assert len(cut.encode()) <= 65_535 and text.startswith(cut) and len(cut) == 32_767


# -- --strict writes nothing ----------------------------------------------------------------------------------------


def test_strict_writes_nothing_when_a_line_is_bad(make_engine: Any, tmp_path: Path) -> None:
    eng = make_engine()
    lines = [f"E{i}|r{i % 3}|E{i + 1}\n" for i in range(30)]
    lines[24] = "only|two\n"
    path = tmp_path / "bad.txt"
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(MalformedInputError, match=r"bad\.txt:25: .*nothing was written") as ei:
        eng.load(path, progress=False, strict=True, batch_size=10)
    assert ei.value.line == 25
    with pytest.raises(KGNotFoundError):  # in neither store: no node, no collection
        eng.stats()
    st = eng.graph.stats()
    assert st["entities"] == 0 and st["relations"] == 0 and st["triples"] == 0 and st["types"] == 0
    assert eng.vectors.existing_kinds() == []
    # without --strict the same file loads, the bad line skipped
    s = eng.load(path, progress=False, batch_size=10)
    assert s.lines_skipped == 1 and s.triples == 29


# -- one writer per KG ----------------------------------------------------------------------------------------------


def _start_load(path: Path, kg: str, neo4j_uri: str, milvus_uri: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "engine.cli", "load", str(path), "--kg", kg, "--batch-size", "40",
                             "--quiet"], cwd=ROOT, env=_env(neo4j_uri, milvus_uri, **env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for_lease(eng: Any, proc: subprocess.Popen, timeout: float = 240) -> dict[str, Any]:
    """Poll (reading, never taking the lease) until ``proc`` holds the KG's lease; return the holder's row."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the load ended (exit {proc.returncode}) before its lease was seen:\n"
                                 f"{out.decode()[-1000:]}\n{err.decode()[-2000:]}")
        holder = eng.graph.lock_holder()
        if holder is not None:
            return holder
        time.sleep(0.02)
    raise AssertionError("the load never took the KG's lease")


def test_a_second_load_of_a_kg_fails_at_once_naming_the_first(make_engine: Any, tmp_path: Path, neo4j_uri: str,
                                                               milvus_uri: str, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    eng = make_engine()
    path = tmp_path / "kb.txt"
    triples = write_hrt(path, n_movies=3000)
    proc = _start_load(path, eng.kg, neo4j_uri, milvus_uri)
    try:
        holder = _wait_for_lease(eng, proc)
        assert f"pid {proc.pid}" in holder["info"] and holder["info"].startswith("load ")
        t0 = time.monotonic()
        with pytest.raises(KGLockedError, match=rf"KG {eng.kg!r} is being written by load .*pid {proc.pid}"):
            eng.load(path, progress=False)
        assert time.monotonic() - t0 < 5  # at once, not after the first load
        with pytest.raises(KGLockedError):
            eng.drop()
        # stats names the writer (in this process: a second interpreter would start after the load ended)
        monkeypatch.setenv("NEO4J_URI", neo4j_uri)
        monkeypatch.setenv("MILVUS_URI", milvus_uri)
        held = eng.graph.lock_holder()
        main(["stats", "--kg", eng.kg])
        after = eng.graph.lock_holder()
        if held is not None and after is not None and after["info"] == held["info"]:  # held all through stats
            assert f"being written now by load {path} (pid {proc.pid}" in capsys.readouterr().out
        out, errtext = proc.communicate(timeout=600)
        assert proc.returncode == 0, errtext.decode()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    check_stats(eng, expected_counts(triples))
    assert not eng.stats()["milvus"]["duplicates"]
    eng.load(path, progress=False)  # the lease was given back


def test_drop_of_a_kg_whose_load_has_written_nothing_yet_names_the_writer(make_engine: Any) -> None:
    """Between taking the lease and committing its first batch a load has written no entity: a drop then is
    refused naming the writer, not answered with "the KG does not exist" (and writes nothing)."""
    eng = make_engine()
    other = make_engine(kg=eng.kg)
    with eng.graph.lock("load test"):
        with pytest.raises(KGLockedError, match=rf"KG {eng.kg!r} is being written by load test \(pid {os.getpid()}"):
            other.drop()
    with pytest.raises(KGNotFoundError):  # the lease given back, the KG still does not exist
        other.drop()


def test_the_lease_of_a_killed_loader_expires(make_engine: Any, tmp_path: Path, neo4j_uri: str,
                                              milvus_uri: str) -> None:
    eng = make_engine()
    path = tmp_path / "kb.txt"
    triples = write_hrt(path, n_movies=3000)
    proc = _start_load(path, eng.kg, neo4j_uri, milvus_uri, ISORAG_LOCK_TTL_S="4")
    _wait_for_lease(eng, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with pytest.raises(KGLockedError, match=r"expires in [0-4] s"):
        eng.load(path, progress=False)
    time.sleep(4.5)
    eng.load(path, progress=False)  # the dead loader's lease ran out; this run completes its work
    check_stats(eng, expected_counts(triples))


# -- duplicate vector rows --------------------------------------------------------------------------------------------


def test_stats_reports_duplicate_vectors_and_a_rerun_removes_them(make_engine: Any, tmp_path: Path) -> None:
    """Rows stored twice under one id (what two loads at once left before the lease) are reported by stats, and
    the next load removes them: every id once, with its vector."""
    eng = make_engine()
    path = tmp_path / "kb.txt"
    triples = write_hrt(path, n_movies=30)
    eng.load(path, progress=False)
    vs = eng.vectors
    eids = sorted(r["eid"] for r in eng.graph.read_named("entities_page", kg=eng.kg, last=-1, limit=1000))
    twice = eids[:7]
    before = vs.get_vectors("entities", twice)
    request = vs._mutation_request("entities", np.asarray(twice, dtype=np.int64),
                                   np.stack([before[e] for e in twice]), None, insert=True)
    vs._send_mutation(vs.names["entities"], request, insert=True)  # a second writer's insert
    vs.finalize()
    st = eng.stats()
    assert not st["agree"] and st["milvus"]["duplicates"] == {"entities": 7}
    s = eng.load(path, progress=False)
    assert s.duplicates_removed == 7 and "duplicate vector rows removed 7" in "\n".join(s.lines())
    check_stats(eng, expected_counts(triples))
    assert eng.stats()["milvus"]["duplicates"] == {}
    after = vs.get_vectors("entities", twice)
    assert all(np.allclose(after[e], before[e]) for e in twice)


# -- progress a person can read -----------------------------------------------------------------------------------


def _screen(raw: str) -> list[str]:
    """The lines a terminal shows after ``raw`` (carriage return, newline, cursor up, erase to end of line)."""
    lines, row, col = [""], 0, 0
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == "\x1b":
            m = re.match(r"\x1b\[(\d*)([A-Za-z])", raw[i:])
            if m:
                n = int(m.group(1) or 1)
                if m.group(2) == "A":
                    row = max(0, row - n)
                elif m.group(2) == "K":
                    lines[row] = lines[row][:col]
                i += m.end()
                continue
        if c == "\r":
            col = 0
        elif c == "\n":
            row += 1
            col = 0
            while len(lines) <= row:
                lines.append("")
        else:
            line = lines[row].ljust(col)
            lines[row] = line[:col] + c + line[col + 1:]
            col += 1
        i += 1
    return [ln.rstrip() for ln in lines if ln.strip()]


def test_the_two_progress_bars_of_a_load_keep_their_own_lines(make_engine: Any, tmp_path: Path, neo4j_uri: str,
                                                              milvus_uri: str) -> None:
    import fcntl
    import pty
    import struct
    import termios

    eng = make_engine()
    path = tmp_path / "kb.txt"
    write_hrt(path, n_movies=100)
    main_fd, sub_fd = pty.openpty()
    fcntl.ioctl(sub_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))  # a terminal of 100 columns
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "load", str(path), "--kg", eng.kg, "--batch-size",
                             "40"], cwd=ROOT, env=_env(neo4j_uri, milvus_uri),
                            stdout=subprocess.DEVNULL, stderr=sub_fd)
    os.close(sub_fd)
    chunks = []
    while True:
        try:
            data = os.read(main_fd, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=300)
    os.close(main_fd)
    assert proc.returncode == 0
    screen = _screen(b"".join(chunks).decode("utf-8", "replace"))
    graph = [ln for ln in screen if ln.startswith("graph  (records)")]
    embed = [ln for ln in screen if ln.startswith("embed  (entities)")]
    assert len(graph) == 1 and len(embed) == 1, screen
    assert "400/400" in graph[0] and "100%" in graph[0], screen
