"""What every test may use: the embedder, the scripted LLM server; the ``integration`` mark, given by folder.

Tests live in ``unit/`` (no server, no network: pure functions, parsers, models on CPU) and ``integration/`` (the
real Neo4j and Milvus, CLI runs against them, the wheel). Every test under ``integration/`` is marked
``integration`` here, so ``pytest -m "not integration"`` (``make test-unit``) runs the unit tests only. Shared
helpers are in ``helpers/``, the fixtures on the servers in ``integration/conftest.py``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from helpers.llm_server import llm_server  # noqa: F401  (the scripted OpenAI-compatible server fixture)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

INTEGRATION = Path(__file__).resolve().parent / "integration"


@pytest.hookimpl(tryfirst=True)  # before -m deselects by mark
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.integration)
        elif item.get_closest_marker("integration"):
            raise pytest.UsageError(f"{item.nodeid} is marked integration outside tests/integration/: "
                                    "the mark is given by folder, move the test there")


@pytest.fixture(scope="session")
def embedder() -> Any:
    from engine.embeddings import load_embedder

    return load_embedder()
