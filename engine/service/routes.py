"""The API's routes under ``/v1``: KGs, ask (JSON or server-sent events), retrieve, verify, verification jobs,
change sets, checks, entity search and neighbourhoods. Each route checks its key (:class:`~engine.service.auth.Guard`),
then calls the engine of its KG (:class:`~engine.service.engines.EnginePool`) in a worker thread, bounded by the
request time limit."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from fastapi import APIRouter, Query, Request, Security
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from engine import _errors as errors
from engine._errors import DeadlineExceeded, InputError, IsoragError
from engine.answering.results import AnswerEvent
from engine.service import sse
from engine.service.auth import bearer, header_key
from engine.service.jobs import JOB_ID
from engine.service.problems import PROBLEM_JSON, Problem, eids_as_text, problem_body, status_of

if TYPE_CHECKING:  # pragma: no cover
    from engine._engine import Engine
    from engine.service.core import Service

__all__ = ["EidJSONResponse", "make_router", "problem_response"]

T = TypeVar("T")
PatternIn = dict[str, Any] | list[Any] | str | None


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AskBody(_Body):
    question: str = Field(description="the question (or a claim: see /verify)")
    pattern: PatternIn = Field(None, description='{"triples": [[h, r, t], ...]}; default: the learned generator or LLM')
    k: int | None = Field(None, description="subgraphs to retrieve (default 3)")
    route: Literal["auto", "llm", "learned"] | None = None
    stream: bool = Field(False, description="server-sent events: pattern, subgraphs, scored, token..., answer")
    deadline_s: float | None = Field(None, gt=0, description="match deadline (at most the server's time limit)")


class RetrieveBody(_Body):
    pattern: PatternIn = Field(None, description="the pattern to match")
    text: str | None = Field(None, description="or a question in plain text (pattern by the learned generator)")
    k: int | None = None
    k_node: int | None = Field(None, ge=1, le=16_384)
    k_rel: int | None = Field(None, ge=1, le=16_384)
    injective: Literal["nodes", "edges", "none"] | None = None
    directed: bool | None = None
    deadline_s: float | None = Field(None, gt=0)


class VerifyBody(_Body):
    claim: str
    pattern: PatternIn = None
    k: int | None = None
    threshold: float | None = Field(None, ge=0, le=2)
    route: Literal["auto", "llm", "learned"] | None = None
    deadline_s: float | None = Field(None, gt=0)


class CheckBody(_Body):
    repair: bool = False
    deep: bool = False


def _error_class(name: str | None) -> type[BaseException]:
    cls = getattr(errors, name or "", None)
    return cls if isinstance(cls, type) and issubclass(cls, BaseException) else IsoragError


class _Checks:
    """What every route does before the engine works: the key (``engine``), the limits, the time limit (``call``)."""

    def __init__(self, svc: Service) -> None:
        self.svc, self.lim = svc, svc.settings.limits
        self.gate = asyncio.Semaphore(svc.settings.concurrency)

    async def call(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        """``fn`` in a worker thread once one of the ``concurrency`` slots is free, the wait and the work within
        the request time limit (504 past it)."""
        lim = self.lim

        async def gated() -> T:
            async with self.gate:
                return await asyncio.to_thread(fn, *args, **kw)

        try:
            return await asyncio.wait_for(gated(), lim.timeout_s)
        except (asyncio.TimeoutError, TimeoutError):
            raise DeadlineExceeded(f"the request ran past the server's limit of {lim.timeout_s:g} s") from None

    def text(self, text: str, what: str) -> str:
        if not text.strip():
            raise InputError(f"{what}: empty text")
        if len(text) > self.lim.question_chars:
            raise Problem(413, "LimitExceeded", f"{what} of {len(text):,} characters; the limit is "
                          f"{self.lim.question_chars:,}", limit="question_chars")
        return text

    def pattern(self, p: PatternIn) -> PatternIn:
        if p is None:
            return None
        from engine.retrieval.retriever import as_pattern

        pat = as_pattern(p)
        if len(pat.edges) > self.lim.pattern_triples:
            raise Problem(413, "LimitExceeded", f"a pattern of {len(pat.edges)} triples; the limit is "
                          f"{self.lim.pattern_triples}", limit="pattern_triples")
        return pat.to_json()

    def k(self, k: int | None) -> int | None:
        if k is not None and k > self.lim.k:
            raise Problem(413, "LimitExceeded", f"k={k:,}; the limit is {self.lim.k:,} subgraphs", limit="k")
        return k

    def page(self, limit: int) -> int:
        if limit > self.lim.page:
            raise Problem(413, "LimitExceeded", f"limit={limit:,}; a page holds at most {self.lim.page:,}",
                          limit="page")
        return limit

    def deadline(self, asked: float | None) -> dict[str, Any]:
        return {"deadline_s": min(asked or self.lim.timeout_s, self.lim.timeout_s)}

    async def engine(self, request: Request, kg: str, role: str) -> Engine:
        self.svc.guard.require(request, kg, role)
        return self.svc.pool.get(kg)


def make_router(svc: Service) -> APIRouter:
    """The ``/v1`` routes over the service ``svc``."""
    router = APIRouter(prefix="/v1", dependencies=[Security(bearer), Security(header_key)])
    checks = _Checks(svc)
    _kg_routes(router, svc, checks)
    _query_routes(router, svc, checks)
    _browse_routes(router, checks)
    _write_routes(router, svc, checks)
    return router


def _kg_routes(router: APIRouter, svc: Service, c: _Checks) -> None:
    @router.get("/whoami", summary="the key of this request: id, role, KGs")
    async def whoami(request: Request) -> dict[str, Any]:
        who = svc.guard.principal(request)
        return {"id": who.id, "role": who.role, "kgs": list(who.kgs), "auth": svc.guard.store is not None}

    @router.get("/kgs", summary="the KGs this key may read, with their versions")
    async def kgs(request: Request) -> dict[str, Any]:
        who = svc.guard.principal(request)
        rows = await c.call(lambda: svc.pool.any().list_kgs())
        return {"kgs": [r for r in rows if who.allows(r["kg"], "read")]}

    @router.get("/kgs/{kg}/stats", summary="counts of both stores, whether they agree, and the KG's version")
    async def stats(request: Request, kg: str) -> Response:
        eng = await c.engine(request, kg, "read")
        return _ok(await c.call(eng.stats))

    @router.get("/kgs/{kg}/version", summary="the KG's version: change sets and loads applied")
    async def version(request: Request, kg: str) -> dict[str, Any]:
        eng = await c.engine(request, kg, "read")
        return await c.call(eng.version)


def _query_routes(router: APIRouter, svc: Service, c: _Checks) -> None:
    @router.post("/kgs/{kg}/ask", summary="answer a question, with its evidence (stream=true: server-sent events)")
    async def ask(request: Request, kg: str, body: AskBody) -> Response:
        eng = await c.engine(request, kg, "read")
        q = c.text(body.question, "question")
        kw = dict(pattern=c.pattern(body.pattern), k=c.k(body.k), route=body.route, raise_errors=False,
                  **c.deadline(body.deadline_s))
        await c.call(eng.require_kg)
        if body.stream:
            return StreamingResponse(_events(svc, eng, q, kw, c.lim.timeout_s), media_type=sse.MEDIA_TYPE,
                                     headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
        ans = await c.call(eng.ask, q, **kw)
        svc.metrics.stages("ask", ans.timings)
        if ans.failed_stage:
            raise _failed(ans.error_type, ans.error, f"ask: {ans.failed_stage}")
        return _ok(ans.to_dict())

    @router.post("/kgs/{kg}/retrieve", summary="exact top-k subgraphs (GSD) of a pattern, or of a question's "
                                               "learned pattern")
    async def retrieve(request: Request, kg: str, body: RetrieveBody) -> Response:
        eng = await c.engine(request, kg, "read")
        match = {f: getattr(body, f) for f in ("k_node", "k_rel", "injective", "directed")
                 if getattr(body, f) is not None}
        match.update(c.deadline(body.deadline_s))
        out: dict[str, Any] = {}
        if (body.pattern is None) == (body.text is None):
            raise InputError("retrieve: give a pattern or a text (one of them)")
        pattern = c.pattern(body.pattern)
        if body.text is not None:
            prop = await c.call(eng.propose, c.text(body.text, "text"))
            if prop.pattern is None:
                raise InputError(f"retrieve: the learned generator has no pattern for {body.text!r}")
            pattern = prop.pattern.to_json()
            out["proposal"] = prop.to_dict()
        res = await c.call(eng.retrieve, pattern, c.k(body.k), **match)
        svc.metrics.stages("retrieve", res.timings)
        return _ok({**res.to_dict(), **out})

    @router.post("/kgs/{kg}/verify", summary="check a claim: SUPPORTED, REFUTED or NOT_ENOUGH_INFO, with evidence")
    async def verify(request: Request, kg: str, body: VerifyBody) -> Response:
        eng = await c.engine(request, kg, "read")
        claim = c.text(body.claim, "claim")
        await c.call(eng.require_kg)
        v = await c.call(eng.verify, claim, pattern=c.pattern(body.pattern), k=c.k(body.k),
                       threshold=body.threshold, route=body.route, raise_errors=False, **c.deadline(body.deadline_s))
        svc.metrics.stages("verify", v.timings)
        if v.failed_stage:
            raise _failed(v.error_type, v.error, f"verify: {v.failed_stage}")
        return _ok(v.to_dict())


def _browse_routes(router: APIRouter, c: _Checks) -> None:
    @router.get("/kgs/{kg}/entities", summary="entities whose name contains q (case folded), best first; paged")
    async def search(request: Request, kg: str, q: str = Query(..., description="text to look for"),
                     limit: int = Query(20, ge=1), offset: int = Query(0, ge=0)) -> Response:
        eng = await c.engine(request, kg, "read")
        return _ok(await c.call(eng.search_entities, c.text(q, "search"), limit=c.page(limit), offset=offset))

    @router.get("/kgs/{kg}/entities/{eid}/neighbourhood",
                summary="one page of the triples around an entity; read pages until next_offset is null")
    async def neighbourhood(request: Request, kg: str, eid: int, limit: int = Query(500, ge=1),
                            offset: int = Query(0, ge=0)) -> Response:
        eng = await c.engine(request, kg, "read")
        return _ok(await c.call(eng.neighbourhood, eid, limit=c.page(limit), offset=offset))


def _write_routes(router: APIRouter, svc: Service, c: _Checks) -> None:
    @router.post("/kgs/{kg}/apply", summary="apply a change set (JSON Lines body) to both stores; role write")
    async def apply(request: Request, kg: str) -> Response:
        eng = await c.engine(request, kg, "write")
        data = await request.body()
        path = svc.spool(data, ".jsonl")
        try:
            report = await c.call(eng.apply, path, strict=True, progress=False)
        finally:
            path.unlink(missing_ok=True)
        return _ok(report.to_dict())

    @router.post("/kgs/{kg}/check", summary="compare the stores in full (repair: make Milvus agree); role admin")
    async def check(request: Request, kg: str, body: CheckBody) -> Response:
        eng = await c.engine(request, kg, "admin")
        report = await c.call(eng.check, repair=body.repair, deep=body.deep, progress=False)
        return _ok(report.to_dict())

    @router.post("/kgs/{kg}/jobs", status_code=202,
                 summary="submit a claims file (JSON Lines or CSV body) to verify in the background; role write")
    async def submit(request: Request, kg: str, format: Literal["jsonl", "csv"] = "jsonl") -> dict[str, Any]:
        eng = await c.engine(request, kg, "write")
        data = await request.body()
        await c.call(eng.require_kg)
        return await c.call(svc.jobs.submit, kg, data, format)

    @router.get("/kgs/{kg}/jobs", summary="the KG's verification jobs with their progress")
    async def jobs(request: Request, kg: str) -> dict[str, Any]:
        await c.engine(request, kg, "read")
        return {"jobs": await c.call(svc.jobs.jobs_of, kg)}

    @router.get("/kgs/{kg}/jobs/{job_id}", summary="a job's status and progress (done of claims)")
    async def job(request: Request, kg: str, job_id: str) -> dict[str, Any]:
        await c.engine(request, kg, "read")
        return await c.call(svc.jobs.get, kg, _job_id(job_id))

    @router.get("/kgs/{kg}/jobs/{job_id}/results", summary="the verdicts so far, one JSON object a line")
    async def results(request: Request, kg: str, job_id: str) -> FileResponse:
        await c.engine(request, kg, "read")
        path = await c.call(svc.jobs.results_path, kg, _job_id(job_id))
        if not path.exists():
            path.touch()
        return FileResponse(path, media_type="application/x-ndjson")


def _ok(content: Any) -> Response:
    """A result as JSON, serialized once (no response model: the engine's results are plain dicts already)."""
    return EidJSONResponse(content)


def _job_id(job_id: str) -> str:
    if not JOB_ID.fullmatch(job_id):
        raise Problem(404, "InputError", f"no job {job_id[:40]!r}: a job id is 16 hexadecimal digits")
    return job_id


def _failed(error_type: str | None, error: str | None, where: str) -> Problem:
    """A failed stage of an ask or a verify (raise_errors=False) as a problem with its engine error type."""
    cls = _error_class(error_type)
    return Problem(status_of(cls("x") if cls is not IsoragError else IsoragError("x")), error_type or "IsoragError",
                   error or "failed", where)


async def _events(svc: Service, eng: Engine, q: str, kw: dict[str, Any], timeout_s: float) -> AsyncIterator[bytes]:
    """The server-sent events of one streamed ask (see :mod:`engine.service.sse`)."""
    t0 = time.perf_counter()
    end = time.monotonic() + timeout_s
    seq = 0
    stream = eng.aask_stream(q, **kw).__aiter__()
    try:
        while True:
            try:
                ev = await asyncio.wait_for(stream.__anext__(), max(0.001, end - time.monotonic()))
            except StopAsyncIteration:
                return
            if seq == 0:
                svc.metrics.observe("isorag_first_event_seconds", {}, time.perf_counter() - t0)
            seq += 1
            data = ev.to_dict()
            data.pop("kind", None)
            if isinstance(ev, AnswerEvent):
                svc.metrics.stages("ask", ev.answer.timings)
                if ev.answer.failed_stage:
                    p = _failed(ev.answer.error_type, ev.answer.error, f"ask: {ev.answer.failed_stage}")
                    svc.metrics.inc("isorag_errors_total", {"type": p.error_type, "status": str(p.status)})
                    yield sse.event("error", _problem_dict(p), seq)
                    seq += 1
            yield sse.event(ev.kind, eids_as_text(data), seq)
    except (asyncio.TimeoutError, TimeoutError):
        p = Problem(504, "DeadlineExceeded", f"the stream ran past the server's limit of {timeout_s:g} s", "ask")
        yield sse.event("error", _problem_dict(p), seq + 1)
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


def _problem_dict(p: Problem) -> dict[str, Any]:
    import json

    return dict(json.loads(problem_body(p.status, p.error_type, p.detail, p.where)))


def problem_response(status: int, error_type: str, detail: str, where: str, instance: str,
                     headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    import json

    body = json.loads(problem_body(status, error_type, detail, where, instance, **extra))
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


class EidJSONResponse(JSONResponse):
    """JSON with entity ids as strings (:func:`~engine.service.problems.eids_as_text`): every route's response."""

    def render(self, content: Any) -> bytes:
        return super().render(eids_as_text(content))
