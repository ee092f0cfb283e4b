"""A bounded fault campaign: kill -9 the stores under loads and queries, race loaders, feed bad input.

    python benchmarks/faults.py [--quick] [--kills N] [--keep] [--seed S] [--neo4j-port P] [--milvus-port P]
    python benchmarks/faults.py --smoke     # 200 triples, no kill (--kills 0: parts 2-4 skipped), 4 bad inputs

Everything runs on PRIVATE servers: a Neo4j and a Milvus started here (``isorag neo4j|milvus start`` in a
subprocess) with their own ``ISORAG_HOME`` under a temporary directory (``/tmp/isorag-faults-XXXX``; the Neo4j
build, the Milvus binary and the embedding models are symlinked from the usual home, nothing there is written)
and their own ports (Neo4j 7697, Milvus 19540, or the next free ones). The default servers (7687, 19530) are
never touched: every client here gets ``NEO4J_URI`` / ``MILVUS_URI`` naming the private ones, and only pids whose
command line names the private home are ever killed. The servers are stopped in a ``finally`` (Ctrl-C and
SIGTERM too) and the temporary home is deleted unless ``--keep``.

The parts, each counting its faults and their outcomes:

1. reference: a synthetic movie KG (``head|relation|tail``: directors, writers, years, two actors per movie;
   5,000 triples with --quick, 20,000 without) is loaded into KG ``ref``; its counts (``Engine.stats()``) and its
   content (entity keys and names, triples by key, relation names; in Milvus the ids of every vector) are the
   reference every other KG is compared with.
2. kill -9 Neo4j during a load (--kills times): ``isorag load FILE --kg f_neo`` runs in a subprocess
   (``ISORAG_LOCK_TTL_S=5``); once its lease is visible (``GraphStore.lock_holder()``) and a random delay has
   passed, the Neo4j JVM gets SIGKILL and is restarted. A loader that outlives the outage (the driver retries) is
   killed again under its feet; one that exits is replaced by a new run once its lease is free. At the end the
   last loader is waited for, the lease waited out, and the load run once more to completion.
3. the same with kill -9 of Milvus (the relay and the server, every pid under ``server.json``'s), KG ``f_mil``.
4. queries under the kills: during parts 2 and 3, threads call ``Engine.retrieve`` on ``ref`` in a loop through
   one Engine (so every kill there is also a kill during queries); without --quick, --kills more kills of each
   server happen with queries and no load. After each restart the main thread retrieves through the same Engine
   until the answer equals the one recorded before any fault: ``recovered`` counts the kills after which it
   did (within --recovery-timeout). Queries that end during an outage must raise a typed ``IsoragError``.
5. concurrent loads: three ``isorag load --kg f_conc`` start at once (default lease TTL); the ones that do not
   get the lease must fail at once (exit 2, ``KGLockedError`` naming the holder; before the holder ends, or within
   --at-once-s of their start), then f_conc must equal the reference. These loaders run ``engine.cli.main`` with
   a faulthandler stack dump armed after --at-once-s, so a slow one shows where it waited.
6. throughput: 16 threads x 1,000 retrievals (--quick: 16 x 100) on ``ref`` through one Engine, patterns taken
   in turn; per-call latency (p50_ms, p99_ms), the process' VmRSS before and after (rss_growth_mb), and every
   answer compared with the single-threaded answer for its pattern.
7. bad input through the CLI (subprocesses): a non-UTF-8 byte in a claims file, negative and zero batch sizes,
   a bad delimiter escape, ``-k -1``, ``--deadline nan|inf``, an http:// NEO4J_URI, an unknown synth shape, a file
   whose every line is malformed, a pattern that is not JSON, the KG name ``x__y``, a missing file, a KG that
   does not exist. Each must be refused: non-zero exit, ``isorag: error: ...`` as the last line of stderr, no
   traceback (a claims file with one bad row among good ones is verified, and exits 1 naming the row: the CLI's
   documented "done, but not clean").

They run in the order 1, 6, 5, 2 + 4, 3 + 4, 4 (without --quick), 7; a KG is dropped once it has been compared,
the reference at the end. The loaders' stderr lines that are not the error (the Neo4j driver's retry warnings)
are counted in the details (``typed_with_extra_stderr``, ``retry_warning_lines``); so are the drivers' log
records of this process (``driver_log_records``), which are not printed.

Figures (the last stdout line is one JSON object; the full record goes to benchmarks/results/faults.json, or
faults_quick.json):

* ``faults``: kills + loaders refused by the lease race + bad inputs;
* ``recovered``: kills after which the same Engine answered correctly again;
* ``lost``: summed over the counts (Neo4j entities, relations, types, triples; Milvus entities, relations,
  types) of f_neo, f_mil and f_conc, reference - got where positive; ``duplicated``: got - reference where
  positive, plus Milvus' duplicate rows where the count does not show them already (a row stored twice counts
  once); ``content_missing`` / ``content_extra``: the same by content (items of the reference absent / items
  not in it, and vectors without their entity or entities without their vector);
* ``tracebacks``: a subprocess that exits 70 or prints "Traceback (most recent call last)", or an exception
  in this process that is not an ``IsoragError``; ``typed_errors``: typed failures (loader exits 2 with one
  ``isorag: error:`` line, ``IsoragError`` from queries during outages, refused loads, refused bad input);
* ``wrong_answers``: a retrieval that returned a different answer than before the faults (parts 4 and 6);
* ``bad_outcomes``: anything else that is not as it should be (a hung loader, a bad input accepted, a loser of
  the lease race that did not fail at once, a rerun that did not complete...), each listed in ``problems``;
* ``p50_ms``, ``p99_ms``, ``rss_growth_mb``: part 6.

Exit status: 0 when lost, duplicated, content_missing, content_extra, tracebacks, wrong_answers and
bad_outcomes are all 0; 1 otherwise; 2 when the campaign itself could not run (a server that does not start).
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import _common  # noqa: F401 - sys.path and the environment, on import
from _common import RESULTS, ROOT, parse_args, percentile

PY = sys.executable
TRACEBACK = "Traceback (most recent call last)"
DEFAULT_PORTS = (7687, 19530, 7474, 7473)  # the default servers' ports: never used here
T0 = time.monotonic()

# The patterns of parts 4 and 6 (the synthetic KG of write_kb): one-hop, fuzzy names, two-hop, joins.
PATTERNS: list[dict[str, Any]] = [
    {"triples": [["Movie 3", "directed_by", "UNKNOWN person 1"]]},
    {"triples": [["Movie 11", "release_year", "UNKNOWN year 1"]]},
    {"triples": [["Movi 12", "directed by", "UNKNOWN director 1"]]},
    {"triples": [["Movie 42", "written_by", "UNKNOWN writer 1"], ["Movie 42", "directed_by", "UNKNOWN director 1"]]},
    {"triples": [["Movie 7", "starred_actors", "UNKNOWN actor 1"],
                 ["UNKNOWN movie 1", "starred_actors", "UNKNOWN actor 1"]]},
    {"triples": [["UNKNOWN movie 1", "directed_by", "Director 5"], ["UNKNOWN movie 1", "release_year", "1955"]]},
]

# Read-only statements of this benchmark (content fingerprints of a KG; the engine's own are in cypher/).
_Q_ENTITIES = ("MATCH (n:IsoragEntity {isorag_kg: $kg}) "
               "RETURN n.isorag_key AS key, n.isorag_name AS name, n.isorag_eid AS eid")
_Q_TRIPLES = ("MATCH (h:IsoragEntity {isorag_kg: $kg})-[r]->(t:IsoragEntity {isorag_kg: $kg}) "
              "WHERE type(r) <> 'ISORAG_IS_A' RETURN h.isorag_key AS h, type(r) AS r, t.isorag_key AS t")
_Q_RELATIONS = "MATCH (rt:IsoragRelationType {kg: $kg}) RETURN rt.name AS name, rt.rid AS id"
_Q_TYPES = "MATCH (ty:IsoragEntityType {kg: $kg}) RETURN ty.name AS name, ty.tid AS id"
_COUNTS = (("neo4j", "entities"), ("neo4j", "relations"), ("neo4j", "types"), ("neo4j", "triples"),
           ("milvus", "entities"), ("milvus", "relations"), ("milvus", "types"))


def log(msg: str) -> None:
    print(f"[faults {time.monotonic() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def one_line(text: Any, n: int = 240) -> str:
    return " ".join(str(text).split())[:n]


class CampaignError(Exception):
    """The campaign cannot go on (a private server that does not start): not a finding about the engine."""


class Tally:
    """The campaign's counters and the problems found, shared by the parts (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.c: collections.Counter[str] = collections.Counter()
        self.problems: list[str] = []
        self.notes: list[str] = []  # worth knowing, not failures
        self.tracebacks: list[str] = []

    def note(self, text: str) -> None:
        with self.lock:
            self.notes.append(one_line(text, 600))
        log(f"note: {one_line(text, 300)}")

    def add(self, key: str, n: int = 1) -> None:
        with self.lock:
            self.c[key] += n

    def problem(self, text: str, key: str = "bad_outcomes") -> None:
        with self.lock:
            self.c[key] += 1
            self.problems.append(one_line(text, 600))
        log(f"PROBLEM: {one_line(text, 300)}")

    def traceback(self, where: str, text: str) -> None:
        with self.lock:
            self.c["tracebacks"] += 1
            if len(self.tracebacks) < 20:
                self.tracebacks.append(f"{where}: {text[-3000:]}")
        log(f"TRACEBACK in {where}: {one_line(text.strip().splitlines()[-1] if text.strip() else text, 300)}")


class DriverLog(logging.Handler):
    """Counts the drivers' log records (neo4j, pymilvus, grpc) instead of printing them among the progress lines."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: collections.Counter[str] = collections.Counter()
        self.examples: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.counts[record.name.split(".")[0]] += 1
        if len(self.examples) < 5:
            self.examples.append(one_line(f"{record.name}: {record.getMessage()}", 300))


# --------------------------------------------------------------------------------------------- processes
def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _descendants(pid: int) -> list[int]:
    """Every descendant of ``pid``, deepest first."""
    out: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            kids = [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
        for kid in kids:
            out += _descendants(kid) + [kid]
    return out


def _free_port(start: int) -> int:
    for port in range(start, start + 200):
        if port in DEFAULT_PORTS:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise CampaignError(f"no free port from {start}")


def _port_listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def vmrss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def classify_cli(rc: int | None, err: str, killed: bool = False) -> dict[str, Any]:
    """A CLI run's outcome: ok, typed (exit 2, last stderr line 'isorag: error:'), traceback (exit 70 or a Python
    traceback on stderr), killed (by this script), other."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    last = lines[-1] if lines else ""
    if TRACEBACK in err or rc == 70:
        kind = "traceback"
    elif killed:
        kind = "killed"
    elif rc == 0:
        kind = "ok"
    elif rc == 2 and last.startswith("isorag: error:"):
        kind = "typed"
    else:
        kind = "other"
    return {"rc": rc, "kind": kind, "last": one_line(last, 400), "stderr_lines": len(lines),
            "retry_warnings": sum("will be retried" in ln for ln in lines)}


# --------------------------------------------------------------------------------------------- private servers
class Private:
    """The private Neo4j + Milvus: a temporary ISORAG_HOME, other ports, started and stopped here."""

    def __init__(self, args: argparse.Namespace) -> None:
        shared = Path(os.environ.get("ISORAG_HOME") or Path.home() / ".isorag").expanduser()
        self.neo_port = args.neo4j_port or _free_port(7697)
        self.mil_port = args.milvus_port or _free_port(19540)
        for port in (self.neo_port, self.mil_port):
            if port in DEFAULT_PORTS:
                raise CampaignError(f"port {port} belongs to the default servers: choose another")
            if _port_listening(port):
                raise CampaignError(f"port {port} is in use: choose another (--neo4j-port / --milvus-port)")
        self.home = Path(tempfile.mkdtemp(prefix="isorag-faults-", dir=args.tmp)).resolve()
        self.keep = args.keep
        # shared read-only caches: the Neo4j build, the unpacked Milvus binary, the embedding models
        for link, target in (("neo4j/build", shared / "neo4j" / "build"),
                             ("cache/milvus-2.3.5", shared / "cache" / "milvus-2.3.5"),
                             ("models", shared / "models")):
            if target.is_dir():
                p = self.home / link
                p.parent.mkdir(parents=True, exist_ok=True)
                p.symlink_to(target.resolve(), target_is_directory=True)
        self.neo_uri = f"bolt://127.0.0.1:{self.neo_port}"
        self.mil_uri = f"http://127.0.0.1:{self.mil_port}"
        keep_vars = ("ISORAG_MILVUS_ISOLATION", "ISORAG_MILVUS_LOG_LEVEL")
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("NEO4J_", "MILVUS_", "ISORAG_")) or k in keep_vars}
        base.update(ISORAG_HOME=str(self.home), ISORAG_NEO4J_PORT=str(self.neo_port),
                    ISORAG_MILVUS_PORT=str(self.mil_port), ISORAG_NEO4J_HEAP=args.neo4j_heap,
                    ISORAG_NEO4J_PAGECACHE=args.neo4j_pagecache, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
                    HF_HUB_DISABLE_PROGRESS_BARS="1")
        self.server_env = base  # `isorag neo4j|milvus start|stop`: no *_URI, so the local (private) servers
        self.client_env = dict(base, NEO4J_URI=self.neo_uri, MILVUS_URI=self.mil_uri)  # the CLI's clients
        self.loader_env = dict(self.client_env, ISORAG_LOCK_TTL_S=str(args.lock_ttl))
        # this process: the same private servers (the engines get the URIs explicitly too)
        for k in [k for k in os.environ if k.startswith(("NEO4J_", "MILVUS_", "ISORAG_")) and k not in keep_vars]:
            del os.environ[k]
        os.environ.update(self.client_env)
        self.logs = self.home / "faults-logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.start_timeout = args.start_timeout
        self.up = {"neo4j": False, "milvus": False}
        self.killed_milvus: list[int] = []  # server pids killed: their /tmp/milvus/server_id_<pid> is removed
        self.start_failures: list[dict[str, Any]] = []  # failed `isorag <server> start`s, with what they said
        self.last_kill: dict[str, Any] = {}

    def cli(self, *argv: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([PY, "-m", "engine.cli", *argv], cwd=ROOT, env=env or self.client_env,
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def start(self, which: str) -> float:
        """``isorag <which> start``; seconds it took. One retry after a failure; then CampaignError."""
        t0 = time.monotonic()
        for attempt in (1, 2):
            try:
                r = self.cli(which, "start", env=self.server_env, timeout=self.start_timeout)
            except subprocess.TimeoutExpired:
                r = None
            if r is not None and r.returncode == 0:
                self.up[which] = True
                return time.monotonic() - t0
            err = "" if r is None else r.stderr
            self.start_failures.append({
                "server": which, "attempt": attempt, "after_s": round(time.monotonic() - t0, 1),
                "rc": None if r is None else r.returncode, "error": one_line(err[:1500], 1500),
                "stderr_tail": err[-4000:]})
            (self.logs / f"start-{which}-{len(self.start_failures)}.err").write_text(err)
            why = "timed out" if r is None else f"exit {r.returncode}: {one_line(err, 300)}"
            log(f"{which} start failed (attempt {attempt}, {time.monotonic() - t0:.0f} s): {why}")
            if attempt == 1:
                time.sleep(5)
        raise CampaignError(f"the private {which} does not start")

    def neo4j_pids(self) -> list[int]:
        home = self.home / "neo4j"
        cands = []
        try:
            cands.append(int((home / "run" / "neo4j.pid").read_text().strip()))
        except (OSError, ValueError):
            pass
        try:
            cands.append(int(json.loads((home / "run" / "ready.json").read_text())["pid"]))
        except (OSError, ValueError, KeyError, TypeError):
            pass
        for pid in cands:
            cl = _cmdline(pid)
            if "isorag.Neo4jServer" in cl and "--home" in cl[:-1]:
                if Path(cl[cl.index("--home") + 1]).resolve() == home:
                    return [pid]
        return []

    def milvus_pids(self) -> list[int]:
        from engine.servers.milvus import LocalMilvus

        home = self.home / "milvus"
        try:
            pid = int(json.loads((home / "server.json").read_text())["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return []
        # the relay's command line holds the server's, alias included
        if LocalMilvus(home=home).alias not in _cmdline(pid):
            return []
        return [p for p in _descendants(pid) if _alive(p)] + [pid]

    def kill(self, which: str) -> list[int]:
        """SIGKILL the private server (Milvus: the server, then its relay); waits until they are gone."""
        pids = self.neo4j_pids() if which == "neo4j" else self.milvus_pids()
        if not pids:
            raise CampaignError(f"cannot find the private {which}'s processes in {self.home}")
        if which == "milvus":
            self.killed_milvus += [p for p in pids if (_cmdline(p) or [""])[0].endswith("milvus")]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.up[which] = False
        t0 = time.monotonic()
        while any(_alive(p) for p in pids) and time.monotonic() - t0 < 60:
            time.sleep(0.05)
        self.last_kill = {"pids": len(pids), "gone_after_s": round(time.monotonic() - t0, 2),
                          "still_alive": [p for p in pids if _alive(p)]}
        if self.last_kill["still_alive"]:
            log(f"{which}: pids {self.last_kill['still_alive']} still alive 60 s after SIGKILL")
        return pids

    def stop(self, which: str) -> None:
        try:
            r = self.cli(which, "stop", env=self.server_env, timeout=120)
            ok = r.returncode == 0
            if not ok:
                log(f"{which} stop: exit {r.returncode}: {one_line(r.stderr[-400:])}")
        except subprocess.TimeoutExpired:
            ok = False
        if not ok:  # last resort: our own pids only
            pids = self.neo4j_pids() if which == "neo4j" else self.milvus_pids()
            if pids:
                self.kill(which)
        self.up[which] = False

    def sweep(self) -> list[int]:
        """SIGKILL any process left that runs from the private home (its path, or the private Milvus' alias, in
        its command line: only processes this campaign started), e.g. a server spawned by a start that Ctrl-C cut
        short before its pid was written."""
        from engine.servers.milvus import LocalMilvus

        marks = (str(self.home), LocalMilvus(home=self.home / "milvus").alias)
        me = os.getpid()
        found = []
        for d in Path("/proc").iterdir():
            if not d.name.isdigit() or int(d.name) == me:
                continue
            cl = " ".join(_cmdline(int(d.name)))
            if any(m in cl for m in marks) and _alive(int(d.name)):
                found.append(int(d.name))
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return found

    def remove(self) -> None:
        for pid in self.killed_milvus:  # what Milvus leaves outside its home when it gets kill -9 (as stop() does)
            try:
                Path(f"/tmp/milvus/server_id_{pid}").unlink()
            except OSError:
                pass
        if self.keep:
            log(f"kept {self.home}")
            return
        shutil.rmtree(self.home, ignore_errors=True)  # symlinked caches are unlinked, not followed


# --------------------------------------------------------------------------------------------- data, answers
def write_kb(path: Path, n_triples: int) -> int:
    """The synthetic movie KG: five distinct triples per movie. Returns the number of triples."""
    n_movies = max(1, n_triples // 5)
    n_dir, n_wri, n_act = max(7, n_movies // 12), max(5, n_movies // 9), max(13, n_movies // 3)
    with path.open("w", encoding="utf-8") as f:
        for i in range(n_movies):
            m = f"Movie {i}"
            f.write(f"{m}|directed_by|Director {i % n_dir}\n{m}|written_by|Writer {(i * 7) % n_wri}\n"
                    f"{m}|release_year|{1950 + i % 70}\n{m}|starred_actors|Actor {i % n_act}\n"
                    f"{m}|starred_actors|Actor {(i + n_act // 2) % n_act}\n")
    return 5 * n_movies


def answer_sig(res: Any) -> tuple:
    return (tuple((round(sg.gsd, 4), tuple(t.as_tuple() for t in sg.triples)) for sg in res.subgraphs),
            tuple((a.entity.name, round(a.gsd, 4)) for a in res.answers))


def make_engine(priv: Private, kg: str, embedder: Any = None) -> Any:
    from engine import EngineConfig, MilvusSettings, Neo4jSettings
    from engine import Engine

    # embedder: one model shared by the engines of this process
    return Engine(EngineConfig(kg=kg, neo4j=Neo4jSettings(uri=priv.neo_uri), milvus=MilvusSettings(uri=priv.mil_uri)),
                  llm=False, embedder=embedder)


def snapshot(eng: Any) -> dict[str, Any]:
    """Counts and content of a KG in both stores."""
    from engine.stores.graph import entity_id

    st = eng.stats()
    g, kg = eng.graph, eng.kg
    ents = g.read(_Q_ENTITIES, kg=kg)
    rels = g.read(_Q_RELATIONS, kg=kg)
    types = g.read(_Q_TYPES, kg=kg)
    content = {
        "entities": collections.Counter((r["key"], r["name"]) for r in ents),
        "triples": collections.Counter((r["h"], r["r"], r["t"]) for r in g.read(_Q_TRIPLES, kg=kg)),
        "relations": collections.Counter(r["name"] for r in rels),
        "types": collections.Counter(r["name"] for r in types),
    }
    bad_eids = sum(1 for r in ents if r["eid"] != entity_id(kg, r["key"]))
    # every item of Neo4j has exactly one vector, and every vector an item
    vec_missing = vec_extra = 0
    for kind, rows, key in (("entities", ents, "eid"), ("relations", rels, "id"), ("types", types, "id")):
        want = collections.Counter(int(r[key]) for r in rows)
        have: collections.Counter[int] = collections.Counter()
        for ids in eng.vectors.iter_ids(kind):
            have.update(int(i) for i in ids)
        vec_missing += sum((want - have).values())
        vec_extra += sum((have - want).values())
    counts = {f"{s}.{k}": int(st[s][k]) for s, k in _COUNTS}
    return {"stats": st, "counts": counts, "duplicates": dict(st["milvus"].get("duplicates") or {}),
            "content": content, "vec_missing": vec_missing, "vec_extra": vec_extra, "bad_eids": bad_eids}


def empty_snapshot() -> dict[str, Any]:
    """What ``snapshot`` would say of a KG that is in neither store."""
    return {"stats": {"agree": False}, "counts": {f"{s}.{k}": 0 for s, k in _COUNTS}, "duplicates": {},
            "content": {x: collections.Counter() for x in ("entities", "triples", "relations", "types")},
            "vec_missing": 0, "vec_extra": 0, "bad_eids": 0}


def snapshot_or_empty(eng: Any) -> dict[str, Any]:
    from engine import KGNotFoundError

    try:
        return snapshot(eng)
    except KGNotFoundError:
        return empty_snapshot()


def compare(ref: dict[str, Any], got: dict[str, Any]) -> dict[str, Any]:
    lost = dup = 0
    for s, k in _COUNTS:
        r, g = ref["counts"][f"{s}.{k}"], got["counts"][f"{s}.{k}"]
        lost += max(0, r - g)
        over = max(0, g - r)
        if s == "milvus":
            over = max(over, int(got["duplicates"].get(k, 0)))
        dup += over
    missing = sum(sum((ref["content"][x] - got["content"][x]).values()) for x in ref["content"])
    extra = sum(sum((got["content"][x] - ref["content"][x]).values()) for x in ref["content"])
    return {"lost": lost, "duplicated": dup, "content_missing": missing + got["vec_missing"],
            "content_extra": extra + got["vec_extra"] + got["bad_eids"], "agree": bool(got["stats"]["agree"]),
            "counts": got["counts"], "milvus_duplicates": got["duplicates"]}


# --------------------------------------------------------------------------------------------- loaders, leases
# engine.cli's entry point as ``python -m engine.cli`` runs it, with a dump of every thread's stack (faulthandler,
# to stderr) if the process still runs after argv[1] seconds: it shows where a slow loader waits.
_DUMP_LINES = ("Timeout (", "Thread 0x", "Current thread 0x", "  File \"", "  <no Python frame>")
_CLI_WITH_DUMP = ("import faulthandler, sys; faulthandler.dump_traceback_later(float(sys.argv[1])); "
                  "from engine.cli import main; sys.exit(main(sys.argv[2:]))")


class Loader:
    """``isorag load FILE --kg KG --quiet`` in a subprocess, its output in files."""

    n = 0

    def __init__(self, priv: Private, kg: str, path: Path, batch: int, env: dict[str, str] | None = None,
                 dump_after: float | None = None) -> None:
        Loader.n += 1
        self.kg, self.id = kg, Loader.n
        self.err_path = priv.logs / f"load-{kg}-{self.id}.err"
        self.out_path = priv.logs / f"load-{kg}-{self.id}.out"
        self.killed = False
        self.t0 = time.monotonic()
        self.t1: float | None = None
        with self.out_path.open("wb") as out, self.err_path.open("wb") as err:
            entry = ["-m", "engine.cli"] if dump_after is None else ["-c", _CLI_WITH_DUMP, str(dump_after)]
            self.proc = subprocess.Popen(
                [PY, *entry, "load", str(path), "--kg", kg, "--quiet", "--batch-size", str(batch)],
                cwd=ROOT, env=env or priv.loader_env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                start_new_session=True)
        # the exit time, exactly, however often the campaign looks
        threading.Thread(target=self._reap, name=f"faults-loader-{self.id}", daemon=True).start()

    def _reap(self) -> None:
        self.proc.wait()
        self.t1 = time.monotonic()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def wait(self, timeout: float) -> bool:
        """True if it ended by itself within ``timeout``; else it is killed."""
        try:
            self.proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            self.kill()
            return False

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.killed = True
            self.proc.kill()
            self.proc.wait()

    def outcome(self) -> dict[str, Any]:
        err = self.err_path.read_text("utf-8", "replace") if self.err_path.exists() else ""
        dump = [ln for ln in err.splitlines() if ln.startswith(_DUMP_LINES)]
        if dump:  # a faulthandler dump (dump_after): where it was, kept apart for the report
            err = "\n".join(ln for ln in err.splitlines() if not ln.startswith(_DUMP_LINES))
        o = classify_cli(self.proc.returncode, err, self.killed)
        o.update(loader=self.id, pid=self.pid, seconds=round((self.t1 or time.monotonic()) - self.t0, 2),
                 lease_lost_warning="lost the writer lease" in err)
        if o["kind"] == "traceback":
            o["stderr_tail"] = err[-2000:]
        if dump and o["kind"] != "ok":
            o["stack_dump"] = "\n".join(dump)[-6000:]
        return o


def lease_holder(graph: Any) -> dict[str, Any] | None | str:
    """The KG's lease holder, None when free, "unknown" when Neo4j does not answer."""
    from engine import IsoragError

    try:
        return graph.lock_holder()
    except IsoragError:
        return "unknown"


def wait_lease(graph: Any, loader: Loader, timeout: float) -> bool:
    """Until ``loader`` holds its KG's lease (True), or it ended / the time is up (False)."""
    deadline = time.monotonic() + timeout
    mark = f"pid {loader.pid} "
    while time.monotonic() < deadline and loader.running():
        h = lease_holder(graph)
        if isinstance(h, dict) and mark in str(h.get("info")):
            return True
        time.sleep(0.1)
    return False


def wait_lease_free(graph: Any, timeout: float) -> float | None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if lease_holder(graph) is None:
            return time.monotonic() - t0
        time.sleep(0.25)
    return None


# --------------------------------------------------------------------------------------------- queries
class QueryLoad:
    """Threads calling ``eng.retrieve`` in a loop; every call's outcome is kept with its times."""

    def __init__(self, eng: Any, expected: list[tuple], tally: Tally, threads: int, pause: float) -> None:
        self.eng, self.expected, self.tally, self.pause = eng, expected, tally, pause
        self.events: list[tuple[float, float, int, str, str]] = []
        self.lock = threading.Lock()
        self.stop_ev = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(i,), name=f"faults-query-{i}", daemon=True)
                        for i in range(threads)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def _run(self, tid: int) -> None:
        from engine import IsoragError

        i = tid
        while not self.stop_ev.is_set():
            p = i % len(PATTERNS)
            i += 1
            t0 = time.monotonic()
            try:
                sig = answer_sig(self.eng.retrieve(PATTERNS[p]))
                outcome, detail = ("ok", "") if sig == self.expected[p] else ("wrong", repr(sig)[:300])
            except IsoragError as e:
                outcome, detail = "typed", f"{type(e).__name__}: {one_line(e, 160)}"
            except Exception as e:  # noqa: BLE001 - an untyped error is what this counts
                outcome, detail = "untyped", f"{type(e).__name__}: {traceback.format_exc()}"
            with self.lock:
                self.events.append((t0, time.monotonic(), p, outcome, detail))
            self.stop_ev.wait(self.pause)

    def stop(self, timeout: float) -> int:
        """Stop the threads; returns how many are still stuck in a call after ``timeout``."""
        self.stop_ev.set()
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.1, deadline - time.monotonic()))
        return sum(t.is_alive() for t in self.threads)

    def summary(self, windows: list[tuple[float, float]]) -> dict[str, Any]:
        """Outcomes of the calls that ended inside an outage window (kill .. answered again) and outside."""
        with self.lock:
            events = list(self.events)
        out: dict[str, Any] = {"calls": len(events), "during": collections.Counter(), "outside": collections.Counter(),
                               "typed_by_type": collections.Counter(), "examples": []}
        for _t0, t1, p, outcome, detail in events:
            during = any(a <= t1 <= b + 0.5 for a, b in windows)
            out["during" if during else "outside"][outcome] += 1
            if outcome == "typed":
                out["typed_by_type"][detail.split(":", 1)[0]] += 1
            if outcome != "ok" and len(out["examples"]) < 8 and not (outcome == "typed" and during):
                out["examples"].append(f"{'during' if during else 'outside'} {outcome} p{p}: {one_line(detail, 300)}")
            if outcome == "untyped":
                self.tally.traceback(f"retrieve (query thread, pattern {p})", detail)
            elif outcome == "wrong":
                self.tally.problem(f"retrieve returned a different answer for pattern {p} "
                                   f"({'during an outage' if during else 'outside outages'}): {detail}",
                                   "wrong_answers")
            elif outcome == "typed":
                self.tally.add("typed_errors")
        if out["outside"]["typed"]:
            out["note"] = "typed errors outside the outage windows: see examples"
        durations = [t1 - t0 for t0, t1, *_ in events]
        out["max_call_s"] = round(max(durations), 2) if durations else None
        for k in ("during", "outside", "typed_by_type"):
            out[k] = dict(out[k])
        return out


def probe_recovery(eng: Any, expected: tuple, tally: Tally, timeout: float) -> tuple[float | None, dict[str, int]]:
    """Retrieve PATTERNS[0] through ``eng`` until the answer is the expected one: seconds taken, or None."""
    from engine import IsoragError

    t0 = time.monotonic()
    errs: collections.Counter[str] = collections.Counter()
    while time.monotonic() - t0 < timeout:
        try:
            if answer_sig(eng.retrieve(PATTERNS[0])) == expected:
                return time.monotonic() - t0, dict(errs)
            errs["wrong"] += 1
        except IsoragError as e:
            errs[type(e).__name__] += 1
        except Exception as e:  # noqa: BLE001 - an untyped exception is a finding: counted, with its traceback
            errs[f"untyped {type(e).__name__}"] += 1
            tally.traceback("retrieve (recovery probe)", traceback.format_exc())
        time.sleep(0.25)
    return None, dict(errs)


# --------------------------------------------------------------------------------------------- the campaign
class Campaign:
    def __init__(self, args: argparse.Namespace, priv: Private, tally: Tally) -> None:
        self.args, self.priv, self.tally = args, priv, tally
        self.rng = random.Random(args.seed)
        self.kb = priv.home / "kb.txt"
        self.engines: dict[str, Any] = {}
        self.loaders: list[Loader] = []
        self.queries: QueryLoad | None = None
        self.windows: list[tuple[float, float]] = []
        self.kills: list[dict[str, Any]] = []
        self.ref: dict[str, Any] = {}
        self.expected: list[tuple] = []
        self.ref_load_s = 10.0
        self.parts: dict[str, Any] = {}

    def engine(self, kg: str) -> Any:
        if kg not in self.engines:
            emb = self.engines["ref"].embedder if "ref" in self.engines else None
            self.engines[kg] = make_engine(self.priv, kg, emb)
        return self.engines[kg]

    def new_loader(self, kg: str, env: dict[str, str] | None = None, dump_after: float | None = None) -> Loader:
        ld = Loader(self.priv, kg, self.kb, self.args.batch_size, env, dump_after)
        self.loaders.append(ld)
        return ld

    def graph(self, kg: str) -> Any:
        from engine import Neo4jSettings
        from engine.stores.graph import GraphStore

        return GraphStore(Neo4jSettings(uri=self.priv.neo_uri), kg)

    # 1 ---------------------------------------------------------------------------------------------
    def reference(self) -> None:
        n = write_kb(self.kb, self.args.triples)
        log(f"part 1: reference load of {n:,} triples into KG 'ref'")
        eng = self.engine("ref")
        t0 = time.monotonic()
        summary = eng.load(self.kb, progress=False, batch_size=self.args.batch_size)
        self.ref_load_s = time.monotonic() - t0
        self.ref = snapshot(eng)
        # the answers every later retrieval is compared with (each twice: they must not vary)
        self.expected = [answer_sig(eng.retrieve(p)) for p in PATTERNS]
        again = [answer_sig(eng.retrieve(p)) for p in PATTERNS]
        unstable = [i for i, (a, b) in enumerate(zip(self.expected, again)) if a != b]
        for i in unstable:
            self.tally.problem(f"pattern {i} answered differently twice in a row, without faults", "wrong_answers")
        empty = [i for i, e in enumerate(self.expected) if not e[0]]
        self.parts["reference"] = {
            "triples_in_file": n, "load_s": round(self.ref_load_s, 2),
            "relationships_created": summary.relationships_created,
            "counts": self.ref["counts"], "agree": self.ref["stats"]["agree"], "patterns": len(PATTERNS),
            "patterns_without_answer": empty, "unstable_patterns": unstable,
            "answers": {i: [list(sg[1][0]) for sg in e[0]][:3] for i, e in enumerate(self.expected)},
        }
        if not self.ref["stats"]["agree"] or self.ref["vec_missing"] or self.ref["vec_extra"]:
            self.tally.problem(f"the reference KG's stores disagree after a clean load: {self.ref['counts']}")
        log(f"part 1: loaded in {self.ref_load_s:.1f} s: {self.ref['counts']}")

    # kills -------------------------------------------------------------------------------------------
    def kill_cycle(self, which: str, label: str, loader: Loader | None, delay: float) -> dict[str, Any]:
        """Kill ``which``, restart it, and wait until the query Engine answers correctly again."""
        running = loader is not None and loader.running()
        failed_before = len(self.priv.start_failures)
        t_kill = time.monotonic()
        pids = self.priv.kill(which)
        restart_s = self.priv.start(which)
        rec_s, errs = probe_recovery(self.engines["ref"], self.expected[0], self.tally, self.args.recovery_timeout)
        t_back = time.monotonic()
        self.windows.append((t_kill, t_back))
        rec = {"n": len(self.kills) + 1, "server": which, "part": label, "during_load": running,
               "loader": loader.id if loader is not None else None, "delay_s": round(delay, 2),
               "pids_killed": len(pids), "pids_gone_after_s": self.priv.last_kill.get("gone_after_s"),
               "pids_still_alive": self.priv.last_kill.get("still_alive"), "restart_s": round(restart_s, 1),
               "recovered": rec_s is not None, "recovery_s": round(rec_s, 2) if rec_s is not None else None,
               "outage_s": round(t_back - t_kill, 1), "probe_errors": errs,
               "start_failures": len(self.priv.start_failures) - failed_before}
        self.kills.append(rec)
        self.tally.add("faults")
        for f in self.priv.start_failures[failed_before:]:
            self.tally.problem(f"{label}: `isorag {which} start` after kill {rec['n']} failed (attempt {f['attempt']}, "
                               f"exit {f['rc']} after {f['after_s']} s): {f['error'][:400]}")
        if rec_s is not None:
            self.tally.add("recovered")
            if rec_s > 30:
                self.tally.note(f"{label}: the same Engine answered again only {rec_s:.0f} s after {which} was back "
                                f"(kill {rec['n']}, outage {rec['outage_s']} s; meanwhile {errs})")
        else:
            self.tally.problem(f"{label}: queries did not answer correctly within {self.args.recovery_timeout:.0f} s "
                               f"after the restart of {which} (kill {rec['n']}): {errs}")
        for name, n in errs.items():
            if not name.startswith(("untyped", "wrong")):
                self.tally.add("typed_errors", n)
        log(f"{label}: kill {rec['n']} of {which} ({'mid-load' if running else 'no load running'}, "
            f"+{delay:.1f} s): restart {restart_s:.1f} s, answering again after {rec['recovery_s']} s")
        return rec

    def sleep_while(self, loader: Loader, seconds: float) -> bool:
        """Sleep ``seconds`` unless the loader ends first; True if it is still running."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if not loader.running():
                return False
            time.sleep(0.05)
        return loader.running()

    # 2, 3 --------------------------------------------------------------------------------------------
    def kill_during_loads(self, which: str, kg: str, label: str) -> None:
        want = self.args.kills
        log(f"{label}: {want} x kill -9 {which} during loads of KG {kg!r}")
        graph = self.graph(kg)
        loaders: list[Loader] = []
        cycles: list[dict[str, Any]] = []
        loader: Loader | None = None
        fresh = False
        hi = max(1.0, 0.3 * self.ref_load_s)  # a fresh load: graph and vector stages both get hit
        while len(cycles) < want and len(loaders) < 4 * want:
            if loader is None or not loader.running():
                if loader is not None:
                    free = wait_lease_free(graph, self.args.lock_ttl + 30)
                    if free is None:
                        self.tally.problem(f"{label}: the lease of {kg!r} was not free {self.args.lock_ttl + 30:.0f} s "
                                           f"after loader {loader.id} ended")
                loader = self.new_loader(kg)
                loaders.append(loader)
                if not wait_lease(graph, loader, 120):
                    continue  # ended (or never took the lease): the next run
                fresh = True
            delay = self.rng.uniform(0.3, hi) if fresh else self.rng.uniform(0.5, 2.0)
            fresh = False
            if not self.sleep_while(loader, delay):
                continue  # it finished first: a new run
            cycles.append(self.kill_cycle(which, label, loader, delay))
        if len(cycles) < want:
            self.tally.problem(f"{label}: only {len(cycles)} of {want} kills landed during a load")
        # the last loader: let it finish (the drivers retry for a while), then its lease, then one clean rerun
        hung = 0
        if loader is not None and not loader.wait(self.args.loader_timeout):
            hung += 1
            self.tally.problem(f"{label}: loader {loader.id} still running {self.args.loader_timeout:.0f} s after "
                               "the last restart: killed")
        lease_wait = wait_lease_free(graph, self.args.lock_ttl + 30)
        outcomes = [ld.outcome() for ld in loaders]
        # Before the rerun: a vector is written only once its item's Neo4j transaction committed, so a vector
        # without its Neo4j item means a commit lost to kill -9 (the rerun would hide it).
        before = snapshot_or_empty(self.engine(kg))
        orphans = before["vec_extra"]
        if orphans:
            self.tally.problem(f"{label}: {orphans} vector(s) of {kg!r} without their Neo4j item after the kills "
                               "(committed graph writes lost?)")
        self.count_loader_outcomes(label, outcomes)
        reruns = []
        for _ in range(2):
            rr = self.new_loader(kg)
            rr.wait(self.args.loader_timeout)
            reruns.append(rr.outcome())
            if reruns[-1]["kind"] == "ok":
                break
        if reruns[-1]["kind"] != "ok":
            self.tally.problem(f"{label}: the rerun of the load after the faults failed: {reruns}")
        for o in reruns:
            if o["kind"] == "traceback":
                self.tally.traceback(f"{label} rerun loader {o['loader']}", o.get("stderr_tail", o["last"]))
        cmp = self.compare_kg(kg, label)
        dropped = self.drop(kg)
        self.parts[label] = {
            "server": which, "kg": kg, "kills": len(cycles), "kills_mid_load": sum(c["during_load"] for c in cycles),
            "loader_runs": len(loaders), "loaders": self.outcome_counts(outcomes), "hung_loaders": hung,
            "lease_free_after_s": round(lease_wait, 1) if lease_wait is not None else None,
            "before_rerun": {"counts": before["counts"], "orphan_vectors": orphans,
                             "entities_without_vector": before["vec_missing"]},
            "typed_with_extra_stderr": sum(o["kind"] == "typed" and o["stderr_lines"] > 1 for o in outcomes),
            "retry_warning_lines": sum(o["retry_warnings"] for o in outcomes),
            "rerun": reruns, "result": cmp, "dropped": dropped, "cycles": cycles, "loader_outcomes": outcomes,
        }

    def count_loader_outcomes(self, label: str, outcomes: list[dict[str, Any]]) -> None:
        for o in outcomes:
            if o["kind"] == "typed":
                self.tally.add("typed_errors")
            elif o["kind"] == "traceback":
                self.tally.traceback(f"{label} loader {o['loader']} (exit {o['rc']})", o.get("stderr_tail", o["last"]))
            elif o["kind"] == "other":
                self.tally.problem(f"{label}: loader {o['loader']} exited {o['rc']} without a one-line typed error: "
                                   f"{o['last']}")

    @staticmethod
    def outcome_counts(outcomes: list[dict[str, Any]]) -> dict[str, int]:
        return dict(collections.Counter(o["kind"] for o in outcomes))

    def compare_kg(self, kg: str, label: str) -> dict[str, Any]:
        got = snapshot_or_empty(self.engine(kg))
        cmp = compare(self.ref, got)
        for key in ("lost", "duplicated", "content_missing", "content_extra"):
            if cmp[key]:
                self.tally.add(key, cmp[key])
                self.tally.problems.append(
                    f"{label}: KG {kg!r} {key} = {cmp[key]} (counts {cmp['counts']} vs reference "
                    f"{self.ref['counts']}; Milvus duplicates {cmp['milvus_duplicates']})")
        log(f"{label}: KG {kg!r} vs reference: lost {cmp['lost']}, duplicated {cmp['duplicated']}, content missing "
            f"{cmp['content_missing']}, extra {cmp['content_extra']}, stores agree {cmp['agree']}")
        return cmp

    # 4 (kills with queries and no load) ---------------------------------------------------------------
    def kill_during_queries(self, which: str) -> None:
        label = f"queries_kill_{which}"
        cycles = []
        for _ in range(self.args.kills):
            delay = self.rng.uniform(0.5, 3.0)
            time.sleep(delay)
            cycles.append(self.kill_cycle(which, label, None, delay))
        self.parts[label] = {"server": which, "kills": len(cycles), "cycles": cycles}

    # 5 ---------------------------------------------------------------------------------------------------
    def concurrent_loads(self) -> None:
        kg, n = "f_conc", self.args.concurrent
        log(f"part 5: {n} loads of KG {kg!r} at once (default lease TTL)")
        graph = self.graph(kg)
        env = {k: v for k, v in self.priv.client_env.items() if k != "ISORAG_LOCK_TTL_S"}
        loaders = [self.new_loader(kg, env, dump_after=self.args.at_once_s) for _ in range(n)]
        holders: dict[int, float] = {}
        t0 = time.monotonic()
        while [ld for ld in loaders if ld.running()] and time.monotonic() - t0 < self.args.loader_timeout:
            h = lease_holder(graph)
            if isinstance(h, dict):
                for ld in loaders:
                    if f"pid {ld.pid} " in str(h.get("info")):
                        holders.setdefault(ld.id, round(time.monotonic() - t0, 2))
            time.sleep(0.1)
        for ld in loaders:
            ld.wait(5)
        outcomes = [ld.outcome() for ld in loaders]
        winners = [o for o in outcomes if o["kind"] == "ok"]
        locked = [o for o in outcomes if o["kind"] == "typed" and "is being written by" in o["last"]]
        first_end = min((o["seconds"] for o in winners), default=None)
        # refused while a winner held the lease (the message names it), and without waiting: before the winner
        # ended, or within --at-once-s of its own start (a loader's start-up: interpreter, model, connections)
        named = [o for o in locked if any(f"(pid {w['pid']} " in o["last"] for w in winners)]
        at_once = [o for o in named if o["seconds"] <= self.args.at_once_s
                   or first_end is not None and o["seconds"] < first_end]
        self.tally.add("faults", n - 1)
        self.tally.add("typed_errors", len(locked))
        for o in outcomes:
            if o["kind"] == "traceback":
                self.tally.traceback(f"concurrent loader {o['loader']}", o.get("stderr_tail", o["last"]))
        if not winners:
            self.tally.problem(f"part 5: no load of {kg!r} succeeded: {outcomes}")
        if len(winners) + len(locked) != n:
            self.tally.problem(f"part 5: a concurrent load neither loaded nor failed with KGLockedError: {outcomes}")
        if len(at_once) != len(locked):
            slow = [{k: o.get(k) for k in ("loader", "pid", "seconds", "last")} for o in locked if o not in at_once]
            self.tally.problem(f"part 5: refused load(s) that did not fail at once (winner ended after {first_end} s; "
                               f"stack dumps in the details): {slow}")
        if len(winners) > 1:
            log(f"part 5: {len(winners)} loads succeeded (one after the other: lease holders seen {holders})")
        cmp = self.compare_kg(kg, "concurrent_loads") if winners else {}
        self.parts["concurrent_loads"] = {
            "loads": n, "succeeded": len(winners), "refused_kglocked": len(locked), "refused_at_once": len(at_once),
            "lease_holders_seen": {str(k): v for k, v in holders.items()}, "outcomes": outcomes, "result": cmp,
            "dropped": self.drop(kg)}
        log(f"part 5: {len(winners)} loaded, {len(locked)} refused with KGLockedError "
            f"({len(at_once)} while the holder was loading)")

    # 6 ---------------------------------------------------------------------------------------------------
    def throughput(self) -> None:
        from engine import IsoragError

        threads, per = self.args.threads, self.args.per_thread
        log(f"part 6: {threads} threads x {per} retrievals on 'ref' through one Engine")
        eng = self.engines["ref"]
        lat: list[list[float]] = [[] for _ in range(threads)]
        bad: collections.Counter[str] = collections.Counter()
        lock = threading.Lock()
        barrier = threading.Barrier(threads)

        def run(tid: int) -> None:
            barrier.wait()
            for i in range(per):
                p = (tid + i) % len(PATTERNS)
                t = time.perf_counter()
                try:
                    sig = answer_sig(eng.retrieve(PATTERNS[p]))
                    lat[tid].append((time.perf_counter() - t) * 1000.0)
                    if sig != self.expected[p]:
                        with lock:
                            bad["wrong"] += 1
                        self.tally.problem(f"part 6: pattern {p} answered differently under 16 threads: "
                                           f"{repr(sig)[:300]}", "wrong_answers")
                except IsoragError as e:
                    with lock:
                        bad[f"typed {type(e).__name__}"] += 1
                    self.tally.problem(f"part 6: retrieve raised {type(e).__name__} without a fault: {one_line(e)}")
                except Exception:  # noqa: BLE001 - an untyped exception is a finding: counted
                    with lock:
                        bad["untyped"] += 1
                    self.tally.traceback("part 6 retrieve", traceback.format_exc())

        gc.collect()
        rss0 = vmrss_mb()
        t0 = time.perf_counter()
        ths = [threading.Thread(target=run, args=(i,), name=f"faults-tp-{i}") for i in range(threads)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        wall = time.perf_counter() - t0
        gc.collect()
        rss1 = vmrss_mb()
        flat = [x for xs in lat for x in xs]
        self.parts["throughput"] = {
            "threads": threads, "per_thread": per, "calls": threads * per, "answered": len(flat),
            "wall_s": round(wall, 2), "calls_per_s": round(len(flat) / wall, 1) if wall else None,
            "p50_ms": round(percentile(flat, 50), 2), "p90_ms": round(percentile(flat, 90), 2),
            "p99_ms": round(percentile(flat, 99), 2), "max_ms": round(max(flat), 2) if flat else None,
            "rss_before_mb": round(rss0, 1), "rss_after_mb": round(rss1, 1), "rss_growth_mb": round(rss1 - rss0, 1),
            "all_answers_equal": not bad, "bad": dict(bad)}
        tp = self.parts["throughput"]
        log(f"part 6: {tp['calls_per_s']} calls/s, p50 {tp['p50_ms']} ms, p99 {tp['p99_ms']} ms, RSS "
            f"{rss0:.0f} -> {rss1:.0f} MB, answers equal: {tp['all_answers_equal']}")

    # 7 ---------------------------------------------------------------------------------------------------
    def bad_inputs(self) -> None:
        d = self.priv.home / "bad-inputs"
        d.mkdir(exist_ok=True)
        good = json.dumps({"id": "1", "claim": "Movie 3 was directed by Director 3",
                           "pattern": {"triples": [["Movie 3", "directed_by", "Director 3"]]}}) + "\n"
        (d / "claims_one_bad_byte.jsonl").write_bytes(good.encode() + b'{"id": "2", "claim": "caf\xe9 noir"}\n')
        (d / "claims_all_bad.jsonl").write_bytes(b'{"id": "2", "claim": "caf\xe9 noir"}\n')
        (d / "malformed.txt").write_text("no separators here\nonly|two\nfour|fields|in|it\n\x00|x\n")
        pat = json.dumps(PATTERNS[0])
        kb = str(self.kb)
        neo_http = dict(self.priv.client_env, NEO4J_URI=f"http://127.0.0.1:{self.priv.neo_port}")
        # (name, argv, env, exit statuses accepted)
        cases: list[tuple[str, list[str], dict[str, str] | None, tuple[int, ...]]] = [
            ("verify: one non-UTF-8 row among good ones", ["verify", str(d / "claims_one_bad_byte.jsonl"), "--out",
             str(d / "v1.jsonl"), "--kg", "ref", "--no-llm", "--quiet"], None, (1, 2)),
            ("verify: every row non-UTF-8", ["verify", str(d / "claims_all_bad.jsonl"), "--out", str(d / "v2.jsonl"),
                                             "--kg", "ref", "--no-llm", "--quiet"], None, (2,)),
            ("load --batch-size -5", ["load", kb, "--kg", "f_bad", "--quiet", "--batch-size", "-5"], None, (2,)),
            ("load --batch-size 0", ["load", kb, "--kg", "f_bad", "--quiet", "--batch-size", "0"], None, (2,)),
            ("load --delimiter '\\x'", ["load", kb, "--kg", "f_bad", "--quiet", "--delimiter", "\\x"], None, (2,)),
            ("match -k -1", ["match", pat, "--kg", "ref", "-k", "-1"], None, (2,)),
            ("match --deadline nan", ["match", pat, "--kg", "ref", "--deadline", "nan"], None, (2,)),
            ("match --deadline inf", ["match", pat, "--kg", "ref", "--deadline", "inf"], None, (2,)),
            ("NEO4J_URI=http://...", ["stats", "--kg", "ref"], neo_http, (2,)),
            ("synth --shapes bogus", ["synth", "--kg", "ref", "--out", str(d / "s.jsonl"), "--shapes", "bogus",
                                      "--no-llm"], None, (2,)),
            ("load: every line malformed", ["load", str(d / "malformed.txt"), "--kg", "f_bad", "--format", "hrt",
                                            "--quiet"], None, (2,)),
            ("match: pattern not JSON", ["match", '{"triples": [["Movie 3", "directed_by"', "--kg", "ref"], None, (2,)),
            ("match: pattern neither JSON nor a file", ["match", "not json at all", "--kg", "ref"], None, (2,)),
            ("load --kg x__y", ["load", kb, "--kg", "x__y", "--quiet"], None, (2,)),
            ("load: missing file", ["load", str(d / "missing.txt"), "--kg", "f_bad", "--quiet"], None, (2,)),
            ("match: KG that does not exist", ["match", pat, "--kg", "f_none"], None, (2,)),
        ]
        if self.args.bad_inputs is not None:
            cases = cases[:self.args.bad_inputs]
        log(f"part 7: {len(cases)} bad inputs through the CLI")

        def run(case: tuple[str, list[str], dict[str, str] | None, tuple[int, ...]]) -> dict[str, Any]:
            name, argv, env, accepted = case
            t0 = time.monotonic()
            try:
                r = self.priv.cli(*argv, env=env, timeout=180)
                rc, err = r.returncode, r.stderr
            except subprocess.TimeoutExpired as e:
                rc, err = None, (e.stderr or b"").decode("utf-8", "replace") if isinstance(e.stderr, bytes) else ""
            lines = [ln for ln in err.splitlines() if ln.strip()]
            last = lines[-1] if lines else ""
            if rc is None:
                kind = "hung"
            elif TRACEBACK in err or rc == 70:
                kind = "traceback"
            elif rc == 0:
                kind = "accepted"
            elif rc in accepted and last.startswith("isorag: error:"):
                kind = "typed"
            elif rc == 1 and 1 in accepted and "not valid UTF-8" in err:
                kind = "typed"  # the bad row is named, the good ones verified: "done, but not clean"
            else:
                kind = "other"
            return {"case": name, "rc": rc, "kind": kind, "one_line": len(lines) == 1, "stderr": one_line(err, 400),
                    "seconds": round(time.monotonic() - t0, 2)}

        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(run, cases))
        for r in results:
            self.tally.add("faults")
            if r["kind"] == "typed":
                self.tally.add("typed_errors")
            elif r["kind"] == "traceback":
                self.tally.traceback(f"CLI bad input {r['case']!r} (exit {r['rc']})", r["stderr"])
            else:
                self.tally.problem(f"part 7: {r['case']}: {r['kind']} (exit {r['rc']}): {r['stderr']}")
        kinds = collections.Counter(r["kind"] for r in results)
        self.parts["bad_inputs"] = {"cases": len(results), "outcomes": dict(kinds),
                                    "multi_line_stderr": [r["case"] for r in results if not r["one_line"]],
                                    "results": results}
        log(f"part 7: {dict(kinds)}")

    # cleanup ----------------------------------------------------------------------------------------------
    def stop_work(self) -> None:
        if self.queries is not None:
            stuck = self.queries.stop(60)
            if stuck:
                self.tally.problem(f"{stuck} query thread(s) still inside a call 60 s after the end")
        for ld in self.loaders:
            ld.kill()

    def drop(self, kg: str) -> str | None:
        """Drop a private KG (checked, or at the end); what happened, None if it was not there."""
        from engine import IsoragError, KGNotFoundError

        eng = self.engine(kg)
        try:
            eng.stats()
        except KGNotFoundError:
            return None
        except IsoragError as e:
            return f"not dropped: {one_line(e, 200)}"
        t0 = time.monotonic()
        try:
            eng.drop()
            return f"dropped in {time.monotonic() - t0:.1f} s"
        except IsoragError as e:
            self.tally.problem(f"dropping KG {kg!r} failed: {one_line(e)}")
            return f"drop failed: {one_line(e, 200)}"
        except Exception:  # noqa: BLE001 - an untyped exception is a finding: its traceback kept
            self.tally.traceback(f"drop of {kg!r}", traceback.format_exc())
            return "drop raised an untyped exception"

    def drop_all(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for kg in ("f_neo", "f_mil", "f_conc", "f_bad", "ref"):
            what = self.drop(kg)
            if what is not None:
                out[kg] = what
        return out

    def close(self) -> None:
        """Close the engines: their Milvus channels close, so engine threads still at work (an interrupted load's
        finalize) fail at once instead of retrying against stopped servers."""
        for eng in self.engines.values():
            try:
                eng.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass


def run_campaign(args: argparse.Namespace, priv: Private, tally: Tally, camp: Campaign) -> None:
    log(f"private servers: Neo4j {priv.neo_uri}, Milvus {priv.mil_uri}, home {priv.home}")
    with ThreadPoolExecutor(2) as pool:  # two servers, started side by side
        starts = {w: pool.submit(priv.start, w) for w in ("neo4j", "milvus")}
    for which, fut in starts.items():
        log(f"private {which} up in {fut.result():.1f} s")
    camp.reference()
    camp.throughput()
    camp.concurrent_loads()
    if args.kills:
        kill_parts(args, tally, camp)
    camp.bad_inputs()


def kill_parts(args: argparse.Namespace, tally: Tally, camp: Campaign) -> None:
    """Parts 2, 3 and 4: kills of each server during loads, with queries running, and (without --quick) during
    queries alone."""
    ref_eng = camp.engines["ref"]
    camp.queries = QueryLoad(ref_eng, camp.expected, tally, args.query_threads, args.query_pause)
    camp.queries.start()
    camp.kill_during_loads("neo4j", "f_neo", "neo4j_kill_load")
    camp.kill_during_loads("milvus", "f_mil", "milvus_kill_load")
    if args.separate_query_kills:
        log(f"part 4: {args.kills} more kills of each server during queries, no load running")
        camp.kill_during_queries("neo4j")
        camp.kill_during_queries("milvus")
    stuck = camp.queries.stop(60)
    if stuck:
        tally.problem(f"{stuck} query thread(s) still inside a call 60 s after the end of the kills")
    qs = camp.queries.summary(camp.windows)
    camp.queries = None
    qs["kills"] = len(camp.kills)
    qs["recovered"] = sum(k["recovered"] for k in camp.kills)
    rec = [k["recovery_s"] for k in camp.kills if k["recovery_s"] is not None]
    qs["recovery_s_max"] = max(rec) if rec else None
    qs["restart_s"] = {w: [k["restart_s"] for k in camp.kills if k["server"] == w] for w in ("neo4j", "milvus")}
    qs["shared_with_load_kills"] = not args.separate_query_kills
    camp.parts["queries_under_kills"] = qs
    log(f"part 4: {qs['calls']} queries: during outages {qs['during']}, outside {qs['outside']}; "
        f"recovered after {qs['recovered']} of {qs['kills']} kills")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller campaign (5,000 triples, 16 x 100 retrievals)")
    ap.add_argument("--kills", type=int, default=5, help="kill -9 per server and part (default 5; 0: no kill, "
                                                          "parts 2-4 skipped)")
    ap.add_argument("--triples", type=int, default=None, help="synthetic KG size (default 20,000; --quick 5,000)")
    ap.add_argument("--batch-size", type=int, default=None, help="load batch (default 1,000; --quick 500)")
    ap.add_argument("--threads", type=int, default=16, help="part 6 threads")
    ap.add_argument("--per-thread", type=int, default=None, help="part 6 retrievals per thread (1,000; --quick 100)")
    ap.add_argument("--query-threads", type=int, default=2, help="query threads during the kills")
    ap.add_argument("--query-pause", type=float, default=0.2, help="pause between a query thread's calls (s)")
    ap.add_argument("--concurrent", type=int, default=3, help="loads at once in part 5")
    ap.add_argument("--separate-query-kills", action=argparse.BooleanOptionalAction, default=None,
                    help="part 4 also kills each server --kills times with no load running (default: not with --quick)")
    ap.add_argument("--at-once-s", type=float, default=10.0,
                    help="part 5: a refused load must end within this many seconds of its start, or before the winner")
    ap.add_argument("--lock-ttl", type=float, default=5.0, help="ISORAG_LOCK_TTL_S of the loaders of parts 2, 3")
    ap.add_argument("--recovery-timeout", type=float, default=120.0, help="seconds to answer again after a restart")
    ap.add_argument("--loader-timeout", type=float, default=300.0, help="seconds a loader may run")
    ap.add_argument("--start-timeout", type=float, default=300.0, help="seconds a server start may take")
    ap.add_argument("--neo4j-port", type=int, default=None, help="private Neo4j port (default 7697 or next free)")
    ap.add_argument("--milvus-port", type=int, default=None, help="private Milvus port (default 19540 or next free)")
    ap.add_argument("--neo4j-heap", default="1g")
    ap.add_argument("--neo4j-pagecache", default="256m")
    ap.add_argument("--tmp", default="/tmp", help="where the private home is made")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", action="store_true", help="keep the private home (data, logs) afterwards")
    ap.add_argument("--bad-inputs", type=int, default=None, help="part 7: only the first N bad inputs")
    args = parse_args(ap, {"quick": True, "kills": 0, "triples": 200, "batch_size": 100, "threads": 2,
                           "per_thread": 5, "concurrent": 2, "bad_inputs": 4})
    args.triples = args.triples or (5_000 if args.quick else 20_000)
    args.batch_size = args.batch_size or (500 if args.quick else 1_000)
    args.per_thread = args.per_thread or (100 if args.quick else 1_000)
    if args.separate_query_kills is None:
        args.separate_query_kills = not args.quick
    if args.kills < 0 or args.triples < 50 or args.threads < 1 or args.per_thread < 1 or args.concurrent < 2:
        ap.error("--kills >= 0; --threads, --per-thread >= 1; --triples >= 50; --concurrent >= 2")

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    drivers = DriverLog()
    logging.getLogger().addHandler(drivers)
    tally = Tally()
    priv: Private | None = None
    camp: Campaign | None = None
    error: str | None = None
    interrupted = False
    drops: dict[str, Any] = {}
    try:
        priv = Private(args)
        camp = Campaign(args, priv, tally)
        run_campaign(args, priv, tally, camp)
    except KeyboardInterrupt:
        interrupted = True
        error = "interrupted"
        log("interrupted: cleaning up")
    except CampaignError as e:
        error = str(e)
        log(f"campaign stopped: {e}")
    except Exception as e:  # noqa: BLE001 - an engine exception that is not an IsoragError is a finding
        from engine import IsoragError

        error = f"{type(e).__name__}: {one_line(e, 600)}"
        if isinstance(e, IsoragError):
            log(f"campaign stopped by {error}")
        else:
            tally.traceback("campaign (main thread)", traceback.format_exc())
    finally:
        try:
            if camp is not None:
                camp.stop_work()
                if priv is not None and not interrupted and all(priv.up.values()):
                    log("dropping the private KGs")
                    try:
                        drops = camp.drop_all()
                    except Exception as e:  # noqa: BLE001 - the servers are stopped below whatever the drops raised
                        drops = {"error": one_line(e)}
                camp.close()
            from engine.stores.graph import close_drivers

            close_drivers()
        finally:
            if priv is not None:
                def stop(which: str) -> None:
                    t0 = time.monotonic()
                    try:
                        priv.stop(which)
                        log(f"private {which} stopped in {time.monotonic() - t0:.1f} s")
                    except Exception as e:  # noqa: BLE001 - keep stopping the other one
                        log(f"stopping the private {which}: {e}")

                log("stopping the private servers")
                stoppers = [threading.Thread(target=stop, args=(w,)) for w in ("milvus", "neo4j")]
                for t in stoppers:
                    t.start()
                for t in stoppers:
                    t.join()
                left = priv.sweep()
                if left:
                    log(f"killed {len(left)} leftover process(es) of the private home: {left}")
                priv.remove()

    c = tally.c
    parts = camp.parts if camp is not None else {}
    tp = parts.get("throughput", {})
    result: dict[str, Any] = {
        "mode": "quick" if args.quick else "full",
        "wall_s": round(time.monotonic() - T0, 1),
        "faults": c["faults"], "recovered": c["recovered"], "lost": c["lost"], "duplicated": c["duplicated"],
        "tracebacks": c["tracebacks"], "typed_errors": c["typed_errors"],
        "p50_ms": tp.get("p50_ms"), "p99_ms": tp.get("p99_ms"), "rss_growth_mb": tp.get("rss_growth_mb"),
        "content_missing": c["content_missing"], "content_extra": c["content_extra"],
        "wrong_answers": c["wrong_answers"], "bad_outcomes": c["bad_outcomes"],
        "kills": len(camp.kills) if camp is not None else 0,
        "triples": args.triples, "kills_per_server": args.kills, "seed": args.seed,
        "error": error,
    }
    failed = any(result[k] for k in ("lost", "duplicated", "content_missing", "content_extra", "tracebacks",
                                     "wrong_answers", "bad_outcomes"))
    result["passed"] = not failed and error is None
    brief = {}
    for name, p in parts.items():
        if name in ("neo4j_kill_load", "milvus_kill_load"):
            brief[name] = {"kills": p["kills"], "mid_load": p["kills_mid_load"], "loader_runs": p["loader_runs"],
                           "loaders": p["loaders"], "lost": p["result"]["lost"],
                           "duplicated": p["result"]["duplicated"]}
        elif name == "queries_under_kills":
            brief[name] = {"calls": p["calls"], "during": p["during"], "outside": p["outside"],
                           "recovered": p["recovered"], "kills": p["kills"], "recovery_s_max": p["recovery_s_max"]}
        elif name == "concurrent_loads":
            brief[name] = {k: p[k] for k in ("loads", "succeeded", "refused_kglocked", "refused_at_once")}
        elif name == "bad_inputs":
            brief[name] = p["outcomes"]
        elif name == "throughput":
            brief[name] = {k: p[k] for k in ("calls", "calls_per_s", "p50_ms", "p99_ms", "rss_growth_mb",
                                             "all_answers_equal")}
    result["parts"] = brief
    detail = dict(result, parts=parts, problems=tally.problems, notes=tally.notes, traceback_texts=tally.tracebacks,
                  drops=drops, driver_log_records=dict(drivers.counts), driver_log_examples=drivers.examples,
                  start_failures=priv.start_failures if priv else [],
                  private={"home": str(priv.home) if priv else None, "kept": bool(args.keep),
                           "neo4j": priv.neo_uri if priv else None, "milvus": priv.mil_uri if priv else None},
                  args=vars(args), load_avg=[round(x, 2) for x in os.getloadavg()])
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / ("faults.smoke.json" if args.smoke else "faults_quick.json" if args.quick else "faults.json")
    out.write_text(json.dumps(detail, indent=2, default=str) + "\n")

    print(f"fault campaign ({result['mode']}, {args.triples:,} triples) in {result['wall_s']:.0f} s: "
          f"{'PASSED' if result['passed'] else 'FAILED'}")
    print(f"  faults {result['faults']} ({result['kills']} kills), recovered {result['recovered']}, "
          f"typed errors {result['typed_errors']}, tracebacks {result['tracebacks']}")
    print(f"  lost {result['lost']}, duplicated {result['duplicated']}, content missing {result['content_missing']}, "
          f"extra {result['content_extra']}, wrong answers {result['wrong_answers']}, other problems "
          f"{result['bad_outcomes']}")
    if tp:
        print(f"  {tp['threads']} x {tp['per_thread']} retrievals: p50 {tp['p50_ms']} ms, p99 {tp['p99_ms']} ms, "
              f"RSS +{tp['rss_growth_mb']} MB")
    for p in tally.problems[:10]:
        print(f"  problem: {p[:300]}")
    for n in tally.notes[:5]:
        print(f"  note: {n[:300]}")
    if error:
        print(f"  campaign error: {error}")
    print(f"  details: {out.relative_to(ROOT)}")
    print(json.dumps({"smoke": True, **result} if args.smoke else result, separators=(",", ":"), default=str))
    if failed:
        return 1
    if interrupted:
        return 130
    return 2 if error is not None else 0


if __name__ == "__main__":
    code = main()
    # An interrupted load leaves the engine's finalize threads (not daemons) retrying against the stopped
    # Milvus for minutes: do not wait for them.
    left = [t.name for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if left:
        if any("finalize" in name for name in left):
            log(f"not waiting for engine thread(s) still running: {', '.join(left)}")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
