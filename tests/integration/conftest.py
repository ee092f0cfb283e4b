"""Fixtures on the real local Neo4j and Milvus (or NEO4J_URI / MILVUS_URI), one KG per test."""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Iterator

import pytest

from helpers.kg import unique_kg


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
    from engine.servers.neo4j import ensure_local_neo4j

    return ensure_local_neo4j()


@pytest.fixture(scope="session")
def milvus_uri() -> str:
    uri = os.environ.get("MILVUS_URI")
    if uri:
        return uri
    from engine.servers.milvus import ensure_local_milvus

    return ensure_local_milvus()


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
    from engine._errors import KGLockedError, KGNotFoundError

    for eng in made:
        try:
            try:
                eng.drop()
            except KGLockedError as e:  # a loader the test killed: its lease runs out, then the KG can go
                time.sleep(e.expires_in_s + 1)
                eng.drop()
        except KGNotFoundError:
            pass  # nothing was loaded, or another engine on the KG dropped it
        finally:
            eng.close()


@pytest.fixture
def engine(make_engine: Callable[..., Any]) -> Any:
    return make_engine()
