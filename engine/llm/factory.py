"""Choosing the LLM: :func:`make_llm`, what the engine calls to turn a user's argument (or the environment) into
an LLM."""

from __future__ import annotations

from typing import Any

from engine._errors import ConfigError
from engine.llm.base import LLM
from engine.llm.config import LLMConfig
from engine.llm.langchain_chat import LangChainLLM, _is_langchain_chat_model
from engine.llm.openai_compat import OpenAILLM

__all__ = ["make_llm"]


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
