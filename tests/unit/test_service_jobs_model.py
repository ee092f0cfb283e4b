"""The service's verification jobs (``engine.service.jobs.JobStore``) against a plain-Python model: hypothesis drives
random sequences over two workers sharing one state folder (two JobStores, as two ``--workers`` processes share
it): jobs submitted to either worker for one of two KGs, with malformed rows; a worker killed in the middle of a
job (the job's owner a process that is gone, its output cut, maybe mid-line); reads from either worker. After every
step each worker lists the model's jobs of a KG and no other, a job is not found under another KG, and once the
workers are idle every job is done, its output holding each claim once with the verdict the world gives.

The verifier is a stand-in for the engine (the job bookkeeping is under test); the real server killed with SIGKILL
and restarted is in tests/integration/test_serve_jobs.py."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from engine._errors import InputError
from engine.jobs import read_verdicts
from engine.service.jobs import JobStore

from helpers.jobs import OUTCOMES, World, label_of

KGS = ("films", "books")


def _dead_pid() -> int:
    """The pid of a process of this machine that has exited (as a killed worker's)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


class ServiceJobMachine(RuleBasedStateMachine):
    jobs = Bundle("jobs")

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="isorag-service-jobs-model-"))
        self.world = World()
        self.workers = [JobStore(self.dir, lambda kg: self.world, concurrency=2) for _ in range(2)]  # type: ignore[arg-type,misc]
        self.model: dict[str, dict[str, Any]] = {}  # job id -> {"kg", "claims": {id: outcome}, "malformed"}
        self.n = 0

    def _idle(self) -> None:
        for w in self.workers:
            w.wait(timeout=30)

    @rule(target=jobs, worker=st.integers(0, 1), kg=st.sampled_from(KGS),
          outcomes=st.lists(st.sampled_from(OUTCOMES), min_size=1, max_size=5), malformed=st.integers(0, 2))
    def submit(self, worker: int, kg: str, outcomes: list[str], malformed: int) -> str:
        claims = {}
        lines = []
        for outcome in outcomes:
            cid, text = f"c{self.n}", f"claim {self.n}"
            self.n += 1
            self.world.outcome[text] = outcome
            claims[cid] = outcome
            lines.append(json.dumps({"id": cid, "claim": text}))
        lines += ["{not json"] * malformed
        job = self.workers[worker].submit(kg, "".join(x + "\n" for x in lines).encode(), "jsonl")
        assert job["kg"] == kg and job["claims"] == len(outcomes) and job["malformed"] == malformed
        self.model[job["id"]] = {"kg": kg, "claims": claims}
        self._idle()
        return str(job["id"])

    @rule(worker=st.integers(0, 1))
    def submit_nothing_to_verify(self, worker: int) -> None:
        before = sorted(p.name for p in self.dir.iterdir())
        with pytest.raises(InputError, match="no claim to verify"):
            self.workers[worker].submit("films", b"{not json\n\n", "jsonl")
        assert sorted(p.name for p in self.dir.iterdir()) == before  # nothing left behind

    @rule(job=jobs, keep=st.floats(0, 1), partial=st.booleans(), reader=st.integers(0, 1))
    def worker_killed_midway(self, job: str, keep: float, partial: bool, reader: int) -> None:
        """The worker that ran ``job`` died after a part of it: its output cut (maybe mid-line), the job still
        "running" under a process that is gone. The next read by any worker takes it over and finishes it."""
        d = self.dir / job
        out = d / "verdicts.jsonl"
        lines = out.read_bytes().splitlines(keepends=True)
        cut = b"".join(lines[:int(len(lines) * keep)])
        if partial and len(lines) > int(len(lines) * keep):
            cut += lines[int(len(lines) * keep)][:5]
        out.write_bytes(cut)
        state = json.loads((d / "job.json").read_text())
        state.update(status="running", owner={"pid": _dead_pid(), "host": socket.gethostname()}, finished=None)
        (d / "job.json").write_text(json.dumps(state))
        seen = self.workers[reader].get(self.model[job]["kg"], job)
        assert seen["status"] in ("running", "done")
        self._idle()
        self.model[job]["resumed"] = self.model[job].get("resumed", 0) + 1

    @rule(job=jobs, worker=st.integers(0, 1))
    def read_under_another_kg(self, job: str, worker: int) -> None:
        other = next(kg for kg in KGS if kg != self.model[job]["kg"])
        with pytest.raises(InputError, match="no job"):
            self.workers[worker].get(other, job)

    @invariant()
    def every_worker_sees_the_model(self) -> None:
        self._idle()
        for w in self.workers:
            for kg in KGS:
                listed = {j["id"]: j for j in w.jobs_of(kg)}
                assert set(listed) == {jid for jid, m in self.model.items() if m["kg"] == kg}
                for jid, j in listed.items():
                    claims = self.model[jid]["claims"]
                    assert j["status"] == "done", j
                    assert j["done"] == j["claims"] == len(claims) and j["progress"] == 1.0
                    assert j["resumed"] == self.model[jid].get("resumed", 0)
                    assert j["summary"]["verdicts"] == len(claims)
                    records, partial = read_verdicts(w.results_path(kg, jid))
                    assert not partial
                    ids = [r["id"] for r in records]
                    assert len(ids) == len(set(ids)), "a claim verified twice"
                    assert {r["id"]: label_of(r) for r in records} == claims

    def teardown(self) -> None:
        self._idle()
        for p in sorted(self.dir.rglob("*"), key=lambda p: -len(p.parts)):
            p.rmdir() if p.is_dir() else p.unlink()
        self.dir.rmdir()


ServiceJobMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=8, deadline=None,
                                               suppress_health_check=[HealthCheck.too_slow])
test_service_job_model = ServiceJobMachine.TestCase
