"""Limits of ``isorag serve`` (issue 28): request size (declared or streamed), question length, k, page size,
request time, and slow clients (a slow body is cut off; a half-sent request holds up no one else)."""

from __future__ import annotations

import socket
import time
from typing import Any, Iterator

import httpx
import pytest

from helpers.serve import DIRECTED_BY_HEAT, films_server


@pytest.fixture(scope="module")
def served(neo4j_uri: str, milvus_uri: str, embedder: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from engine.service.settings import Limits

    lim = Limits(body_bytes=4_096, upload_bytes=8_192, question_chars=200, k=20, page=50, body_timeout_s=1.5)
    yield from films_server(neo4j_uri, milvus_uri, embedder, tmp_path_factory.mktemp("serve_limits"), limits=lim)


def _problem(r: httpx.Response, status: int, limit: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = r.json()
    if limit:
        assert body.get("limit") == limit, body
    return body


def test_oversized_bodies(served: Any) -> None:
    url = f"/v1/kgs/{served.kg}/ask"
    big = {"question": "x", "pattern": DIRECTED_BY_HEAT, "pad": "y" * 5_000}
    _problem(served.post(url, served.keys["read"], json=big), 413, "body_bytes")

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"question": "'
        for _ in range(10):
            yield b"z" * 1_000
        yield b'"}'

    _problem(served.post(url, served.keys["read"], content=chunks(), headers={"Content-Type": "application/json"}),
             413, "body_bytes")
    claims = "".join(f'{{"id": "{i}", "claim": "Heat was directed by Michael Mann"}}\n' for i in range(200))
    _problem(served.post(f"/v1/kgs/{served.kg}/jobs", served.keys["write"], content=claims), 413, "body_bytes")


def test_question_k_and_page_limits(served: Any) -> None:
    key = served.keys["read"]
    _problem(served.post(f"/v1/kgs/{served.kg}/ask", key, json={"question": "q" * 201, "pattern": DIRECTED_BY_HEAT}),
             413, "question_chars")
    assert served.post(f"/v1/kgs/{served.kg}/ask", key,
                       json={"question": "q" * 200, "pattern": DIRECTED_BY_HEAT}).status_code == 200
    _problem(served.post(f"/v1/kgs/{served.kg}/retrieve", key, json={"pattern": DIRECTED_BY_HEAT, "k": 21}), 413, "k")
    _problem(served.get(f"/v1/kgs/{served.kg}/entities", key, params={"q": "a", "limit": 51}), 413, "page")
    _problem(served.get(f"/v1/kgs/{served.kg}/entities", key, params={"q": "x" * 201}), 413, "question_chars")


def test_request_time_limit(served: Any) -> None:
    lim = served.service.settings.limits
    object.__setattr__(lim, "timeout_s", 0.001)  # this server only: every engine call is now too slow
    try:
        p = _problem(served.post(f"/v1/kgs/{served.kg}/retrieve", served.keys["read"],
                                 json={"pattern": DIRECTED_BY_HEAT}), 504)
        assert p["error_type"] == "DeadlineExceeded"
    finally:
        object.__setattr__(lim, "timeout_s", 60.0)
    assert served.post(f"/v1/kgs/{served.kg}/retrieve", served.keys["read"],
                       json={"pattern": DIRECTED_BY_HEAT}).status_code == 200


def test_slow_clients_are_cut_off_and_hold_up_no_one(served: Any) -> None:
    port = int(served.url.rsplit(":", 1)[1])
    half = socket.create_connection(("127.0.0.1", port))  # headers never finished
    half.sendall(b"POST /v1/kgs/x/ask HTTP/1.1\r\nHost: x\r\n")
    slow = socket.create_connection(("127.0.0.1", port))  # a body sent a byte at a time, too slowly
    body = b'{"question": "who directed Heat"}'
    slow.sendall(b"POST /v1/kgs/" + served.kg.encode() + b"/ask HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                 + served.keys["read"].encode() + b"\r\nContent-Type: application/json\r\nContent-Length: "
                 + str(len(body)).encode() + b"\r\n\r\n")
    t0 = time.monotonic()
    try:
        # others are served meanwhile
        assert served.get("/healthz").text == "ok"
        assert served.post(f"/v1/kgs/{served.kg}/retrieve", served.keys["read"],
                           json={"pattern": DIRECTED_BY_HEAT}).status_code == 200
        slow.settimeout(10)
        reply = b""
        for b in body:
            try:
                slow.sendall(bytes([b]))
            except OSError:
                break
            time.sleep(0.3)
            if time.monotonic() - t0 > 3:
                break
        while b"\r\n\r\n" not in reply:
            chunk = slow.recv(4096)
            if not chunk:
                break
            reply += chunk
        assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
        assert time.monotonic() - t0 < 8
    finally:
        half.close()
        slow.close()
