"""OpenAI-compatible endpoints: :class:`OpenAILLM`, chat.completions over HTTP through the ``openai`` package
(imported at first use).

Retries 429/5xx/connection errors itself (the openai client's own retries are off, so each retry is counted and
logged), with exponential backoff, jitter and ``Retry-After``; a timeout, a refusal or another 4xx is an
:class:`~engine._errors.LLMError` at once. At most ``concurrency`` calls are in flight, counted across threads and
asyncio tasks together.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import os
import random
import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from typing import Any

from engine._errors import ConfigError, LLMError
from engine._secrets import mask_uri, register, scrub
from engine.llm.base import LLM, LLMStats, clip, counted, chat_messages, Outcome
from engine.llm.config import LLMConfig
from engine.llm.limiter import Limiter

__all__ = ["MAX_BACKOFF_S", "MAX_RETRY_AFTER_S", "OpenAILLM"]

log = logging.getLogger("isorag.llm")

#: A Retry-After longer than this is not worth waiting for inside one query: fail instead.
MAX_RETRY_AFTER_S = 60.0
#: Exponential backoff never waits longer than this between two attempts.
MAX_BACKOFF_S = 20.0


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
        self._limiter = Limiter(config.concurrency)
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
            "messages": chat_messages(prompt, system),
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
            except Exception as e:  # noqa: BLE001 - not only OpenAIError: a garbled body raises ValueError
                delay = self._retry_delay(e, attempt)
            time.sleep(delay)
            attempt += 1

    async def _acall(self, fn: Any) -> Any:
        attempt = 0
        while True:
            try:
                return await fn()
            except Exception as e:  # noqa: BLE001 - not only OpenAIError: a garbled body raises ValueError
                delay = self._retry_delay(e, attempt)
            await asyncio.sleep(delay)
            attempt += 1

    @staticmethod
    def _whole(out: Outcome, response: Any) -> Outcome:
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
    def _chunk(out: Outcome, chunk: Any) -> str:
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
        with counted(self.stats, Outcome()) as out:
            with self._limiter:
                self._whole(out, self._call(lambda: self._client.chat.completions.create(**params)))
            return out.check()

    async def acomplete(self, prompt: str, *, system: str | None = None) -> str:
        params = self._params(prompt, system, stream=False)
        client = self._aclient()
        with counted(self.stats, Outcome()) as out:
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
        with counted(self.stats, Outcome()) as out:
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
        with counted(self.stats, Outcome()) as out:
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
    return clip(getattr(exc, "message", None) or str(exc))
