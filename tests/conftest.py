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
    if hasattr(config, "workerinput"):  # a pytest-xdist worker (`make test`): the order its controller deals in
        items[:] = _longest_first(items)


def _longest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The test files marked ``long`` first, then the other integration files, then the unit tests, each group in
    the order collected: with ``--dist loadfile --no-loadscope-reorder`` the workers take files in this order, so
    the files of minutes start at once and the unit tests' seconds fill the end (xdist's own order, by the number
    of tests in a file, left a test file of four minutes for the end). A file's tests stay together."""
    rank: dict[Path, int] = {}
    for item in items:
        path = Path(item.path)
        here = 0 if item.get_closest_marker("long") else 1 if item.get_closest_marker("integration") else 2
        rank[path] = min(rank.get(path, here), here)
    return sorted(items, key=lambda item: rank[Path(item.path)])


@pytest.fixture(scope="session")
def embedder() -> Any:
    from engine.embeddings import load_embedder

    return load_embedder()
