"""A small scriptable OpenAI-compatible server for tests (stdlib only).

``POST /v1/chat/completions`` answers from a queue of scripted responses, whole or as SSE when the request
has ``"stream": true``. Every request body is recorded, and the server counts the requests in flight.

    def test_something(llm_server):
        llm_server.status(429, retry_after=0)   # first request: 429
        llm_server.reply('{"triples": [["a", "b", "c"]]}', delay=0.1)
        llm = OpenAILLM(LLMConfig(base_url=llm_server.base_url, model="test"))
        ...
        assert llm_server.requests[-1]["messages"][0]["content"].startswith("You need to")

When the queue is empty the server answers with ``default`` (``Reply("ok")`` unless set; ``None`` means a
500 saying the script ran out). ``responder``, when set, is called with each request body instead of the
queue and returns a response.

tests/conftest.py imports the fixture, so every test can ask for ``llm_server``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = ["Raw", "Refusal", "Reply", "ScriptedLLMServer", "Status", "llm_server"]


@dataclass
class Reply:
    """A completion: ``text`` (streamed in word-sized tokens), after ``delay`` seconds; when streamed,
    ``token_delay`` seconds pass before each token."""

    text: str
    finish_reason: str = "stop"
    delay: float = 0.0
    token_delay: float = 0.0
    prompt_tokens: int = 11
    completion_tokens: int | None = None  # default: the number of streamed tokens


@dataclass
class Refusal:
    """A completion whose message has ``refusal`` set and no content (OpenAI's refusal shape)."""

    text: str = "I'm sorry, I can't help with that."
    delay: float = 0.0


@dataclass
class Status:
    """An HTTP error response (e.g. 429 with Retry-After, 500, 400)."""

    code: int
    message: str = "scripted error"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Raw:
    """Any body at all, e.g. a proxy's HTML page where JSON was expected."""

    body: bytes
    code: int = 200
    content_type: str = "application/json"
    delay: float = 0.0


Response = Reply | Refusal | Status | Raw


def _tokens(text: str) -> list[str]:
    return re.findall(r"\s*\S+|\s+", text) or [text]


class ScriptedLLMServer:
    """The server; see the module docstring. Start with :meth:`start`, stop with :meth:`stop`."""

    def __init__(self) -> None:
        self.queue: deque[Response] = deque()
        self.default: Response | None = Reply("ok")
        self.responder: Callable[[dict[str, Any]], Response] | None = None
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.active = 0
        self.max_active = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ---------------------------------------------------------------------------------------

    def push(self, *responses: Response) -> ScriptedLLMServer:
        with self._lock:
            self.queue.extend(responses)
        return self

    def reply(self, text: str, **kw: Any) -> ScriptedLLMServer:
        return self.push(Reply(text, **kw))

    def refusal(self, text: str = Refusal.text, **kw: Any) -> ScriptedLLMServer:
        return self.push(Refusal(text, **kw))

    def status(self, code: int, *, retry_after: float | str | None = None, **kw: Any) -> ScriptedLLMServer:
        headers = dict(kw.pop("headers", {}))
        if retry_after is not None:
            headers["Retry-After"] = str(retry_after)
        return self.push(Status(code, headers=headers, **kw))

    def delay(self, seconds: float, text: str = "too late") -> ScriptedLLMServer:
        """A reply that comes only after ``seconds`` (to trigger the client's timeout)."""
        return self.reply(text, delay=seconds)

    @property
    def prompts(self) -> list[str]:
        """The last user message of each request, in order."""
        return [
            next((m["content"] for m in reversed(r.get("messages", [])) if m.get("role") == "user"), "")
            for r in self.requests
        ]

    # -- lifecycle ---------------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ScriptedLLMServer:
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="llm-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in a scripted delay
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- used by the handler -----------------------------------------------------------------------------

    def _next(self, body: dict[str, Any]) -> Response:
        if self.responder is not None:
            return self.responder(body)
        with self._lock:
            if self.queue:
                return self.queue.popleft()
        return self.default if self.default is not None else Status(500, "the test script ran out")

    def _enter(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            self.active += 1
            self.max_active = max(self.max_active, self.active)

    def _leave(self) -> None:
        with self._lock:
            self.active -= 1


class _Handler(BaseHTTPRequestHandler):
    owner: ScriptedLLMServer
    _left = True  # whether this request is no longer counted in flight (True until it is entered)
    protocol_version = "HTTP/1.0"  # one request per connection: the end of a stream is the end of the socket

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _send_json(self, code: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self._write_last(data)

    def _write_last(self, data: bytes) -> None:
        """Write a response's last bytes, counting the request as done first: once they are sent the client
        may release its concurrency slot and open the next request before this thread runs again, so leaving
        after the write would count one request too many in flight."""
        self._leave_once()
        self.wfile.write(data)
        self.wfile.flush()

    def _leave_once(self) -> None:
        if not self._left:
            self._left = True
            self.owner._leave()

    def do_POST(self) -> None:  # http.server's naming
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_json(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        owner = self.owner
        owner._enter(body, {k.lower(): v for k, v in self.headers.items()})
        self._left = False
        try:
            response = owner._next(body)
            if response.delay and owner._stopping.wait(response.delay):
                return
            self._respond(body, response)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. its timeout fired)
        finally:
            self._leave_once()

    def _respond(self, body: dict[str, Any], response: Response) -> None:
        if isinstance(response, Raw):
            self.send_response(response.code)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(response.body)))
            self.end_headers()
            self._write_last(response.body)
            return
        if isinstance(response, Status):
            error = {"error": {"message": response.message, "type": "scripted", "code": str(response.code)}}
            self._send_json(response.code, error, response.headers)
            return
        completion_id = f"chatcmpl-{time.monotonic_ns()}"
        common = {"id": completion_id, "created": int(time.time()), "model": body.get("model", "test")}
        if isinstance(response, Refusal):
            text, tokens, finish = None, [], "stop"
            refusal: str | None = response.text
            prompt_tokens, completion_tokens = 5, 7
        else:
            text, tokens, finish, refusal = response.text, _tokens(response.text), response.finish_reason, None
            prompt_tokens = response.prompt_tokens
            completion_tokens = (
                len(tokens) if response.completion_tokens is None else response.completion_tokens
            )
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        if not body.get("stream"):
            message = {"role": "assistant", "content": text, "refusal": refusal}
            self._send_json(200, {
                **common,
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                "usage": usage,
            })
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()

        def event(choices: list[dict[str, Any]], **extra: Any) -> None:
            chunk = {**common, "object": "chat.completion.chunk", "choices": choices, **extra}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()

        def choice(delta: dict[str, Any], finish_reason: str | None = None) -> list[dict[str, Any]]:
            return [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]

        event(choice({"role": "assistant", "content": ""}))
        if refusal is not None:
            event(choice({"refusal": refusal}))
        for token in tokens:
            if isinstance(response, Reply) and response.token_delay:
                if self.owner._stopping.wait(response.token_delay):
                    return
            event(choice({"content": token}))
        event(choice({}, finish))
        if (body.get("stream_options") or {}).get("include_usage"):
            event([], usage=usage)
        self._write_last(b"data: [DONE]\n\n")


@pytest.fixture
def llm_server() -> Any:
    """A started :class:`ScriptedLLMServer` on 127.0.0.1 (a free port), stopped after the test."""
    with ScriptedLLMServer() as server:
        yield server
