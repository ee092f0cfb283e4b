"""``isorag serve``'s API on the real stores (issue 28): a server in a thread of this process over a small films KG;
answers, retrieval, verdicts, entity search, paged neighbourhoods, change sets, checks, problems, OpenAPI and the
engine pool (one engine per KG and process, reused)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from helpers.serve import DIRECTED_BY_HEAT, films_server


@pytest.fixture(scope="module")
def served(neo4j_uri: str, milvus_uri: str, embedder: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    yield from films_server(neo4j_uri, milvus_uri, embedder, tmp_path_factory.mktemp("serve_api"))


def test_healthz_says_only_ok_and_openapi_lists_the_routes(served: Any) -> None:
    r = served.get("/healthz")
    assert r.status_code == 200 and r.text == "ok"
    spec = served.get("/openapi.json").json()
    for path in ("/v1/kgs", "/v1/kgs/{kg}/ask", "/v1/kgs/{kg}/retrieve", "/v1/kgs/{kg}/verify", "/v1/kgs/{kg}/jobs",
                 "/v1/kgs/{kg}/jobs/{job_id}", "/v1/kgs/{kg}/apply", "/v1/kgs/{kg}/check", "/v1/kgs/{kg}/entities",
                 "/v1/kgs/{kg}/entities/{eid}/neighbourhood", "/v1/kgs/{kg}/stats", "/metrics"):
        assert path in spec["paths"], path
    assert "HTTPBearer" in json.dumps(spec["components"])
    assert served.get("/docs").status_code == 200


def test_kgs_stats_and_version(served: Any) -> None:
    listed = served.get("/v1/kgs", served.keys["read"]).json()["kgs"]
    assert [k["kg"] for k in listed] == [served.kg]  # only the KGs of the key
    assert served.kg in [k["kg"] for k in served.get("/v1/kgs", served.keys["all"]).json()["kgs"]]
    st = served.get(f"/v1/kgs/{served.kg}/stats", served.keys["read"]).json()
    assert st["agree"] and st["neo4j"]["triples"] == 15 and st["version"]["seq"] >= 1
    assert served.get(f"/v1/kgs/{served.kg}/version", served.keys["read"]).json()["seq"] == st["version"]["seq"]


def test_ask_with_a_pattern_gives_the_answer_with_its_evidence(served: Any) -> None:
    r = served.post(f"/v1/kgs/{served.kg}/ask", served.keys["read"],
                    json={"question": "who directed Heat", "pattern": DIRECTED_BY_HEAT})
    assert r.status_code == 200, r.text
    a = r.json()
    assert [x["name"] for x in a["answers"]][:1] == ["Michael Mann"] and "Michael Mann" in a["text"]
    sg = a["subgraphs"][0]
    assert sg["triples"][0]["relation"] == "directed_by" and isinstance(sg["mapping"]["UNKNOWN 1"]["eid"], str)
    # the GSD is the sum of the per-node and per-edge distances the explorer draws
    assert sum(sg["node_distances"].values()) + sum(sg["edge_distances"].values()) == pytest.approx(sg["gsd"])
    assert a["kg_version"] >= 1 and a["timings"]["total"] > 0 and r.headers["x-isorag-worker"]


def test_retrieve_and_verify(served: Any) -> None:
    res = served.post(f"/v1/kgs/{served.kg}/retrieve", served.keys["read"],
                      json={"pattern": {"triples": [["UNKNOWN film 1", "starred_actors", "Al Pacino"]]},
                            "k": 10}).json()
    exact = {a["name"] for a in res["answers"] if a["gsd"] < 1e-6}
    assert exact == {"Heat", "The Insider", "Scarface", "Carlito's Way"}
    assert res["exact"] is True and res["subgraphs"][0]["gsd"] == pytest.approx(0.0, abs=1e-6)
    v = served.post(f"/v1/kgs/{served.kg}/verify", served.keys["read"],
                    json={"claim": "Heat was directed by Michael Mann",
                          "pattern": {"triples": [["Heat", "directed_by", "Michael Mann"]]}}).json()
    assert v["label"] == "SUPPORTED" and v["method"] == "rule"
    v = served.post(f"/v1/kgs/{served.kg}/verify", served.keys["read"],
                    json={"claim": "Heat was directed by Ridley Scott",
                          "pattern": {"triples": [["Heat", "directed_by", "Ridley Scott"]]}}).json()
    assert v["label"] != "SUPPORTED"


def test_entity_search_ranks_and_pages(served: Any) -> None:
    url = f"/v1/kgs/{served.kg}/entities"
    got = served.get(url, served.keys["read"], params={"q": "al"}).json()
    names = [e["name"] for e in got["entities"]]
    assert names[:2] == ["Alien", "Al Pacino"]  # names that start with the text first, shorter first
    assert next(e for e in got["entities"] if e["name"] == "Al Pacino")["degree"] == 4
    first = served.get(url, served.keys["read"], params={"q": "a", "limit": 3}).json()
    second = served.get(url, served.keys["read"], params={"q": "a", "limit": 3, "offset": 3}).json()
    assert first["next_offset"] == 3
    assert not {e["eid"] for e in first["entities"]} & {e["eid"] for e in second["entities"]}
    assert served.get(url, served.keys["read"], params={"q": "zzzz"}).json() == {"entities": [], "next_offset": None}


def test_neighbourhood_pages_cover_every_triple_once(served: Any) -> None:
    mann = served.get(f"/v1/kgs/{served.kg}/entities", served.keys["read"], params={"q": "Michael Mann"}).json()
    eid = mann["entities"][0]["eid"]
    seen: list[tuple[str, str, str]] = []
    offset: int | None = 0
    while offset is not None:
        page = served.get(f"/v1/kgs/{served.kg}/entities/{eid}/neighbourhood", served.keys["read"],
                          params={"limit": 3, "offset": offset}).json()
        assert page["entity"]["name"] == "Michael Mann" and page["entity"]["degree"] == 4
        seen += [(t["head"], t["relation"], t["tail"]) for t in page["triples"]]
        offset = page["next_offset"]
    assert sorted(seen) == sorted((f, "directed_by", "Michael Mann") for f in ("Heat", "Collateral", "Thief",
                                                                               "The Insider"))
    r = served.get(f"/v1/kgs/{served.kg}/entities/12345/neighbourhood", served.keys["read"])
    assert r.status_code == 422 and r.json()["error_type"] == "InputError"


def test_problems_carry_the_engine_error_type_and_where(served: Any) -> None:
    r = served.post("/v1/kgs/no_such_kg_here/ask", served.keys["all"],
                    json={"question": "x", "pattern": DIRECTED_BY_HEAT})
    assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json"
    p = r.json()
    assert p["error_type"] == "KGNotFoundError" and p["where"] == "POST /v1/kgs/{kg}/ask"
    assert "no_such_kg_here" in p["detail"]
    r = served.post(f"/v1/kgs/{served.kg}/ask", served.keys["read"], json={"question": "x", "pattern": {"triples": []}})
    assert r.status_code == 422 and r.json()["error_type"].startswith("Pattern")
    r = served.post(f"/v1/kgs/{served.kg}/ask", served.keys["read"], json={"question": "who directed Heat"})
    assert r.status_code in (400, 422) and r.json()["where"].startswith("ask: ")  # no LLM, no generator
    r = served.post(f"/v1/kgs/{served.kg}/ask", served.keys["read"], json={"question": "x", "bogus": 1})
    assert r.status_code == 422 and r.json()["error_type"] == "InputError" and "bogus" in r.json()["detail"]
    r = served.post(f"/v1/kgs/{served.kg}/ask", served.keys["read"], content=b"{not json",
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json"


def test_apply_is_seen_by_the_next_request_and_check_needs_admin(served: Any, tmp_path: Path) -> None:
    before = served.get(f"/v1/kgs/{served.kg}/version", served.keys["read"]).json()["seq"]
    change = json.dumps({"op": "add", "head": "Miami Vice", "relation": "directed_by", "tail": "Michael Mann"})
    r = served.post(f"/v1/kgs/{served.kg}/apply", served.keys["write"], content=change + "\n")
    assert r.status_code == 200, r.text
    ans = served.post(f"/v1/kgs/{served.kg}/retrieve", served.keys["read"],
                      json={"pattern": {"triples": [["UNKNOWN 1", "directed_by", "Michael Mann"]]}, "k": 10}).json()
    assert "Miami Vice" in {a["name"] for a in ans["answers"]} and ans["kg_version"] == before + 1
    bad = served.post(f"/v1/kgs/{served.kg}/apply", served.keys["write"], content='{"op": "explode"}\n')
    assert bad.status_code == 422
    assert served.get(f"/v1/kgs/{served.kg}/version", served.keys["read"]).json()["seq"] == before + 1
    assert served.post(f"/v1/kgs/{served.kg}/check", served.keys["write"], json={}).status_code == 403
    chk = served.post(f"/v1/kgs/{served.kg}/check", served.keys["admin"], json={"repair": False})
    assert chk.status_code == 200 and chk.json()["ok"] is True


def test_one_engine_per_kg_and_process(served: Any) -> None:
    pool = served.service.pool
    first = pool.get(served.kg)
    for _ in range(3):
        served.post(f"/v1/kgs/{served.kg}/retrieve", served.keys["read"], json={"pattern": DIRECTED_BY_HEAT})
    assert pool.get(served.kg) is first
