"""Verification jobs of the service: a claims file sent over HTTP, verified in the background by
:func:`engine.jobs.run_verify_job`, its progress readable from any worker, resumed after a restart.

Each job is a folder ``<state>/jobs/<id>/``: ``claims.<fmt>`` (as sent), ``verdicts.jsonl`` (the job's output:
one line per claim, appended, so a rerun skips every id already there) and ``job.json`` (its state: KG, status,
totals, owner and heartbeat, summary), replaced whole under an ``fcntl`` lock on ``job.lock``. The worker that
runs a job writes its heartbeat every :data:`HEARTBEAT_S` seconds; a job whose owner is a dead process of this
machine, or whose heartbeat is older than :data:`STALE_S`, is taken over by the next worker that looks (at start
and on every read of the jobs), and goes on where the output file stops. Progress is the output's line count, so
every worker reports the same figure.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine._errors import InputError, IsoragError
from engine.jobs import BadRow, read_claims, run_verify_job

if TYPE_CHECKING:  # pragma: no cover
    from engine._engine import Engine

__all__ = ["HEARTBEAT_S", "JOB_ID", "STALE_S", "JobStore"]

HEARTBEAT_S = 1.0
STALE_S = 10.0
JOB_ID = re.compile(r"[0-9a-f]{16}")
_HOST = socket.gethostname()
ACTIVE = ("queued", "running")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class JobStore:
    """The jobs under ``root``; ``engine_of(kg)`` gives the engine a job verifies with."""

    def __init__(self, root: Path, engine_of: Callable[[str], Engine], *, concurrency: int = 2) -> None:
        self.root = root
        self.engine_of = engine_of
        self.concurrency = concurrency
        self._threads: dict[str, threading.Thread] = {}
        self._mutex = threading.Lock()

    # -- files ------------------------------------------------------------------------------------------
    def _dir(self, job_id: str) -> Path:
        if not JOB_ID.fullmatch(job_id):
            raise InputError(f"no job {job_id!r}: a job id is 16 hexadecimal digits")
        return self.root / job_id

    @contextlib.contextmanager
    def _locked(self, job_id: str) -> Iterator[None]:
        fd = os.open(self._dir(job_id) / "job.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _read(self, job_id: str) -> dict[str, Any]:
        try:
            state: dict[str, Any] = json.loads((self._dir(job_id) / "job.json").read_text())
        except FileNotFoundError:
            raise InputError(f"no job {job_id!r}") from None
        return state

    def _write(self, state: dict[str, Any]) -> None:
        d = self._dir(state["id"])
        tmp = d / f".job.{os.getpid()}.{threading.get_ident()}.tmp"
        tmp.write_text(json.dumps(state))
        os.replace(tmp, d / "job.json")

    def _update(self, job_id: str, **changes: Any) -> dict[str, Any]:
        with self._locked(job_id):
            state = self._read(job_id)
            state.update(changes)
            self._write(state)
            return state

    # -- the API ----------------------------------------------------------------------------------------
    def submit(self, kg: str, data: bytes, fmt: str) -> dict[str, Any]:
        """A new job of ``kg`` over the claims in ``data`` (``jsonl`` or ``csv``): checked whole (a file with no
        good row is an :class:`~engine._errors.InputError`), stored, and started in this process."""
        if fmt not in ("jsonl", "csv"):
            raise InputError(f"unknown claims format {fmt!r}: send JSON Lines (jsonl) or CSV (csv)")
        job_id = secrets.token_hex(8)
        d = self.root / job_id
        d.mkdir(parents=True, mode=0o700)
        claims = d / f"claims.{fmt}"
        claims.write_bytes(data)
        good = bad = 0
        first_bad = ""
        try:
            for row in read_claims(claims, fmt):
                if isinstance(row, BadRow):
                    bad += 1
                    first_bad = first_bad or f"line {row.line}: {row.reason}"
                else:
                    good += 1
        except IsoragError:
            _remove(d)
            raise
        if not good:
            _remove(d)
            why = f"every row is malformed ({bad:,}); first: {first_bad}" if bad else "it has no rows"
            raise InputError(f"no claim to verify: {why}")
        state = {"id": job_id, "kg": kg, "format": fmt, "created": _now(), "claims": good, "malformed": bad,
                 "status": "queued", "owner": None, "heartbeat": 0.0, "started": None, "finished": None,
                 "summary": None, "error": None, "error_type": None, "resumed": 0}
        self._write(state)
        self._start(job_id)
        return self.get(kg, job_id)

    def get(self, kg: str, job_id: str) -> dict[str, Any]:
        """The job's state with its progress (``done`` of ``claims``); a job of another KG is not found."""
        self.resume_stale()
        state = self._read(job_id)
        if state["kg"] != kg:
            raise InputError(f"no job {job_id!r} in KG {kg!r}")
        return self._public(state)

    def jobs_of(self, kg: str) -> list[dict[str, Any]]:
        self.resume_stale()
        out = []
        for d in sorted(self.root.glob("*/job.json")) if self.root.is_dir() else []:
            try:
                state = json.loads(d.read_text())
            except (OSError, ValueError):
                continue
            if state.get("kg") == kg:
                out.append(self._public(state))
        return sorted(out, key=lambda s: s["created"])

    def results_path(self, kg: str, job_id: str) -> Path:
        self.get(kg, job_id)
        return self._dir(job_id) / "verdicts.jsonl"

    def _public(self, state: dict[str, Any]) -> dict[str, Any]:
        done = _lines(self._dir(state["id"]) / "verdicts.jsonl")
        total = int(state["claims"])
        out = {k: v for k, v in state.items() if k not in ("owner", "heartbeat")}
        out.update(done=done, progress=round(done / total, 4) if total else 1.0)
        return out

    # -- running ----------------------------------------------------------------------------------------
    def resume_stale(self) -> list[str]:
        """Take over the active jobs whose owner died (see the module's docstring); the ids taken."""
        taken: list[str] = []
        if not self.root.is_dir():
            return taken
        for f in self.root.glob("*/job.json"):
            job_id = f.parent.name
            try:
                state = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            if state.get("status") in ACTIVE and _stale(state) and job_id not in self._threads:
                if self._start(job_id, resume=True):
                    taken.append(job_id)
        return taken

    def _start(self, job_id: str, resume: bool = False) -> bool:
        with self._mutex, self._locked(job_id):
            state = self._read(job_id)
            if state["status"] not in ACTIVE or (resume and not _stale(state)) or job_id in self._threads:
                return False
            state.update(status="running", owner={"pid": os.getpid(), "host": _HOST}, heartbeat=time.time(),
                         started=state["started"] or _now(), resumed=state["resumed"] + int(resume))
            self._write(state)
            t = threading.Thread(target=self._run, args=(job_id,), name=f"isorag-job-{job_id}", daemon=True)
            self._threads[job_id] = t
        t.start()
        return True

    def _run(self, job_id: str) -> None:
        state = self._read(job_id)
        d = self._dir(job_id)
        stop = threading.Event()
        beat = threading.Thread(target=self._beat, args=(job_id, stop), daemon=True)
        beat.start()
        try:
            summary = run_verify_job(self.engine_of(state["kg"]), d / f"claims.{state['format']}",
                                     d / "verdicts.jsonl", concurrency=self.concurrency, fmt=state["format"],
                                     progress=False, echo=lambda _msg: None)
            summary.pop("malformed_rows", None)
            final = {"status": "done", "summary": summary, "error": None, "error_type": None}
        except Exception as e:  # noqa: BLE001 - the job's state says why; the worker goes on
            final = {"status": "failed", "error": str(e), "error_type": type(e).__name__}
        finally:
            stop.set()
            beat.join()
        self._update(job_id, finished=_now(), **final)
        with self._mutex:
            self._threads.pop(job_id, None)

    def _beat(self, job_id: str, stop: threading.Event) -> None:
        while not stop.wait(HEARTBEAT_S):
            try:
                self._update(job_id, heartbeat=time.time())
            except OSError:
                pass

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the jobs this process runs (tests, shutdown)."""
        with self._mutex:
            threads = list(self._threads.values())
        for t in threads:
            t.join(timeout)


def _stale(state: dict[str, Any]) -> bool:
    owner = state.get("owner")
    if not owner:
        return True  # queued by a worker that died before it started the job
    if owner.get("host") == _HOST and not _alive(int(owner.get("pid", 0))):
        return True
    return time.time() - float(state.get("heartbeat") or 0.0) > STALE_S


def _lines(path: Path) -> int:
    """Complete lines of a file (a partial last line, a write cut short, is not a verdict yet)."""
    try:
        with open(path, "rb") as fh:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    except FileNotFoundError:
        return 0


def _remove(d: Path) -> None:
    for f in d.iterdir():
        f.unlink()
    d.rmdir()
