"""LLM clients: any OpenAI-compatible endpoint (the ``openai`` package) or any langchain-core chat model.

The engine needs an LLM twice per query (SimGRAG: pattern, then answer). Everything here talks in plain
strings: ``complete(prompt) -> text``, ``stream(prompt) -> tokens``, with async twins.

* :class:`LLMConfig`: base URL, key, model and sampling defaults (SimGRAG's code: temperature 0.2,
  top_p 0.1, max_tokens 1024; seed 0), read from arguments, the environment or a TOML/JSON file.
* :class:`OpenAILLM`: chat.completions over HTTP. Retries 429/5xx/connection errors itself (the openai
  client's own retries are off, so each retry is counted and logged), with exponential backoff, jitter and
  ``Retry-After``; a timeout, a refusal or another 4xx is an :class:`~engine._errors.LLMError` at once.
  At most ``concurrency`` calls are in flight, counted across threads and asyncio tasks together.
* :class:`LangChainLLM`: wraps a langchain-core ``BaseChatModel`` (imported at first use).
* :func:`make_llm`: what the engine calls to turn a user's argument (or the environment) into an LLM.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import email.utils
import json
import logging
import math
import os
import random
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from engine._errors import ConfigError, LLMError
from engine._secrets import mask_uri, masked_repr, register, scrub

__all__ = [
    "LLM",
    "LLMConfig",
    "LLMStats",
    "LangChainLLM",
    "OpenAILLM",
    "make_llm",
    "metered",
]

log = logging.getLogger("isorag.llm")

#: A Retry-After longer than this is not worth waiting for inside one query: fail instead.
MAX_RETRY_AFTER_S = 60.0
#: Exponential backoff never waits longer than this between two attempts.
MAX_BACKOFF_S = 20.0
_LANGCHAIN_HINT = "pip install 'langchain-core==1.7.2'  (or: pip install 'isorag[langchain]')"

#: what a caller is told when a text needs a pattern and no LLM is configured (answering, the langchain retriever)
NO_LLM_HELP = (
    "no LLM is configured to turn the text into a pattern. Either pass the pattern yourself "
    '(pattern={"triples": [["Heat", "directed_by", "UNKNOWN director 1"]]} in Python, --pattern on the command '
    "line), or configure an OpenAI-compatible "
    "endpoint: set ISORAG_LLM_BASE_URL (e.g. http://localhost:11434/v1) and ISORAG_LLM_MODEL (and "
    "ISORAG_LLM_API_KEY or OPENAI_API_KEY if it needs one), or pass Engine(llm=LLMConfig(base_url=..., "
    "model=...)) or Engine(llm=<a langchain-core chat model>)"
)


# ---------------------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------------------

_FLOAT_FIELDS = {"temperature", "top_p", "timeout", "retry_backoff"}
_INT_FIELDS = {"seed", "max_tokens", "max_retries", "concurrency"}
_OPTIONAL_FIELDS = {"base_url", "api_key", "model", "top_p", "seed"}
# Checked before the generic ISORAG_LLM_<FIELD>: the names other OpenAI tooling already uses.
_ENV_FALLBACKS = {"base_url": ("OPENAI_BASE_URL",), "api_key": ("OPENAI_API_KEY",)}


@dataclass(frozen=True)
class LLMConfig:
    """How to reach an OpenAI-compatible chat endpoint, and how to sample from it.

    ``base_url`` is e.g. ``http://localhost:11434/v1`` (Ollama) or ``http://localhost:8000/v1`` (vLLM);
    ``None`` means OpenAI itself. ``timeout`` bounds one HTTP attempt; ``max_retries`` counts the extra
    attempts after a 429, a 5xx or a connection error, ``retry_backoff`` is the first backoff in seconds
    (doubled each retry, with jitter). ``concurrency`` caps the calls in flight through one client.
    """

    base_url: str | None = None
    api_key: str | None = None  # masked in repr
    model: str | None = None
    temperature: float = 0.2
    top_p: float | None = 0.1
    seed: int | None = 0
    max_tokens: int = 1024
    timeout: float = 60.0
    max_retries: int = 3
    concurrency: int = 4
    retry_backoff: float = 0.5

    def __post_init__(self) -> None:
        for name in _FLOAT_FIELDS | _INT_FIELDS:
            value = getattr(self, name)
            if value is None and name in _OPTIONAL_FIELDS:
                continue
            kinds = (int, float) if name in _FLOAT_FIELDS else (int,)
            if isinstance(value, bool) or not isinstance(value, kinds):
                raise ConfigError(f"LLM {name} must be a number, got {value!r}")
            if name in _FLOAT_FIELDS and not math.isfinite(value):
                raise ConfigError(f"LLM {name} must be finite, got {value!r}")
        for name in ("base_url", "api_key", "model"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"LLM {name} must be a string, got {type(value).__name__}")
        register(self.api_key)
        if self.temperature < 0:
            raise ConfigError(f"LLM temperature must be >= 0, got {self.temperature}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ConfigError(f"LLM top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ConfigError(f"LLM max_tokens must be >= 1, got {self.max_tokens}")
        if self.timeout <= 0:
            raise ConfigError(f"LLM timeout must be > 0 seconds, got {self.timeout}")
        if self.max_retries < 0:
            raise ConfigError(f"LLM max_retries must be >= 0, got {self.max_retries}")
        if self.concurrency < 1:
            raise ConfigError(f"LLM concurrency must be >= 1, got {self.concurrency}")
        if self.retry_backoff < 0:
            raise ConfigError(f"LLM retry_backoff must be >= 0, got {self.retry_backoff}")

    def __repr__(self) -> str:
        return masked_repr(self, secret=("api_key",), uris=("base_url",))

    @property
    def configured(self) -> bool:
        """True when an endpoint (base URL or API key) and a model are set."""
        return bool(self.base_url or self.api_key) and bool(self.model)

    @classmethod
    def from_env(cls, **overrides: Any) -> LLMConfig:
        """From ``ISORAG_LLM_<FIELD>`` (``ISORAG_LLM_BASE_URL``, ``ISORAG_LLM_API_KEY``, ``ISORAG_LLM_MODEL``,
        ``ISORAG_LLM_TEMPERATURE``, ``ISORAG_LLM_TOP_P``, ``ISORAG_LLM_SEED``, ``ISORAG_LLM_MAX_TOKENS``,
        ``ISORAG_LLM_TIMEOUT``, ``ISORAG_LLM_MAX_RETRIES``, ``ISORAG_LLM_CONCURRENCY``,
        ``ISORAG_LLM_RETRY_BACKOFF``), then ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``; keyword ``overrides``
        win over both (``top_p=None`` really means no top_p). An optional field set to ``""`` or ``none``
        in the environment is None."""
        _check_names(overrides, "from_env()")
        values: dict[str, Any] = {}
        for f in fields(cls):
            names = (f"ISORAG_LLM_{f.name.upper()}", *_ENV_FALLBACKS.get(f.name, ()))
            for env_name in names:
                raw = os.environ.get(env_name)
                if raw is not None and (raw.strip() or f.name in _OPTIONAL_FIELDS):
                    values[f.name] = _from_text(f.name, raw, env_name)
                    break
        values.update(overrides)
        return cls(**values)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> LLMConfig:
        """From a TOML file (its ``[llm]`` table, or the top level when there is none) or a JSON file (its
        ``"llm"`` object, or the top level). Unknown keys are an error. Keep keys out of shared files: a
        missing ``api_key`` is taken from the environment when the client starts."""
        p = Path(path)
        try:
            raw = p.read_bytes()
        except OSError as e:
            raise ConfigError(f"cannot read LLM config {p}: {e}") from e
        if p.suffix.lower() == ".json":
            try:
                data = json.loads(raw)
            except ValueError as e:
                raise ConfigError(f"{p}: not valid JSON: {e}") from e
        else:
            try:
                import tomllib
            except ModuleNotFoundError:  # Python 3.10
                try:
                    import tomli as tomllib  # type: ignore[no-redef]
                except ModuleNotFoundError as e:
                    raise ConfigError(f"{p}: reading TOML on Python 3.10 needs: pip install tomli") from e
            try:
                data = tomllib.loads(raw.decode("utf-8"))
            except (ValueError, UnicodeDecodeError) as e:
                raise ConfigError(f"{p}: not valid TOML: {e}") from e
        if isinstance(data, Mapping) and isinstance(data.get("llm"), Mapping):
            data = data["llm"]
        if not isinstance(data, Mapping):
            raise ConfigError(f"{p}: expected a table of LLM settings, got {type(data).__name__}")
        _check_names(data, str(p))
        return cls(**dict(data))


def _check_names(values: Mapping[str, Any], where: str) -> None:
    known = {f.name for f in fields(LLMConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown LLM setting(s) {unknown}; known: {sorted(known)}")


def _from_text(name: str, raw: str, source: str) -> Any:
    text = raw.strip()
    if name in _OPTIONAL_FIELDS and text.lower() in ("", "none", "null"):
        return None
    if name in _FLOAT_FIELDS or name in _INT_FIELDS:
        try:
            return float(text) if name in _FLOAT_FIELDS else int(text)
        except ValueError:
            raise ConfigError(f"{source}={raw!r} is not a valid {name}") from None
    return text


# ---------------------------------------------------------------------------------------------------------
# Stats and the concurrency limiter
# ---------------------------------------------------------------------------------------------------------


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


class _Tokens:
    """The token counts one call reports (filled in by the provider as the usage comes)."""

    def __init__(self) -> None:
        self.prompt_tokens = 0
        self.completion_tokens = 0


@contextlib.contextmanager
def _counted(stats: LLMStats, tokens: _Tokens) -> Iterator[_Tokens]:
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


class _Limiter:
    """A counting semaphore shared by threads and by asyncio tasks on any event loop.

    A released slot is handed straight to the oldest waiter (a thread's Event, or a task's future woken
    through its loop), so neither kind can starve the other and no executor thread is tied up waiting.
    """

    def __init__(self, slots: int) -> None:
        self._lock = threading.Lock()
        self._free = slots
        self._waiters: deque[Any] = deque()

    def acquire(self) -> None:
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return
            event = threading.Event()
            self._waiters.append(event)
        event.wait()  # the slot is ours once set

    async def aacquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return
            waiter = (loop, loop.create_future())
            self._waiters.append(waiter)
        try:
            await waiter[1]
        except asyncio.CancelledError:
            with self._lock:
                try:
                    self._waiters.remove(waiter)
                    handed = False
                except ValueError:
                    handed = True  # release() already gave us the slot: pass it on
            if handed:
                self.release()
            raise

    def release(self) -> None:
        with self._lock:
            while self._waiters:
                waiter = self._waiters.popleft()
                if isinstance(waiter, threading.Event):
                    waiter.set()
                    return
                loop, future = waiter
                try:
                    loop.call_soon_threadsafe(_wake, future)
                    return
                except RuntimeError:  # its loop is closed: that waiter is gone
                    continue
            self._free += 1

    def __enter__(self) -> _Limiter:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


# ---------------------------------------------------------------------------------------------------------
# The interface
# ---------------------------------------------------------------------------------------------------------


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


def _messages(prompt: str, system: str | None) -> list[dict[str, str]]:
    # SimGRAG sends a single user message; a system message only when the caller asks for one.
    if system:
        return [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
    return [{"role": "user", "content": prompt}]


# ---------------------------------------------------------------------------------------------------------
# OpenAI-compatible endpoints
# ---------------------------------------------------------------------------------------------------------


class _Outcome(_Tokens):
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
            raise LLMError(f"the model refused: {_clip(refusal)}", refusal)
        if self.finish_reason == "content_filter":
            raise LLMError("the answer was stopped by the endpoint's content filter", text)
        if not text.strip():
            raise LLMError(f"the model returned an empty answer (finish_reason={self.finish_reason})", text)
        if self.finish_reason == "length":
            log.warning("LLM answer cut at max_tokens (%d characters kept)", len(text))
        return text


class OpenAILLM(LLM):
    """Chat completions through the ``openai`` package, against OpenAI or any compatible server
    (vLLM, Ollama, llama.cpp, LM Studio, TGI...).

    Thread-safe; usable from any number of threads and event loops at once (one async client per loop).
    ``stats`` keeps the totals. Use as a context manager, or call :meth:`close`, to drop connections.
    """

    def __init__(self, config: LLMConfig) -> None:
        if not isinstance(config, LLMConfig):
            raise ConfigError(f"OpenAILLM needs an LLMConfig, got {type(config).__name__}")
        if not config.model:
            raise ConfigError("no LLM model set: pass LLMConfig(model=...) or set ISORAG_LLM_MODEL")
        try:
            import openai
        except ModuleNotFoundError as e:
            raise ConfigError("the OpenAI client is missing: pip install openai") from e
        self._openai = openai
        self.config = config
        self.stats = LLMStats()
        self._limiter = _Limiter(config.concurrency)
        api_key = (
            config.api_key
            or os.environ.get("ISORAG_LLM_API_KEY")
            or os.environ.get("OPENAI_API_KEY")
            # local servers ignore the key, but the client insists on one
            or ("not-needed" if config.base_url else None)
        )
        register(api_key)
        self._client_args: dict[str, Any] = {
            "api_key": api_key,
            "base_url": config.base_url,
            "timeout": config.timeout,
            "max_retries": 0,  # retried here, so every retry is counted and logged
        }
        try:
            self._client = openai.OpenAI(**self._client_args)
        except openai.OpenAIError as e:
            raise ConfigError(f"cannot set up the OpenAI client: {e}") from e
        self._aclients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._aclients_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAILLM(model={self.config.model!r}, base_url={mask_uri(self.config.base_url)!r})"

    # -- plumbing ----------------------------------------------------------------------------------------

    def _aclient(self) -> Any:
        loop = asyncio.get_running_loop()
        with self._aclients_lock:
            client = self._aclients.get(loop)
            if client is None:
                client = self._openai.AsyncOpenAI(**self._client_args)
                self._aclients[loop] = client
            return client

    def _params(self, prompt: str, system: str | None, stream: bool) -> dict[str, Any]:
        c = self.config
        params: dict[str, Any] = {
            "model": c.model,
            "messages": _messages(prompt, system),
            "temperature": c.temperature,
            "max_tokens": c.max_tokens,
        }
        if c.top_p is not None:
            params["top_p"] = c.top_p
        if c.seed is not None:
            params["seed"] = c.seed
        if stream:
            params["stream"] = True
            params["stream_options"] = {"include_usage": True}
        return params

    def _retry_delay(self, exc: Exception, attempt: int) -> float:
        """How long to wait before the next attempt after ``exc``; raises LLMError when there is none."""
        openai = self._openai
        if isinstance(exc, openai.APITimeoutError):
            raise LLMError(f"timed out after {self.config.timeout:g}s ({self.config.model})") from exc
        status = getattr(exc, "status_code", None)
        if isinstance(exc, openai.APIStatusError) and status is not None:
            if status != 429 and status < 500:
                raise LLMError(f"HTTP {status} from the LLM endpoint: {_error_text(exc)}", _body(exc)) from exc
            what = f"HTTP {status}"
        elif isinstance(exc, openai.APIConnectionError):
            what = f"connection error ({exc.__cause__ or exc})"
        else:
            raise LLMError(f"the LLM call failed: {type(exc).__name__}: {exc}") from exc
        if attempt >= self.config.max_retries:
            raise LLMError(
                f"{what} from the LLM endpoint, still after {attempt + 1} attempt(s): {_error_text(exc)}",
                _body(exc),
            ) from exc
        retry_after = _retry_after(getattr(exc, "response", None))
        if retry_after is not None and retry_after > MAX_RETRY_AFTER_S:
            raise LLMError(
                f"{what}: the endpoint asks to retry after {retry_after:g}s (more than {MAX_RETRY_AFTER_S:g}s)",
                _body(exc),
            ) from exc
        if retry_after is None:
            base = min(self.config.retry_backoff * 2**attempt, MAX_BACKOFF_S)
            delay = base * (0.5 + random.random() / 2)  # jitter spreads out clients that failed together
        else:
            delay = retry_after
        self.stats.add(retries=1)
        log.warning(
            "LLM %s; retry %d/%d in %.2fs", scrub(what), attempt + 1, self.config.max_retries, delay
        )
        return delay

    def _call(self, fn: Any) -> Any:
        attempt = 0
        while True:
            try:
                return fn()
            except Exception as e:  # not only OpenAIError: a garbled body raises ValueError
                delay = self._retry_delay(e, attempt)
            time.sleep(delay)
            attempt += 1

    async def _acall(self, fn: Any) -> Any:
        attempt = 0
        while True:
            try:
                return await fn()
            except Exception as e:  # not only OpenAIError: a garbled body raises ValueError
                delay = self._retry_delay(e, attempt)
            await asyncio.sleep(delay)
            attempt += 1

    @staticmethod
    def _whole(out: _Outcome, response: Any) -> _Outcome:
        """Fold a whole completion into ``out`` (a response without choices is an error, its usage not counted)."""
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise LLMError("the LLM endpoint returned no choices", str(response)[:2000])
        out.take_usage(getattr(response, "usage", None))
        choice = choices[0]
        out.finish_reason = choice.finish_reason
        message = choice.message
        if getattr(message, "refusal", None):
            out.refusal.append(message.refusal)
        if message.content:
            out.parts.append(message.content)
        return out

    @staticmethod
    def _chunk(out: _Outcome, chunk: Any) -> str:
        """Fold one streamed chunk into ``out``; the new text (maybe "")."""
        out.take_usage(getattr(chunk, "usage", None))
        if not chunk.choices:
            return ""
        choice = chunk.choices[0]
        if choice.finish_reason:
            out.finish_reason = choice.finish_reason
        delta = choice.delta
        if delta is None:
            return ""
        if getattr(delta, "refusal", None):
            out.refusal.append(delta.refusal)
        if delta.content:
            out.parts.append(delta.content)
            return delta.content
        return ""

    def _stream_error(self, exc: Exception) -> LLMError:
        if isinstance(exc, self._openai.APITimeoutError):
            return LLMError(f"timed out after {self.config.timeout:g}s while streaming ({self.config.model})")
        return LLMError(f"the LLM stream broke: {type(exc).__name__}: {exc}")

    # -- the four calls ----------------------------------------------------------------------------------

    def complete(self, prompt: str, *, system: str | None = None) -> str:
        params = self._params(prompt, system, stream=False)
        with _counted(self.stats, _Outcome()) as out:
            with self._limiter:
                self._whole(out, self._call(lambda: self._client.chat.completions.create(**params)))
            return out.check()

    async def acomplete(self, prompt: str, *, system: str | None = None) -> str:
        params = self._params(prompt, system, stream=False)
        client = self._aclient()
        with _counted(self.stats, _Outcome()) as out:
            await self._limiter.aacquire()
            try:
                response = await self._acall(lambda: client.chat.completions.create(**params))
            finally:
                self._limiter.release()
            self._whole(out, response)
            return out.check()

    def stream(self, prompt: str, *, system: str | None = None) -> Iterator[str]:
        """Tokens as the endpoint sends them. Only opening the stream is retried: once a token has been
        yielded, a broken stream is an LLMError. The refusal/empty checks run when the stream ends."""
        params = self._params(prompt, system, stream=True)
        with _counted(self.stats, _Outcome()) as out:
            with self._limiter:
                response = self._call(lambda: self._client.chat.completions.create(**params))
                try:
                    for chunk in response:
                        piece = self._chunk(out, chunk)
                        if piece:
                            yield piece
                except Exception as e:
                    raise self._stream_error(e) from e
                finally:
                    response.close()
            out.check()

    async def astream(self, prompt: str, *, system: str | None = None) -> AsyncIterator[str]:
        params = self._params(prompt, system, stream=True)
        client = self._aclient()
        with _counted(self.stats, _Outcome()) as out:
            await self._limiter.aacquire()
            try:
                response = await self._acall(lambda: client.chat.completions.create(**params))
                try:
                    async for chunk in response:
                        piece = self._chunk(out, chunk)
                        if piece:
                            yield piece
                except Exception as e:
                    raise self._stream_error(e) from e
                finally:
                    await response.close()
            finally:
                self._limiter.release()
            out.check()

    # -- lifecycle ---------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the HTTP connections of the sync client (async clients: :meth:`aclose`)."""
        self._client.close()

    async def aclose(self) -> None:
        """Close the async client of the running event loop, if one was made."""
        with self._aclients_lock:
            client = self._aclients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    def __enter__(self) -> OpenAILLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> OpenAILLM:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
        self.close()


def _retry_after(response: Any) -> float | None:
    """Seconds asked for by ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), if any."""
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(float(raw_ms) / 1000.0, 0.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return max(seconds, 0.0) if math.isfinite(seconds) else None


def _body(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if body is None:
        return ""
    return body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)


def _error_text(exc: Exception) -> str:
    return _clip(getattr(exc, "message", None) or str(exc))


def _clip(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------------------------
# langchain-core chat models
# ---------------------------------------------------------------------------------------------------------


def _langchain_messages(prompt: str, system: str | None) -> list[Any]:
    try:
        from langchain_core.messages import HumanMessage, SystemMessage
    except ModuleNotFoundError as e:
        raise ConfigError(f"LangChainLLM needs langchain-core: {_LANGCHAIN_HINT}") from e
    messages: list[Any] = [SystemMessage(content=system)] if system else []
    messages.append(HumanMessage(content=prompt))
    return messages


def _content_text(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
        return "".join(parts)
    return "" if content is None else str(content)


class LangChainLLM(LLM):
    """Any langchain-core chat model (``BaseChatModel``: ChatOpenAI, ChatOllama, ChatAnthropic...).

    Retries and timeouts are the model's own settings; this wrapper adds the concurrency cap (``concurrency``,
    default 4), the stats and the engine's errors: whatever the model raises becomes an LLMError.
    """

    def __init__(self, model: Any, *, concurrency: int = 4) -> None:
        try:
            from langchain_core.language_models import BaseChatModel
        except ModuleNotFoundError as e:
            raise ConfigError(f"LangChainLLM needs langchain-core: {_LANGCHAIN_HINT}") from e
        if not isinstance(model, BaseChatModel):
            raise ConfigError(f"LangChainLLM needs a langchain-core BaseChatModel, got {type(model).__name__}")
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(f"concurrency must be a positive int, got {concurrency!r}")
        self.model = model
        self.stats = LLMStats()
        self._limiter = _Limiter(concurrency)

    def __repr__(self) -> str:
        return f"LangChainLLM({type(self.model).__name__})"

    @staticmethod
    def _check(text: str) -> str:
        if not text.strip():
            raise LLMError("the model returned an empty answer", text)
        return text

    @staticmethod
    def _wrap(exc: Exception) -> LLMError:
        return LLMError(f"the chat model failed: {type(exc).__name__}: {exc}")

    def complete(self, prompt: str, *, system: str | None = None) -> str:
        messages = _langchain_messages(prompt, system)
        with _counted(self.stats, _ChatUsage()) as usage:
            with self._limiter:
                try:
                    message = self.model.invoke(messages)
                except Exception as e:
                    raise self._wrap(e) from e
            usage.take(message)
            return self._check(_content_text(message.content))

    async def acomplete(self, prompt: str, *, system: str | None = None) -> str:
        messages = _langchain_messages(prompt, system)
        with _counted(self.stats, _ChatUsage()) as usage:
            await self._limiter.aacquire()
            try:
                message = await self.model.ainvoke(messages)
            except Exception as e:
                raise self._wrap(e) from e
            finally:
                self._limiter.release()
            usage.take(message)
            return self._check(_content_text(message.content))

    def stream(self, prompt: str, *, system: str | None = None) -> Iterator[str]:
        messages, parts = _langchain_messages(prompt, system), []
        with _counted(self.stats, _ChatUsage()) as usage:
            with self._limiter:
                try:
                    for chunk in self.model.stream(messages):
                        usage.take(chunk)
                        piece = _content_text(chunk.content)
                        if piece:
                            parts.append(piece)
                            yield piece
                except Exception as e:
                    raise self._wrap(e) from e
            self._check("".join(parts))

    async def astream(self, prompt: str, *, system: str | None = None) -> AsyncIterator[str]:
        messages, parts = _langchain_messages(prompt, system), []
        with _counted(self.stats, _ChatUsage()) as usage:
            await self._limiter.aacquire()
            try:
                async for chunk in self.model.astream(messages):
                    usage.take(chunk)
                    piece = _content_text(chunk.content)
                    if piece:
                        parts.append(piece)
                        yield piece
            except Exception as e:
                raise self._wrap(e) from e
            finally:
                self._limiter.release()
            self._check("".join(parts))


class _ChatUsage(_Tokens):
    """The token counts of a langchain-core message (the last chunk of a stream that has any)."""

    def take(self, message: Any) -> None:
        usage = getattr(message, "usage_metadata", None)
        if usage:
            self.prompt_tokens = usage.get("input_tokens") or 0
            self.completion_tokens = usage.get("output_tokens") or 0


def _is_langchain_chat_model(obj: Any) -> bool:
    if "langchain_core" not in sys.modules:  # such an object cannot exist without it
        return False
    from langchain_core.language_models import BaseChatModel

    return isinstance(obj, BaseChatModel)


# ---------------------------------------------------------------------------------------------------------
# Choosing the LLM
# ---------------------------------------------------------------------------------------------------------


def make_llm(llm: LLM | LLMConfig | Any | None = None) -> LLM | None:
    """The LLM to use for ``llm`` as a user passed it.

    * ``None``: an :class:`OpenAILLM` when the environment configures one (:meth:`LLMConfig.from_env`),
      else ``None`` (the engine then works without an LLM).
    * an :class:`LLM`: itself.
    * an :class:`LLMConfig`: an :class:`OpenAILLM`; a config without a model and an endpoint is a ConfigError
      (an explicit config that cannot work is a mistake, not a request for no LLM).
    * a langchain-core ``BaseChatModel``: a :class:`LangChainLLM` around it.
    """
    if llm is None:
        config = LLMConfig.from_env()
        return OpenAILLM(config) if config.configured else None
    if isinstance(llm, LLM):
        return llm
    if isinstance(llm, LLMConfig):
        if not llm.configured:
            missing = [n for n, ok in (("model", llm.model), ("base_url or api_key", llm.base_url or llm.api_key))
                       if not ok]
            raise ConfigError(f"LLMConfig is missing {' and '.join(missing)}")
        return OpenAILLM(llm)
    if _is_langchain_chat_model(llm):
        return LangChainLLM(llm)
    raise ConfigError(
        f"cannot use a {type(llm).__name__} as the LLM: pass an LLMConfig, an engine.llm.LLM "
        "or a langchain-core chat model"
    )
