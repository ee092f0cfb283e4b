"""The CLI's errors that only a server can give, on the real Neo4j and Milvus: one line, no traceback, nothing
written (the rest, with both servers' URIs on closed ports: tests/unit/test_cli_errors.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.cli import EXIT_ERROR

from helpers.cli import DEAD_MILVUS, Files, argv, files, run  # noqa: F401  (files: the fixture)


def test_a_load_with_nothing_to_load_writes_nothing(make_engine: Any, tmp_path: Path) -> None:
    """The API refuses it too, before the schema or a collection is made."""
    from engine._errors import InputError
    from pymilvus import utility

    eng = make_engine()
    p = tmp_path / "bad.txt"
    p.write_bytes(b"caf\xe9|r|x\nno delimiter\n")
    with pytest.raises(InputError, match="every line was skipped"):
        eng.load(p, "hrt", progress=False)
    assert eng.vectors.existing_kinds() == []
    assert not any(eng.kg in n for n in utility.list_collections(using=eng.vectors._alias))
    assert eng.graph.stats()["entities"] == 0


def test_unreachable_milvus_is_one_line(files: Files, neo4j_uri: str, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("NEO4J_URI", neo4j_uri)  # (read first, and fine)
    rc, out, err = run(argv(files, "stats"), capsys)
    assert rc == EXIT_ERROR and err.splitlines() == [err.strip()] and "Traceback" not in err
    assert err.startswith(f"isorag: error: Milvus is unavailable at {DEAD_MILVUS}")
