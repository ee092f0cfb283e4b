"""The names ``engine`` exports are its public API: adding one is a decision, removing one breaks callers."""

from __future__ import annotations

import subprocess
import sys

import engine

EXPORTED = {
    "__version__",
    "Engine", "EngineConfig", "MatchSettings", "MilvusSettings", "Neo4jSettings", "VerifySettings",
    "Pattern", "RetrievalResult", "Subgraph", "Triple", "Entity", "AnswerEntity",
    "Answer", "Verdict", "SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO", "LABELS",
    "PatternEvent", "ScoredEvent", "SubgraphsEvent", "TokenEvent", "AnswerEvent",
    "LLM", "LLMConfig", "LLMStats", "OpenAILLM", "LangChainLLM", "make_llm",
    "IsoragError", "ConfigError", "StoreError", "StoreUnavailableError", "SchemaMismatchError", "LocalServerError",
    "OfflineImportError", "KGLockedError", "KGNotFoundError",
    "InputError", "MalformedInputError", "PatternError", "PatternParseError", "UnknownRelationError",
    "DeadlineExceeded", "LLMError", "CheckpointError",
}


def test_exported_names_are_pinned() -> None:
    assert set(engine.__all__) == EXPORTED
    assert len(engine.__all__) == len(set(engine.__all__))  # no name twice
    for name in engine.__all__:
        assert hasattr(engine, name), name


def test_exported_objects_come_from_their_modules() -> None:
    from engine._engine import Engine
    from engine._errors import IsoragError, LLMError
    from engine.answering import Answer, Verdict

    assert engine.Engine is Engine and engine.Answer is Answer and engine.Verdict is Verdict
    assert issubclass(engine.LLMError, IsoragError) and engine.LLMError is LLMError
    assert engine.LABELS == ("SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO")


def test_import_is_light() -> None:
    """Importing the package loads no database driver, model, LLM client or langchain."""
    code = ("import sys, engine; heavy = ['torch', 'neo4j', 'pymilvus', 'openai', 'sentence_transformers', "
            "'langchain_core', 'numpy']; print([m for m in heavy if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_engine_takes_its_embedder() -> None:
    """``Engine(embedder=...)`` uses the one given (shared, or a stand-in) and loads no model of its own."""
    stand_in = object()
    eng = engine.Engine(engine.EngineConfig(kg="api_probe"), llm=False, embedder=stand_in)
    assert eng.embedder is stand_in
