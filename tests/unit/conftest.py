"""Unit tests start and reuse no server: the fixtures on the servers (``neo4j_uri``, ``make_engine``, ...) live in
integration/conftest.py and are not found here, and the local Neo4j and Milvus refuse to start."""

from __future__ import annotations

from typing import Iterator

import pytest


@pytest.fixture(autouse=True)
def _no_local_servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from engine.servers.milvus import LocalMilvus
    from engine.servers.neo4j import LocalNeo4j

    asked: list[str] = []

    def refuse(self: object, *args: object, **kwargs: object) -> str:
        asked.append(type(self).__name__)
        raise AssertionError(f"a unit test asked for a local server ({type(self).__name__}.start): "
                             "it belongs in tests/integration/")

    monkeypatch.setattr(LocalNeo4j, "start", refuse)
    monkeypatch.setattr(LocalMilvus, "start", refuse)
    yield
    assert not asked, f"a unit test asked for a local server ({', '.join(asked)}): it belongs in tests/integration/"
