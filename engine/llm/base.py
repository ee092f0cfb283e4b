"""The LLM interface, and what every provider shares: the usage stats, per-block metering, the call counter.

The engine needs an LLM twice per query (SimGRAG: pattern, then answer). Everything here talks in plain
strings: ``complete(prompt) -> text``, ``stream(prompt) -> tokens``, with async twins.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from engine._errors import LLMError

__all__ = ["LLM", "LLMStats", "Outcome", "Tokens", "chat_messages", "clip", "counted", "metered"]

log = logging.getLogger("isorag.llm")


@dataclass
class LLMStats:
    """Running totals for one client, safe to update from many threads.

    ``calls`` counts completions asked for (a retried call counts once), ``retries`` the extra attempts,
    ``failures`` the calls that ended in an LLMError, ``seconds`` the wall time spent in calls (retries and
    waits for a free slot included)."""

    calls: int = 0
    retries: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **deltas: float) -> None:
        with self._lock:
            for name, delta in deltas.items():
                setattr(self, name, getattr(self, name) + delta)
        meter = _METER.get()
        if meter is not None and meter is not self:
            meter.add(**deltas)

    def record(
        self, started: float, error: BaseException | None, prompt_tokens: int = 0, completion_tokens: int = 0
    ) -> None:
        """Count one call that began at ``started`` (``time.perf_counter()``) and ended with ``error``
        (a consumer closing a stream early is not a failure)."""
        self.add(
            calls=1,
            failures=int(isinstance(error, LLMError)),
            seconds=time.perf_counter() - started,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        )

    def snapshot(self) -> dict[str, float]:
        """A consistent copy of the totals."""
        with self._lock:
            return {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}

    def reset(self) -> None:
        with self._lock:
            self.calls = self.retries = self.failures = 0
            self.prompt_tokens = self.completion_tokens = 0
            self.seconds = 0.0


_METER: contextvars.ContextVar[LLMStats | None] = contextvars.ContextVar("isorag_llm_meter", default=None)


@contextlib.contextmanager
def metered(stats: LLMStats | None = None) -> Iterator[LLMStats]:
    """Count, in ``stats`` (a fresh :class:`LLMStats` by default), the LLM calls made inside the block by this
    thread or task (and the tasks and ``asyncio.to_thread`` calls it starts): per-query usage while other
    queries share the client. Keep a generator's ``yield`` outside the block."""
    stats = LLMStats() if stats is None else stats
    token = _METER.set(stats)
    try:
        yield stats
    finally:
        _METER.reset(token)


class Tokens:
    """The token counts one call reports (filled in by the provider as the usage comes)."""

    def __init__(self) -> None:
        self.prompt_tokens = 0
        self.completion_tokens = 0


_T = TypeVar("_T", bound=Tokens)


@contextlib.contextmanager
def counted(stats: LLMStats, tokens: _T) -> Iterator[_T]:
    """Count the call made inside the block in ``stats`` when the block ends, however it ends: its wall time,
    ``tokens``, and whether an LLMError ended it (:meth:`LLMStats.record`). Every call path of every provider
    goes through here."""
    started = time.perf_counter()
    error: BaseException | None = None
    try:
        yield tokens
    except BaseException as e:  # GeneratorExit too: a stream closed early is counted, as a call
        error = e
        raise
    finally:
        stats.record(started, error, tokens.prompt_tokens, tokens.completion_tokens)


class LLM:
    """What the engine needs from an LLM: one prompt in, text out (or tokens as they come).

    Subclasses implement :meth:`complete`; the other three have working defaults built on it (the async
    ones run it in a worker thread, the streaming ones yield the whole answer as one token).
    Every method raises :class:`~engine._errors.LLMError` when the model fails or refuses.
    """

    stats: LLMStats

    def complete(self, prompt: str, *, system: str | None = None) -> str:
        raise NotImplementedError

    async def acomplete(self, prompt: str, *, system: str | None = None) -> str:
        return await asyncio.to_thread(self.complete, prompt, system=system)

    def stream(self, prompt: str, *, system: str | None = None) -> Iterator[str]:
        yield self.complete(prompt, system=system)

    async def astream(self, prompt: str, *, system: str | None = None) -> AsyncIterator[str]:
        yield await self.acomplete(prompt, system=system)


def chat_messages(prompt: str, system: str | None) -> list[dict[str, str]]:
    # SimGRAG sends a single user message; a system message only when the caller asks for one.
    if system:
        return [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
    return [{"role": "user", "content": prompt}]


class Outcome(Tokens):
    """What one streamed or whole completion produced, checked the same way for both."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.refusal: list[str] = []
        self.finish_reason: str | None = None

    def take_usage(self, usage: Any) -> None:
        if usage is not None:
            self.prompt_tokens = getattr(usage, "prompt_tokens", 0) or 0
            self.completion_tokens = getattr(usage, "completion_tokens", 0) or 0

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def check(self) -> str:
        """The answer, or an LLMError (keeping the text) when the model refused or said nothing."""
        text = self.text
        refusal = "".join(self.refusal)
        if refusal:
            raise LLMError(f"the model refused: {clip(refusal)}", refusal)
        if self.finish_reason == "content_filter":
            raise LLMError("the answer was stopped by the endpoint's content filter", text)
        if not text.strip():
            raise LLMError(f"the model returned an empty answer (finish_reason={self.finish_reason})", text)
        if self.finish_reason == "length":
            log.warning("LLM answer cut at max_tokens (%d characters kept)", len(text))
        return text


def clip(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
