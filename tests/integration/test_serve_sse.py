"""A streamed ask over ``isorag serve`` (issue 28): server-sent events in pipeline order (pattern, subgraphs, the
answer's tokens as the LLM sends them, the final answer with its timings and KG version); a stage that fails mid-way
is an ``error`` event (a problem) before the final answer; the first event comes long before the answer."""

from __future__ import annotations

import json
import time
from typing import Any, Iterator

import httpx
import pytest

from helpers.llm_server import Refusal, Reply, ScriptedLLMServer
from helpers.serve import DIRECTED_BY_HEAT, films_server


@pytest.fixture(scope="module")
def llm_srv() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def served(neo4j_uri: str, milvus_uri: str, embedder: Any, llm_srv: ScriptedLLMServer,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from engine.llm import LLMConfig, OpenAILLM

    llm = OpenAILLM(LLMConfig(base_url=llm_srv.base_url, model="test", max_retries=0))
    yield from films_server(neo4j_uri, milvus_uri, embedder, tmp_path_factory.mktemp("serve_sse"), llm=llm)


def stream(served: Any, body: dict[str, Any]) -> list[tuple[float, str, int, Any]]:
    """(seconds since the request, event, id, data) of each event of a streamed ask."""
    out = []
    t0 = time.perf_counter()
    with httpx.stream("POST", f"{served.url}/v1/kgs/{served.kg}/ask", json={**body, "stream": True}, timeout=60,
                      headers={"Authorization": f"Bearer {served.keys['read']}"}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        block: dict[str, str] = {}
        for line in r.iter_lines():
            if line:
                name, _, value = line.partition(": ")
                block[name] = block.get(name, "") + value
                continue
            out.append((time.perf_counter() - t0, block["event"], int(block["id"]), json.loads(block["data"])))
            block = {}
    return out


def test_events_come_in_pipeline_order(served: Any, llm_srv: ScriptedLLMServer) -> None:
    llm_srv.push(Reply("Heat was directed by Michael Mann .", token_delay=0.15))
    events = stream(served, {"question": "who directed Heat", "pattern": DIRECTED_BY_HEAT})
    kinds = [e[1] for e in events]
    assert kinds[:2] == ["pattern", "subgraphs"] and kinds[-1] == "answer"
    assert set(kinds[2:-1]) == {"token"} and len(kinds[2:-1]) >= 5
    assert [e[2] for e in events] == list(range(1, len(events) + 1))
    assert events[0][3]["pattern"] == DIRECTED_BY_HEAT
    assert events[1][3]["subgraphs"][0]["mapping"]["UNKNOWN 1"]["name"] == "Michael Mann"
    answer = events[-1][3]["answer"]
    assert "".join(e[3]["text"] for e in events if e[1] == "token") == answer["text"]
    assert answer["answer_source"] == "llm" and answer["kg_version"] >= 1 and answer["timings"]["llm_answer"] > 0
    # the evidence is on screen before the LLM has finished: first event within a third of the answer's time
    assert events[0][0] < events[-1][0] / 3, [round(e[0], 3) for e in events]


def test_a_failed_stage_is_an_error_event_then_the_answer(served: Any, llm_srv: ScriptedLLMServer) -> None:
    llm_srv.push(Refusal())
    events = stream(served, {"question": "who directed Heat", "pattern": DIRECTED_BY_HEAT})
    kinds = [e[1] for e in events]
    assert kinds[:2] == ["pattern", "subgraphs"] and kinds[-2:] == ["error", "answer"]
    problem, answer = events[-2][3], events[-1][3]["answer"]
    assert problem["error_type"] == answer["error_type"] == "LLMError" and problem["status"] == 502
    assert problem["where"] == "ask: llm_answer" == f"ask: {answer['failed_stage']}"


def test_refusals_before_the_stream_are_plain_problems(served: Any) -> None:
    r = httpx.post(f"{served.url}/v1/kgs/{served.kg}/ask", json={"question": "x", "stream": True,
                   "pattern": {"triples": [["a"]]}}, headers={"Authorization": f"Bearer {served.keys['read']}"})
    assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json"
    r = httpx.post(f"{served.url}/v1/kgs/{served.kg}/ask", json={"question": "x", "stream": True})
    assert r.status_code == 401
