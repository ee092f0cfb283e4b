"""Who may call ``isorag serve`` (issue 28): no key, a wrong key, a revoked key, a key of another KG, a read key on a
write route; hostile KG names and patterns are refused with a problem, never a 500; keys never reach the log."""

from __future__ import annotations

import json
import logging
from typing import Any, Iterator

import pytest

from helpers.serve import DIRECTED_BY_HEAT, films_server


@pytest.fixture(scope="module")
def served(neo4j_uri: str, milvus_uri: str, embedder: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    yield from films_server(neo4j_uri, milvus_uri, embedder, tmp_path_factory.mktemp("serve_auth"))


def _ask(served: Any, key: str | None, kg: str | None = None, **headers: str) -> Any:
    return served.post(f"/v1/kgs/{kg or served.kg}/retrieve", key, json={"pattern": DIRECTED_BY_HEAT},
                       headers=headers or None)


def test_no_key_and_wrong_keys_are_401(served: Any) -> None:
    for r in (_ask(served, None), served.get("/v1/kgs"), served.get("/metrics")):
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
        assert r.headers["content-type"] == "application/problem+json" and "no API key" in r.json()["detail"]
    good = served.keys["read"]
    for wrong in (good[:-1] + ("A" if good[-1] != "A" else "B"), "isorag_00000000_" + "x" * 43, "secret"):
        r = _ask(served, wrong)
        assert r.status_code == 401, wrong
        assert wrong not in r.text
    assert _ask(served, None, **{"X-API-Key": good}).status_code == 200
    assert _ask(served, None, Authorization=f"Basic {good}").status_code == 401


def test_revoked_key_is_refused_at_once(served: Any) -> None:
    key, entry = served.store.create([served.kg], "read")
    assert _ask(served, key).status_code == 200
    served.store.revoke(entry.id)  # another process (isorag keys revoke) writes the file; the server rereads it
    r = _ask(served, key)
    assert r.status_code == 401 and "revoked" in r.json()["detail"]


def test_scope_and_role(served: Any) -> None:
    other, _ = served.store.create(["some_other_kg"], "admin")
    r = _ask(served, other)
    assert r.status_code == 403 and "not for KG" in r.json()["detail"]
    assert served.get("/v1/kgs", other).json()["kgs"] == []
    change = '{"op": "add", "head": "Heat", "relation": "directed_by", "tail": "Nobody"}\n'
    r = served.post(f"/v1/kgs/{served.kg}/apply", served.keys["read"], content=change)
    assert r.status_code == 403 and "needs 'write'" in r.json()["detail"]
    r = served.post(f"/v1/kgs/{served.kg}/jobs", served.keys["read"], content='{"id": "1", "claim": "x"}\n')
    assert r.status_code == 403
    assert served.post(f"/v1/kgs/{served.kg}/check", served.keys["write"], json={}).status_code == 403
    # a key for every KG still has its role
    assert served.post(f"/v1/kgs/{served.kg}/apply", served.keys["all"], content=change).status_code == 403
    assert served.get("/v1/whoami", served.keys["write"]).json()["role"] == "write"


@pytest.mark.parametrize("kg", ["a`b", "x__y", "_x", "kg_", "1kg", "k" * 200, "k%00g", "k%27%29%20MATCH%20(n)%20DETACH",
                                "..%2F..%2Fetc", "kg%E2%80%AE"])
def test_hostile_kg_names_are_refused(served: Any, kg: str) -> None:
    r = _ask(served, served.keys["all"], kg=kg)
    assert r.status_code in (400, 403, 404), r.text
    if r.status_code == 400:
        assert r.json()["error_type"] == "ConfigError" and "invalid KG name" in r.json()["detail"]


@pytest.mark.parametrize("pattern", [
    {"triples": [["Heat", "directed_by`]->() DETACH DELETE n //", "UNKNOWN 1"]]},
    {"triples": [["Heat", "\\u0060 MATCH (n) DETACH DELETE n", "UNKNOWN 1"]]},
    {"triples": [["' OR 1=1 --", "directed_by", "UNKNOWN 1"]]},
    {"triples": [["UNKNOWN 1", "UNKNOWN relation 1", "UNKNOWN 2"]]},
    {"triples": [["Heat", "directed_by", "UNKNOWN 1"]] * 40},
    {"triples": [["\x00", "directed_by", "UNKNOWN 1"]]},
    {"triples": "MATCH (n) RETURN n"},
    ["not", "a", "pattern"],
    "{\"triples\": [[",
])
def test_hostile_patterns_get_a_problem_or_an_answer_never_a_500(served: Any, pattern: Any) -> None:
    before = served.owner.stats()["neo4j"]
    r = served.post(f"/v1/kgs/{served.kg}/retrieve", served.keys["read"], json={"pattern": pattern})
    assert r.status_code in (200, 413, 422), r.text
    if r.status_code != 200:
        assert r.headers["content-type"] == "application/problem+json"
    assert served.owner.stats()["neo4j"] == before


def test_keys_never_reach_the_log(served: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    key = served.keys["read"]
    _ask(served, key)
    _ask(served, key + "x")
    served.get(f"/v1/kgs/{served.kg}/entities", key, params={"q": "heat"})
    assert key not in caplog.text and key.split("_", 2)[2] not in caplog.text
    assert key not in json.dumps(served.get("/openapi.json").json())
