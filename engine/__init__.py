"""isorag: exact top-k subgraph retrieval over Neo4j + Milvus for knowledge-graph RAG.

    from engine import Engine
    with Engine(kg="demo") as eng:
        answer = eng.ask("who directed Heat")          # LLM from ISORAG_LLM_* (or Engine(llm=LLMConfig(...)))
        answer = eng.ask("who directed Heat", pattern={"triples": [["Heat", "directed_by", "UNKNOWN 1"]]})
        verdict = eng.verify("Heat was directed by Michael Mann.",
                             pattern={"triples": [["Heat", "directed_by", "Michael Mann"]]})

Importing this package starts nothing and imports no database driver, model or LLM client: they load at first use.
"""

from __future__ import annotations

from engine._config import EngineConfig, MatchSettings, MilvusSettings, Neo4jSettings, VerifySettings
from engine._engine import Engine
from engine._errors import *  # noqa: F403 - the error tree is re-exported whole (its __all__ below)
from engine._errors import __all__ as _errors_all
from engine.answering import (
    LABELS,
    NOT_ENOUGH_INFO,
    REFUTED,
    SUPPORTED,
    Answer,
    AnswerEvent,
    PatternEvent,
    ScoredEvent,
    SubgraphsEvent,
    TokenEvent,
    Verdict,
)
from engine.llm import LLM, LangChainLLM, LLMConfig, LLMStats, OpenAILLM, make_llm
from engine.retrieval.pattern import Pattern
from engine.retrieval.results import AnswerEntity, Entity, RetrievalResult, Subgraph, Triple

__version__ = "0.1.0"

__all__ = [
    "__version__",
    # the engine and its configuration
    "Engine",
    "EngineConfig",
    "MatchSettings",
    "MilvusSettings",
    "Neo4jSettings",
    "VerifySettings",
    # patterns and retrieval results
    "Pattern",
    "RetrievalResult",
    "Subgraph",
    "Triple",
    "Entity",
    "AnswerEntity",
    # answers and verdicts
    "Answer",
    "Verdict",
    "SUPPORTED",
    "REFUTED",
    "NOT_ENOUGH_INFO",
    "LABELS",
    "PatternEvent",
    "ScoredEvent",
    "SubgraphsEvent",
    "TokenEvent",
    "AnswerEvent",
    # LLMs
    "LLM",
    "LLMConfig",
    "LLMStats",
    "OpenAILLM",
    "LangChainLLM",
    "make_llm",
    # errors
    *_errors_all,
]
