"""The drivers of the answering flows (:mod:`engine.answering.pipeline`): they carry out a flow's requests.

* :func:`drive` / :func:`adrive`: sync calls / awaits (blocking work in a worker thread), the result at the end;
* :func:`stream` / :func:`astream`: the same, and the flow's events on the way, the answer's text as the LLM
  streams it (:class:`~engine.answering.results.TokenEvent`), and last an
  :class:`~engine.answering.results.AnswerEvent`;
* :func:`verify_many` / :func:`averify_many`: many claims, ``concurrency`` at a time.

A request that fails is thrown back into the flow where it was made, so the flow's stage names the failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterable, Iterator, Mapping, Sequence
from typing import Any

from engine._errors import ConfigError, PatternError
from engine.answering.pipeline import Call, Complete, Emit, Flow, Generate, Pipeline, Request, Result, Run
from engine.answering.results import Answer, AnswerEvent, StreamEvent, TokenEvent, Verdict
from engine.llm import metered

__all__ = ["adrive", "astream", "averify_many", "claim_args", "drive", "stream", "verify_many"]


def _next(flow: Flow[Result], reply: Any, error: Exception | None) -> Request:
    """The flow's next request, sent the last one's result (or thrown its error); StopIteration at the end."""
    return flow.steps.send(reply) if error is None else flow.steps.throw(error)


@contextlib.contextmanager
def _held(run: Run) -> Iterator[None]:
    """Around handing an event to the caller: that time is not the stages'."""
    t0 = time.perf_counter()
    yield
    run.away += time.perf_counter() - t0


# ---------------------------------------------------------------------------------------------------------
# sync
# ---------------------------------------------------------------------------------------------------------


def _sync(flow: Flow[Result], streaming: bool) -> Generator[StreamEvent, None, Result]:
    """Run ``flow`` with sync calls; yields its events when ``streaming``; returns its result."""
    run, reply, error = flow.run, None, None
    try:
        while True:
            try:
                req = _next(flow, reply, error)
            except StopIteration as done:
                return done.value
            reply, error = None, None
            if isinstance(req, Emit):
                if streaming:
                    with _held(run):
                        yield req.event
                continue
            try:
                if isinstance(req, Call):
                    reply = req.fn(*req.args)
                elif isinstance(req, Generate) and streaming:
                    reply = yield from _tokens(run, req)
                else:
                    with metered(run.usage):
                        reply = req.llm.complete(req.prompt)
            except Exception as e:  # noqa: BLE001 - thrown into the flow, which names the stage or lets it through
                error = e
    finally:
        flow.steps.close()


def _tokens(run: Run, req: Generate) -> Generator[TokenEvent, None, str]:
    pieces: list[str] = []
    tokens = req.llm.stream(req.prompt)
    try:
        while True:
            try:
                with metered(run.usage):
                    piece = next(tokens)
            except StopIteration:
                break
            pieces.append(piece)
            with _held(run):
                yield TokenEvent(piece)
    finally:
        close = getattr(tokens, "close", None)
        if close is not None:
            close()
    return "".join(pieces)


def drive(flow: Flow[Result]) -> Result:
    """The result of ``flow`` (an Answer or a Verdict), its requests carried out by sync calls."""
    steps = _sync(flow, streaming=False)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def stream(flow: Flow[Answer]) -> Iterator[StreamEvent]:
    """The events of an ask ``flow``: PatternEvent, SubgraphsEvent, TokenEvent (as the LLM streams) and finally
    AnswerEvent."""
    answer = yield from _sync(flow, streaming=True)
    yield AnswerEvent(answer)


# ---------------------------------------------------------------------------------------------------------
# async
# ---------------------------------------------------------------------------------------------------------


async def _async(flow: Flow[Result], streaming: bool, out: list[Result]) -> AsyncGenerator[StreamEvent, None]:
    """The async twin of :func:`_sync` (the result is appended to ``out``: an async generator returns nothing)."""
    run, reply, error = flow.run, None, None
    try:
        while True:
            try:
                req = _next(flow, reply, error)
            except StopIteration as done:
                out.append(done.value)
                return
            reply, error = None, None
            if isinstance(req, Emit):
                if streaming:
                    with _held(run):
                        yield req.event
                continue
            try:
                if isinstance(req, Call):
                    reply = await asyncio.to_thread(req.fn, *req.args)
                elif isinstance(req, Generate) and streaming:
                    pieces: list[str] = []
                    tokens = req.llm.astream(req.prompt).__aiter__()
                    try:
                        while True:
                            try:
                                with metered(run.usage):
                                    piece = await tokens.__anext__()
                            except StopAsyncIteration:
                                break
                            pieces.append(piece)
                            with _held(run):
                                yield TokenEvent(piece)
                    finally:
                        aclose = getattr(tokens, "aclose", None)
                        if aclose is not None:
                            await aclose()
                    reply = "".join(pieces)
                else:
                    assert isinstance(req, Complete)
                    with metered(run.usage):
                        reply = await req.llm.acomplete(req.prompt)
            except Exception as e:  # noqa: BLE001 - thrown into the flow, which names the stage or lets it through
                error = e
    finally:
        flow.steps.close()


async def adrive(flow: Flow[Result]) -> Result:
    """The async twin of :func:`drive`."""
    out: list[Result] = []
    async for _ in _async(flow, False, out):
        pass
    return out[0]


async def astream(flow: Flow[Answer]) -> AsyncIterator[StreamEvent]:
    """The async twin of :func:`stream`."""
    out: list[Answer] = []
    events = _async(flow, True, out)
    try:
        async for event in events:
            yield event
    finally:  # at once, not when collected: a stream closed early gives its LLM slot back now
        await events.aclose()
    yield AnswerEvent(out[0])


# ---------------------------------------------------------------------------------------------------------
# many claims
# ---------------------------------------------------------------------------------------------------------


def claim_args(item: Any) -> tuple[str, Any]:
    """``(claim, pattern)`` from a claim string, a ``(claim, pattern)`` pair or a mapping with ``"claim"``
    (and optionally ``"pattern"``)."""
    if isinstance(item, str):
        return item, None
    if isinstance(item, Mapping):
        if not isinstance(item.get("claim"), str):
            raise PatternError(f'a claim mapping needs a "claim" string, got keys {sorted(item)[:10]}')
        return item["claim"], item.get("pattern")
    if isinstance(item, Sequence) and len(item) == 2 and isinstance(item[0], str):
        return item[0], item[1]
    raise PatternError(f"cannot read a claim from {type(item).__name__}: pass a string, (claim, pattern) or "
                       '{"claim": ..., "pattern": ...}')


def _check_concurrency(concurrency: Any) -> None:
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"concurrency must be a positive int, got {concurrency!r}")


def verify_many(pipeline: Pipeline, claims: Iterable[Any], *, concurrency: int = 4, raise_errors: bool = False,
                **kw: Any) -> list[Verdict]:
    """Verdicts for ``claims`` (see :func:`claim_args`), in order, ``concurrency`` threads at a time; ``kw``
    as :meth:`Pipeline.verify` takes them."""
    from concurrent.futures import ThreadPoolExecutor

    _check_concurrency(concurrency)
    items = [claim_args(c) for c in claims]

    def one(item: tuple[str, Any]) -> Verdict:
        return drive(pipeline.verify(item[0], pattern=item[1], raise_errors=raise_errors, **kw))

    if concurrency == 1 or len(items) <= 1:
        return [one(it) for it in items]
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="isorag-verify") as pool:
        return list(pool.map(one, items))


async def averify_many(pipeline: Pipeline, claims: Iterable[Any], *, concurrency: int = 4,
                       raise_errors: bool = False, **kw: Any) -> list[Verdict]:
    """The async twin of :func:`verify_many` (``concurrency`` tasks at a time)."""
    _check_concurrency(concurrency)
    items = [claim_args(c) for c in claims]
    gate = asyncio.Semaphore(concurrency)

    async def one(item: tuple[str, Any]) -> Verdict:
        async with gate:
            return await adrive(pipeline.verify(item[0], pattern=item[1], raise_errors=raise_errors, **kw))

    return list(await asyncio.gather(*(one(it) for it in items)))
