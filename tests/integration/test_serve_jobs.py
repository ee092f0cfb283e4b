"""Verification jobs over ``isorag serve`` (issue 28): a claims file sent over HTTP, its progress, its results as JSON
Lines; and a job whose server is killed (SIGKILL, every worker) finishes after a restart, each claim once."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from helpers.kg import unique_kg
from helpers.serve import ProcessServer, claims, films_server, load_films, server_env

def wait_job(srv: Any, kg: str, key: str, job_id: str, until: Any, timeout: float = 120) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        job: dict[str, Any] = srv.get(f"/v1/kgs/{kg}/jobs/{job_id}", key).json()
        if until(job):
            return job
        time.sleep(0.1)
    raise TimeoutError(f"job {job_id}: {job}")


@pytest.fixture(scope="module")
def served(neo4j_uri: str, milvus_uri: str, embedder: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    yield from films_server(neo4j_uri, milvus_uri, embedder, tmp_path_factory.mktemp("serve_jobs"))


def test_a_job_runs_in_the_background_and_gives_its_verdicts(served: Any) -> None:
    r = served.post(f"/v1/kgs/{served.kg}/jobs", served.keys["write"], content=claims(12) + "not json\n")
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["claims"] == 12 and job["malformed"] == 1 and job["status"] in ("queued", "running", "done")
    done = wait_job(served, served.kg, served.keys["read"], job["id"], lambda j: j["status"] == "done")
    assert done["done"] == 12 and done["progress"] == 1.0 and done["summary"]["accuracy"] == 1.0
    res = served.get(f"/v1/kgs/{served.kg}/jobs/{job['id']}/results", served.keys["read"])
    assert res.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(x) for x in res.text.splitlines()]
    assert sorted(x["id"] for x in lines) == sorted(f"c{i}" for i in range(12))
    assert all(x["label"] == x["gold"] for x in lines)
    assert [j["id"] for j in served.get(f"/v1/kgs/{served.kg}/jobs", served.keys["read"]).json()["jobs"]] == [job["id"]]


def test_job_refusals(served: Any) -> None:
    url = f"/v1/kgs/{served.kg}/jobs"
    r = served.post(url, served.keys["write"], content="not json\n{}\n")
    assert r.status_code == 422 and "no claim to verify" in r.json()["detail"]
    assert served.post(url, served.keys["write"], content="", params={"format": "xml"}).status_code == 422
    for bad in ("../../etc/passwd", "0123456789abcdeg", "x" * 200):
        assert served.get(f"{url}/{bad}", served.keys["read"]).status_code in (404, 422)
    assert served.get(f"{url}/0123456789abcdef", served.keys["read"]).status_code == 422  # no such job


def test_a_killed_server_finishes_its_job_after_a_restart(neo4j_uri: str, milvus_uri: str, embedder: Any,
                                                          make_engine: Any, tmp_path: Path) -> None:
    from engine.service.keys import KeyStore

    eng = make_engine(kg=unique_kg("srvjob"), llm=False)
    load_films(eng, tmp_path)
    key, _ = KeyStore(tmp_path / "keys.json").create([eng.kg], "write")
    env = server_env(neo4j_uri, milvus_uri, tmp_path / "keys.json")
    args = ["--state-dir", str(tmp_path / "state"), "--job-concurrency", "1", "--no-llm", "--log-level", "warning"]
    n = 400
    srv = ProcessServer(args, env, tmp_path / "serve.log").start()
    try:
        job = srv.post(f"/v1/kgs/{eng.kg}/jobs", key, content=claims(n)).json()
        wait_job(srv, eng.kg, key, job["id"], lambda j: j["done"] >= 5)
        srv.kill()
    finally:
        srv.stop()
    out = tmp_path / "state" / "jobs" / job["id"] / "verdicts.jsonl"
    cut = out.read_bytes().count(b"\n")
    assert 5 <= cut < n, f"the job was not cut midway ({cut} of {n} claims were done)"
    srv = ProcessServer(args, env, tmp_path / "serve.log", port=srv.port).start()
    try:
        done = wait_job(srv, eng.kg, key, job["id"], lambda j: j["status"] == "done", timeout=300)
    finally:
        srv.stop()
    ids = [json.loads(x)["id"] for x in out.read_text().splitlines()]
    assert len(ids) == n and len(set(ids)) == n  # each claim once: the restart went on where the file stopped
    assert done["resumed"] == 1 and done["summary"]["verdicts"] == n and done["summary"]["already_done"] >= cut
