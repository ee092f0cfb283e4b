"""Verification jobs against a plain-Python model of their state: hypothesis drives random sequences of runs over
one claims file and one output file: claims appended (good and malformed rows), runs whole, run in shards, killed
midway, cut mid-line, retried after failures, with the world changing between runs. After every step the output
holds each id at most once, only ids of the file, each verdict the one its run computed; after a whole run every
claim of the run's shard has its verdict; the summary counts what the file holds.

The verifier here is a stand-in for ``Engine.verify`` (what it returns is the world's answer for the claim): the
job's bookkeeping is what is under test; the jobs on the real stores are in tests/integration/test_verify_jobs.py."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from engine.jobs import FAILED, read_verdicts, run_verify_job, shard_of

from helpers.jobs import OUTCOMES, Killed, World, label_of

class VerifyJobMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="isorag-jobs-model-"))
        self.claims = self.dir / "claims.jsonl"
        self.out = self.dir / "verdicts.jsonl"
        self.world = World()
        self.ids: list[str] = []          # the file's good rows, in order
        self.text: dict[str, str] = {}    # id -> claim text
        self.verdicts: dict[str, str] = {}  # the model of the output: id -> label (or FAILED)

    # the claims file ---------------------------------------------------------------------------------------
    def _append(self, lines: list[str]) -> None:
        with open(self.claims, "a", encoding="utf-8") as fh:
            fh.writelines(line + "\n" for line in lines)

    @initialize(outcomes=st.lists(st.sampled_from(OUTCOMES), min_size=1, max_size=6))
    def first_claims(self, outcomes: list[str]) -> None:
        self.add_claims(outcomes)

    @rule(outcomes=st.lists(st.sampled_from(OUTCOMES), min_size=1, max_size=4))
    def add_claims(self, outcomes: list[str]) -> None:
        lines = []
        for outcome in outcomes:
            cid = f"c{len(self.ids)}"
            text = f"claim number {len(self.ids)}"
            self.ids.append(cid)
            self.text[cid] = text
            self.world.outcome[text] = outcome
            lines.append(json.dumps({"id": cid, "claim": text}))
        self._append(lines)

    @rule(kind=st.sampled_from(["not json", "no id", "duplicate"]))
    def add_malformed_row(self, kind: str) -> None:
        line = {"not json": "{oops", "no id": json.dumps({"claim": "an orphan claim"}),
                "duplicate": json.dumps({"id": self.ids[0], "claim": "the same id again"})}[kind]
        self._append([line])

    @rule(data=st.data(), outcome=st.sampled_from(OUTCOMES))
    def world_changes(self, data: st.DataObject, outcome: str) -> None:
        """The KG or the LLM changes: a claim verified later gets another outcome (one verified already keeps its
        line: a job never rewrites a verdict, except a failed one under retry_failed)."""
        cid = data.draw(st.sampled_from(self.ids))
        self.world.outcome[self.text[cid]] = outcome

    # the output file -----------------------------------------------------------------------------------------
    @rule(junk=st.sampled_from([b'{"id":"c', b'{"id":"c0","claim":"claim number 0","lab', b"{"]))
    def cut_mid_line(self, junk: bytes) -> None:
        """A kill in the middle of a write: a partial last line, which the next run cuts off."""
        data = self.out.read_bytes() if self.out.exists() else b""
        if data and not data.endswith(b"\n"):
            return  # already cut
        with open(self.out, "ab") as fh:
            fh.write(junk)

    # runs ----------------------------------------------------------------------------------------------------
    @rule(shard=st.sampled_from([None, (0, 2), (1, 2), (0, 3), (2, 3)]), concurrency=st.sampled_from([1, 3]),
          retry_failed=st.booleans(), kill_after=st.none() | st.integers(0, 3))
    def run(self, shard: tuple[int, int] | None, concurrency: int, retry_failed: bool,
            kill_after: int | None) -> None:
        def in_shard(cid: str) -> bool:
            return shard is None or shard_of(cid, shard[1]) == shard[0]

        before = dict(self.verdicts)
        if retry_failed:  # this shard's failed verdicts go; another shard's stay
            before = {cid: v for cid, v in before.items() if v != FAILED or not in_shard(cid)}
        todo = [cid for cid in self.ids if in_shard(cid) and cid not in before]
        expected = {cid: self.world.outcome[self.text[cid]] for cid in todo}
        self.world.budget = kill_after
        try:
            summary = run_verify_job(self.world, self.claims, self.out, concurrency=concurrency,  # type: ignore[arg-type]
                                     shard=shard, retry_failed=retry_failed, progress=False, echo=lambda _: None)
        except Killed:
            assert kill_after is not None and kill_after < len(todo)
            records, _ = read_verdicts(self.out)
            got = {r["id"]: label_of(r) for r in records}
            new = {cid: v for cid, v in got.items() if cid not in before}
            # what was written before the kill: verdicts of this run's claims, as the world said, at most kill_after
            assert set(new) <= set(todo) and len(new) <= kill_after, (new, todo)
            assert all(expected[cid] == v for cid, v in new.items())
            self.verdicts = {**before, **new}
            return
        finally:
            self.world.budget = None
        assert kill_after is None or kill_after >= len(todo)
        self.verdicts = {**before, **expected}
        assert summary["verified"] == len(todo)
        assert summary["already_done"] == sum(1 for cid in self.ids if in_shard(cid) and cid in before)
        assert summary["in_shard"] == sum(1 for cid in self.ids if in_shard(cid))
        assert summary["failed"] == sum(1 for v in expected.values() if v == FAILED)
        assert summary["verdicts"] == len(self.verdicts)
        for name in OUTCOMES:
            assert summary["counts"][name] == sum(1 for v in self.verdicts.values() if v == name), name
        # a whole run leaves every claim of its shard with a verdict
        assert all(cid in self.verdicts for cid in self.ids if in_shard(cid))

    # what always holds -----------------------------------------------------------------------------------
    @invariant()
    def output_is_the_model(self) -> None:
        records, _ = read_verdicts(self.out)
        ids = [r["id"] for r in records]
        assert len(ids) == len(set(ids)), "an id written twice"
        assert set(ids) <= set(self.ids)
        assert {r["id"]: label_of(r) for r in records} == self.verdicts
        for r in records:
            assert r["claim"] == self.text[r["id"]]

    def teardown(self) -> None:
        for p in self.dir.iterdir():
            p.unlink()
        self.dir.rmdir()


VerifyJobMachine.TestCase.settings = settings(max_examples=80, stateful_step_count=12, deadline=None,
                                              suppress_health_check=[HealthCheck.too_slow])
test_verify_job_model = VerifyJobMachine.TestCase


def test_retry_failed_in_a_shard_keeps_another_shards_failed_verdicts(tmp_path: Path) -> None:
    """Found by the machine above: ``retry_failed`` with a shard removed every failed verdict of the output file,
    another shard's included, and verified again only its own: the other shard's claims lost their verdicts."""
    world = World()
    ids = [f"c{i}" for i in range(12)]
    claims = tmp_path / "claims.jsonl"
    claims.write_text("".join(json.dumps({"id": cid, "claim": f"claim {cid}"}) + "\n" for cid in ids))
    for cid in ids:
        world.outcome[f"claim {cid}"] = FAILED
    out = tmp_path / "verdicts.jsonl"
    for i in (0, 1):
        run_verify_job(world, claims, out, shard=(i, 2), progress=False, echo=lambda _: None)  # type: ignore[arg-type]
    other = {cid for cid in ids if shard_of(cid, 2) == 1}
    assert other and len(other) < len(ids)
    for cid in ids:
        world.outcome[f"claim {cid}"] = "SUPPORTED"
    summary = run_verify_job(world, claims, out, shard=(0, 2), retry_failed=True, progress=False,  # type: ignore[arg-type]
                             echo=lambda _: None)
    assert summary["retried_failed"] == summary["verified"] == len(ids) - len(other)
    got = {r["id"]: label_of(r) for r in read_verdicts(out)[0]}
    assert got == {cid: FAILED if cid in other else "SUPPORTED" for cid in ids}
