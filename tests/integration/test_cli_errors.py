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


def test_a_change_set_to_a_kg_that_was_never_made_is_refused(make_engine: Any, tmp_path: Path, neo4j_uri: str,
                                                             milvus_uri: str, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A mistyped --kg: before this check, `apply` made a new KG of the change set's additions and reported them
    applied. Now it is refused, by the CLI in one line and by the API with a KGNotFoundError, and nothing is written;
    a KG made by a load and emptied by change sets can still be changed (it keeps its identity)."""
    from engine._errors import KGNotFoundError
    from engine.changes.ops import AddTriple, RemoveTriple
    from engine.cli import main

    from helpers.cli import assert_one_line_error

    eng = make_engine(llm=False)
    changes = tmp_path / "c.jsonl"
    changes.write_text('{"op": "add", "head": "Heat", "relation": "directed_by", "tail": "Michael Mann"}\n',
                       encoding="utf-8")
    monkeypatch.setenv("NEO4J_URI", neo4j_uri)
    monkeypatch.setenv("MILVUS_URI", milvus_uri)
    rc = main(["apply", str(changes), "--kg", eng.kg, "--quiet"])
    out, err = capsys.readouterr()
    assert_one_line_error(rc, out, err, f"KG {eng.kg!r} does not exist", "load it first")
    with pytest.raises(KGNotFoundError):
        eng.apply([AddTriple("Heat", "directed_by", "Michael Mann")], progress=False)
    add = tmp_path / "add.txt"
    add.write_text("Heat|directed_by|Michael Mann\n", encoding="utf-8")
    with pytest.raises(KGNotFoundError):
        eng.apply(add=add, fmt="hrt", progress=False)
    assert eng.graph.identity() is None and not any(eng.graph.stats().values())
    assert eng.vectors.existing_kinds() == []

    kb = tmp_path / "kb.txt"
    kb.write_text("Heat|directed_by|Michael Mann\n", encoding="utf-8")
    eng.load(kb, "hrt", progress=False)
    eng.apply([RemoveTriple("Heat", "directed_by", "Michael Mann")], progress=False)
    assert eng.graph.stats()["triples"] == 0
    rep = eng.apply([AddTriple("Thief", "directed_by", "Michael Mann")], progress=False)
    assert rep.added == 1 and eng.graph.stats()["triples"] == 1
