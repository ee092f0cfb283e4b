"""``isorag serve --workers 2`` (issue 28): the workers share nothing mutable but the stores and the files made for
it. A change set applied through one worker is seen by the next request on every worker (the KG's version); a job
started on one worker reports its progress on any; a key revoked is refused by every worker; /metrics adds up the
workers."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Callable

import httpx

from helpers.kg import unique_kg
from helpers.serve import ProcessServer, claims, load_films, server_env


def each_worker(srv: Any, call: Callable[[], httpx.Response], workers: int = 2,
                tries: int = 400) -> dict[str, httpx.Response]:
    """One response from each worker (new connections until every worker has answered one)."""
    seen: dict[str, httpx.Response] = {}
    for _ in range(tries):
        r = call()
        seen.setdefault(r.headers["x-isorag-worker"], r)
        if len(seen) == workers:
            return seen
    raise AssertionError(f"only workers {sorted(seen)} answered {tries} requests")


def test_two_workers_share_the_kg_version_jobs_and_keys(neo4j_uri: str, milvus_uri: str, make_engine: Any,
                                                        tmp_path: Path) -> None:
    from engine.service.keys import KeyStore

    eng = make_engine(kg=unique_kg("srvwk"), llm=False)
    load_films(eng, tmp_path)
    store = KeyStore(tmp_path / "keys.json")
    key, _ = store.create([eng.kg], "write")
    doomed, doomed_entry = store.create([eng.kg], "read")
    env = server_env(neo4j_uri, milvus_uri, tmp_path / "keys.json")
    args = ["--workers", "2", "--state-dir", str(tmp_path / "state"), "--no-llm", "--log-level", "warning",
            "--job-concurrency", "1"]
    pattern = {"triples": [["UNKNOWN 1", "directed_by", "Michael Mann"]]}
    with ProcessServer(args, env, tmp_path / "serve.log") as srv:
        def retrieve() -> httpx.Response:
            return srv.post(f"/v1/kgs/{eng.kg}/retrieve", key, json={"pattern": pattern, "k": 10})

        first = each_worker(srv, retrieve)
        v0 = {r.json()["kg_version"] for r in first.values()}
        assert len(v0) == 1
        change = json.dumps({"op": "add", "head": "Miami Vice", "relation": "directed_by", "tail": "Michael Mann"})
        applied = srv.post(f"/v1/kgs/{eng.kg}/apply", key, content=change + "\n")
        assert applied.status_code == 200, applied.text
        for _ in range(12):  # every following request, on whichever worker, sees the change set
            r = retrieve().json()
            assert r["kg_version"] == applied.json()["version"] == v0.copy().pop() + 1
            assert "Miami Vice" in {a["name"] for a in r["answers"]}
        after = each_worker(srv, retrieve)
        assert {r.json()["kg_version"] for r in after.values()} == {applied.json()["version"]}

        job = srv.post(f"/v1/kgs/{eng.kg}/jobs", key, content=claims(60))
        assert job.status_code == 202
        url = f"/v1/kgs/{eng.kg}/jobs/{job.json()['id']}"
        views = each_worker(srv, lambda: srv.get(url, key))
        assert {r.json()["claims"] for r in views.values()} == {60}
        end = time.monotonic() + 120
        while srv.get(url, key).json()["status"] != "done" and time.monotonic() < end:
            time.sleep(0.2)
        finals = each_worker(srv, lambda: srv.get(url, key))
        assert {(r.json()["status"], r.json()["done"]) for r in finals.values()} == {("done", 60)}

        each_worker(srv, lambda: srv.get("/v1/whoami", doomed))
        store.revoke(doomed_entry.id)
        refused = each_worker(srv, lambda: srv.get("/v1/whoami", doomed))
        assert {r.status_code for r in refused.values()} == {401}

        time.sleep(2.5)  # a worker writes its counts for the others every 2 s
        text = srv.get("/metrics", key).text
        served = sum(float(v) for v in re.findall(r'^isorag_requests_total\{route="/v1/kgs/\{kg\}/retrieve",'
                                                  r'status="200"\} (\S+)$', text, re.M))
        assert served >= 12 + len(first) + len(after)
    log = (tmp_path / "serve.log").read_text()
    assert key not in log and doomed not in log
