"""The FastAPI application of ``isorag serve``: :func:`create_app` builds it from :class:`ServiceSettings`.

Around the routes (:mod:`engine.service.routes`): a guard on request bodies (size, and the time a client may take
to send one), per-request metrics and the worker's id in ``X-Isorag-Worker``, problems for every error, CORS only
for the origins listed, ``/healthz``, ``/metrics``, and the evidence explorer (static files) at ``/``.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles

from engine._errors import IsoragError
from engine.service.core import Service
from engine.service.engines import EnginePool
from engine.service.problems import Problem, status_of
from engine.service.routes import EidJSONResponse, make_router, problem_response
from engine.service.settings import ServiceSettings

__all__ = ["create_app", "create_app_from_env"]

STATIC = Path(__file__).resolve().parent / "static"
#: routes whose body is a file (a change set, a claims file): the upload limit, not the body limit
_UPLOADS = ("/apply", "/jobs")
_CSP = ("default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; object-src 'none'; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
THREADS = 32

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class _BodyTooLarge(Exception):
    def __init__(self, limit: int) -> None:
        self.limit = limit


class _BodyTimeout(Exception):
    pass


class Guards:
    """Pure ASGI middleware: body size and time limits, the request's metrics, the worker's id."""

    def __init__(self, app: Any, svc: Service) -> None:
        self.app, self.svc = app, svc

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        lim = self.svc.settings.limits
        path: str = scope.get("path", "")
        limit = lim.upload_bytes if path.endswith(_UPLOADS) else lim.body_bytes
        declared = dict(scope.get("headers") or []).get(b"content-length")
        t0 = time.perf_counter()
        status = [0]
        body = _Limited(receive, limit, lim.body_timeout_s)
        replaced = [False]

        async def send_(message: Message) -> None:
            if body.error is not None and not replaced[0] and message["type"] == "http.response.start":
                # the body broke a limit: whatever the route made of that (FastAPI answers 400 for a body it
                # could not read), the client is told which limit
                replaced[0] = True
                status_, detail = body.error
                await _send_problem(send_, scope, status_, detail, "body_bytes" if status_ == 413 else None)
                return
            if replaced[0] and message.get("type") in ("http.response.start", "http.response.body") \
                    and not message.get("_isorag"):
                return
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                headers = list(message.get("headers") or [])
                headers.append((b"x-isorag-worker", str(os.getpid()).encode()))
                if not path.startswith(("/v1", "/metrics", "/healthz")):
                    headers.append((b"content-security-policy", _CSP.encode()))
                headers += [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer")]
                message["headers"] = headers
                self.svc.metrics.observe("isorag_request_seconds", {"route": _route(scope)}, time.perf_counter() - t0)
            message.pop("_isorag", None)
            await send(message)

        if declared is not None and declared.isdigit() and int(declared) > limit:
            replaced[0] = True
            await _send_problem(send_, scope, 413, f"a body of {int(declared):,} bytes; the limit is {limit:,}",
                                "body_bytes")
        else:
            await self.app(scope, body, send_)
        self.svc.metrics.inc("isorag_requests_total", {"route": _route(scope), "status": str(status[0])})
        self.svc.metrics.flush()


def _route(scope: Scope) -> str:
    route = scope.get("route")
    return getattr(route, "path", None) or ("static" if scope.get("path", "").startswith("/static") else "other")


class _Limited:
    """``receive`` that raises past ``limit`` bytes of body, or when the client takes over ``timeout_s`` to send it;
    once the body is in, a receive (waiting for the client to go away) has no deadline."""

    def __init__(self, receive: Receive, limit: int, timeout_s: float) -> None:
        self.receive, self.limit = receive, limit
        self.deadline = time.monotonic() + timeout_s
        self.seen, self.done = 0, False
        self.timeout_s = timeout_s
        #: (status, detail) once a limit is broken
        self.error: tuple[int, str] | None = None

    async def __call__(self) -> Message:
        if self.done:
            return await self.receive()
        try:
            message = await asyncio.wait_for(self.receive(), max(self.deadline - time.monotonic(), 0.001))
        except (asyncio.TimeoutError, TimeoutError):
            self.error = (408, f"the body did not arrive within {self.timeout_s:g} s")
            raise _BodyTimeout() from None
        if message["type"] == "http.request":
            self.seen += len(message.get("body", b""))
            if self.seen > self.limit:
                self.error = (413, f"the body is over the limit of {self.limit:,} bytes")
                raise _BodyTooLarge(self.limit)
            self.done = not message.get("more_body")
        return message


async def _send_problem(send: Send, scope: Scope, status: int, detail: str, limit: str | None) -> None:
    from engine.service.problems import problem_body

    extra = {"limit": limit} if limit else {}
    kind = "LimitExceeded" if status == 413 else "RequestTimeout"
    body = problem_body(status, kind, detail, "body", scope.get("path", ""), **extra)
    await send({"type": "http.response.start", "status": status, "_isorag": True,
                "headers": [(b"content-type", b"application/problem+json"), (b"connection", b"close"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body, "_isorag": True})


def _handlers(app: FastAPI, svc: Service) -> None:
    def where(request: Request) -> str:
        route = request.scope.get("route")
        return f"{request.method} {getattr(route, 'path', request.url.path)}"

    def answer(request: Request, status: int, error_type: str, detail: str, at: str = "",
               headers: dict[str, str] | None = None, **extra: Any) -> Response:
        svc.metrics.inc("isorag_errors_total", {"type": error_type, "status": str(status)})
        return problem_response(status, error_type, detail, at or where(request), request.url.path, headers, **extra)

    @app.exception_handler(Problem)
    async def on_problem(request: Request, e: Problem) -> Response:
        extra = dict(e.extra)
        headers = extra.pop("headers", None)
        return answer(request, e.status, e.error_type, e.detail, e.where, headers, **extra)

    @app.exception_handler(IsoragError)
    async def on_engine(request: Request, e: IsoragError) -> Response:
        return answer(request, status_of(e), type(e).__name__, str(e))

    @app.exception_handler(RequestValidationError)
    async def on_invalid(request: Request, e: RequestValidationError) -> Response:
        errs = [f"{'.'.join(str(x) for x in err.get('loc', ()))}: {err.get('msg')}" for err in e.errors()[:5]]
        return answer(request, 422, "InputError", "; ".join(errs) or "invalid request")

    @app.exception_handler(_BodyTooLarge)
    async def on_large(request: Request, e: _BodyTooLarge) -> Response:
        return answer(request, 413, "LimitExceeded", f"the body is over the limit of {e.limit:,} bytes",
                      limit="body_bytes")

    @app.exception_handler(_BodyTimeout)
    async def on_slow(request: Request, e: _BodyTimeout) -> Response:
        return answer(request, 408, "RequestTimeout", f"the body did not arrive within "
                      f"{svc.settings.limits.body_timeout_s:g} s", headers={"Connection": "close"})

    @app.exception_handler(Exception)
    async def on_bug(request: Request, e: Exception) -> Response:
        return answer(request, 500, type(e).__name__, "internal error (a bug in isorag): see the server's log")


def _lifespan(svc: Service) -> Callable[[FastAPI], Any]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(THREADS, thread_name_prefix="isorag"))
        threading.Thread(target=svc.jobs.resume_stale, daemon=True).start()
        yield
        svc.metrics.flush(force=True)
        svc.pool.close()

    return lifespan


def create_app(settings: ServiceSettings | None = None, *, pool: EnginePool | None = None) -> FastAPI:
    """The service's ASGI application (one per worker process)."""
    settings = settings or ServiceSettings.from_env()
    svc = Service(settings, pool)
    app = FastAPI(title="isorag", version=_version(), lifespan=_lifespan(svc), default_response_class=EidJSONResponse,
                  description="Exact top-k subgraph retrieval over Neo4j + Milvus, answers and verdicts with their "
                              "evidence. Send an API key as 'Authorization: Bearer KEY'.")
    app.state.service = svc
    _handlers(app, svc)
    app.include_router(make_router(svc))

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> PlainTextResponse:
        return PlainTextResponse("ok")

    @app.get("/metrics", summary="Prometheus metrics of every worker (needs a key unless --no-auth)")
    async def metrics(request: Request) -> PlainTextResponse:
        svc.guard.principal(request)
        text = await asyncio.to_thread(svc.scrape)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        return Response(status_code=204)

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    if settings.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins), allow_credentials=False,
                           allow_methods=["GET", "POST"], allow_headers=["Authorization", "X-API-Key", "Content-Type"])
    app.add_middleware(Guards, svc=svc)
    return app


def create_app_from_env() -> FastAPI:
    """The factory each worker of ``isorag serve --workers N`` calls (settings from ``ISORAG_SERVE_SETTINGS``)."""
    return create_app(ServiceSettings.from_env())


def _version() -> str:
    from engine import __version__

    return __version__

