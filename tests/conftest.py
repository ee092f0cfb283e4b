"""Shared fixtures: the real local Neo4j and Milvus (or NEO4J_URI / MILVUS_URI), one KG per test."""

from __future__ import annotations

import os
import uuid
from typing import Any, Callable, Iterator

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _docker_available() -> tuple[bool, str]:
    """Probe for a Docker engine once (testcontainers needs one; this machine has only the client)."""
    try:
        import docker  # type: ignore[import-not-found]

        docker.from_env(timeout=2).ping()
        return True, ""
    except Exception as e:  # noqa: BLE001 - any failure means: no engine here
        return False, f"no Docker engine ({type(e).__name__}); using the local Neo4j and Milvus servers"


DOCKER, DOCKER_WHY = _docker_available()


@pytest.fixture(scope="session")
def neo4j_uri() -> str:
    uri = os.environ.get("NEO4J_URI")
    if uri:
        return uri
    from engine.local_neo4j import ensure_local_neo4j

    return ensure_local_neo4j()


@pytest.fixture(scope="session")
def milvus_uri() -> str:
    uri = os.environ.get("MILVUS_URI")
    if uri:
        return uri
    from engine.local_milvus import ensure_local_milvus

    return ensure_local_milvus()


@pytest.fixture(scope="session")
def embedder() -> Any:
    from engine.embeddings import load_embedder

    return load_embedder()


def unique_kg(prefix: str = "t") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def make_engine(neo4j_uri: str, milvus_uri: str, embedder: Any) -> Iterator[Callable[..., Any]]:
    """``make_engine(**overrides)`` -> an Engine on a fresh KG of its own, dropped from both stores afterwards."""
    from engine._config import EngineConfig, MilvusSettings, Neo4jSettings
    from engine._engine import Engine

    made: list[Any] = []

    def factory(kg: str | None = None, **overrides: Any) -> Any:
        cfg = EngineConfig(
            kg=kg or unique_kg(),
            neo4j=Neo4jSettings.from_env(uri=neo4j_uri),
            milvus=MilvusSettings.from_env(uri=milvus_uri),
        )
        eng = Engine(cfg, embedder=embedder, **overrides)
        made.append(eng)
        return eng

    yield factory
    from engine._errors import KGNotFoundError

    for eng in made:
        try:
            eng.drop()
        except KGNotFoundError:
            pass  # nothing was loaded, or another engine on the KG dropped it
        finally:
            eng.close()


@pytest.fixture
def engine(make_engine: Callable[..., Any]) -> Any:
    return make_engine()


from llm_server import llm_server  # noqa: E402,F401  (the scripted OpenAI-compatible server fixture)


def shared_kg(prefix: str, records: list[Any], neo4j_uri: str, milvus_uri: str, embedder: Any) -> Iterator[Callable[..., Any]]:
    """Load ``records`` once into a fresh KG; yield ``factory(llm=False, **overrides)`` -> an Engine on it.

    For module-scoped fixtures: the engines are closed and the KG dropped from both stores afterwards.
    """
    from engine._config import EngineConfig, MilvusSettings, Neo4jSettings
    from engine._engine import Engine
    from loaders.bulk import BulkLoader, LoadSummary

    cfg = EngineConfig(kg=unique_kg(prefix), neo4j=Neo4jSettings(uri=neo4j_uri), milvus=MilvusSettings(uri=milvus_uri))
    owner = Engine(cfg, llm=False, embedder=embedder)
    BulkLoader(owner.graph, owner.vectors, embedder, progress=False).load_records(records, LoadSummary())
    made: list[Any] = []

    def factory(llm: Any = False, **overrides: Any) -> Any:
        eng = Engine(cfg, llm=llm, embedder=embedder, **overrides)
        made.append(eng)
        return eng

    yield factory
    for eng in made:
        eng.close()
    owner.drop()
    owner.close()
