"""LLM clients: the interface and its stats (base), settings (config), the concurrency cap (limiter), one module
per provider (openai_compat: any OpenAI-compatible endpoint; langchain_chat: any langchain-core chat model), and
make_llm (factory)."""

from engine.llm.base import LLM, LLMStats, metered
from engine.llm.config import NO_LLM_HELP, LLMConfig
from engine.llm.factory import make_llm
from engine.llm.langchain_chat import LangChainLLM
from engine.llm.openai_compat import OpenAILLM

__all__ = [
    "LLM",
    "NO_LLM_HELP",
    "LLMConfig",
    "LLMStats",
    "LangChainLLM",
    "OpenAILLM",
    "make_llm",
    "metered",
]
