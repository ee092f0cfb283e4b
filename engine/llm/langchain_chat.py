"""langchain-core chat models: :class:`LangChainLLM` wraps a ``BaseChatModel`` (langchain-core imported at first
use)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from engine._errors import ConfigError, LLMError
from engine.llm.base import LLM, LLMStats, counted, Tokens
from engine.llm.limiter import Limiter

__all__ = ["LangChainLLM"]

_LANGCHAIN_HINT = "pip install 'langchain-core==1.7.2'  (or: pip install 'isorag[langchain]')"


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
        self._limiter = Limiter(concurrency)

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
        with counted(self.stats, _ChatUsage()) as usage:
            with self._limiter:
                try:
                    message = self.model.invoke(messages)
                except Exception as e:
                    raise self._wrap(e) from e
            usage.take(message)
            return self._check(_content_text(message.content))

    async def acomplete(self, prompt: str, *, system: str | None = None) -> str:
        messages = _langchain_messages(prompt, system)
        with counted(self.stats, _ChatUsage()) as usage:
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
        with counted(self.stats, _ChatUsage()) as usage:
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
        with counted(self.stats, _ChatUsage()) as usage:
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


class _ChatUsage(Tokens):
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
