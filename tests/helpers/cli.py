"""Inputs for the CLI's error tests: good in every way but the one under test, with the servers' URIs on closed ports
(an error found by a server, not by the check, would read "unavailable")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.cli import EXIT_ERROR, main

DEAD_NEO4J = "bolt://127.0.0.1:9"
DEAD_MILVUS = "http://127.0.0.1:9"
KG = "cli_never_written"
PATTERN = '{"triples": [["Heat", "directed_by", "UNKNOWN 1"]]}'


class Files:
    """Inputs that are good in every way but the one under test."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.hrt = self._write("kb.txt", "Heat|directed_by|Michael Mann\n")
        self.claims = self._write("claims.jsonl", '{"id": "c1", "claim": "Heat was directed by Michael Mann", '
                                                  '"pattern": ' + PATTERN.replace("UNKNOWN 1", "Michael Mann") + '}\n')
        self.qa = self._write("qa.jsonl", '{"question": "who directed Heat", "topics": ["Heat"], '
                                          '"answers": ["Michael Mann"]}\n')
        self.items = self._write("items.jsonl", '{"id": "q1", "question": "who directed Heat", "answers": '
                                                '["Michael Mann"], "pattern": ' + PATTERN + '}\n')
        self.rel_paths = self._write("paths.txt", "directed_by\n")
        self.changes = self._write("changes.jsonl", '{"op": "add", "head": "Heat", "relation": "directed_by", '
                                                    '"tail": "Michael Mann"}\n')
        self.pattern = self._write("pattern.json", PATTERN)
        (root / "tables").mkdir()
        self.nodes = self._write("tables/nodes.csv", "id,name\n1,Heat\n2,Michael Mann\n")
        self.edges = self._write("tables/edges.csv", "source,relation,target\n1,directed_by,2\n")
        self.out = str(root / "out" / "result.jsonl")
        self.directory = str(root)
        self.missing = str(root / "no" / "such.jsonl")
        self.empty = self._write("empty.jsonl", "")
        self.under_a_file = str(Path(self.hrt) / "x.jsonl")

    def _write(self, name: str, text: str) -> str:
        p = self.root / name
        p.write_text(text, encoding="utf-8")
        return str(p)

    def not_utf8(self, suffix: str) -> str:
        """A file whose one line holds a byte that is not UTF-8, in the format that ``suffix`` names."""
        p = self.root / f"latin1{suffix}"
        body = {".jsonl": b'{"id": "c\xff", "claim": "caf\xe9", "question": "caf\xe9", "topics": ["x"], '
                          b'"answers": ["y"]}\n',
                ".json": b'{"triples": [["caf\xe9", "r", "UNKNOWN 1"]]}',
                ".txt": b"caf\xe9|directed_by|x\n"}[suffix]
        p.write_bytes(body)
        return str(p)


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Files:
    monkeypatch.setenv("NEO4J_URI", DEAD_NEO4J)
    monkeypatch.setenv("MILVUS_URI", DEAD_MILVUS)
    for var in [v for v in os.environ if v.startswith("ISORAG_") and v not in ("ISORAG_HOME",)]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("ISORAG_HOME", str(tmp_path / "home"))
    return Files(tmp_path)


def base(f: Files) -> dict[str, tuple[list[tuple[str, str]], list[tuple[str, str | None]]]]:
    """Per subcommand: its positionals ``[(dest, value)]`` and options ``[(flag, value or None)]``, all good."""
    return {
        "neo4j": ([("action", "status")], []),
        "milvus": ([("action", "status")], []),
        "load": ([("path", f.hrt)], [("--kg", KG), ("--quiet", None)]),
        "stats": ([], [("--kg", KG)]),
        "match": ([("pattern", PATTERN)], [("--kg", KG)]),
        "drop": ([], [("--kg", KG)]),
        "ask": ([("question", "who directed Heat")], [("--pattern", PATTERN), ("--kg", KG), ("--no-llm", None)]),
        "verify": ([("claims", f.claims)], [("--out", f.out), ("--kg", KG), ("--no-llm", None), ("--quiet", None)]),
        "synth": ([], [("--out", f.out), ("--kg", KG), ("--no-llm", None)]),
        "eval": ([("file", f.items)], [("--kg", KG), ("--no-llm", None), ("--quiet", None)]),
        "train-scorer": ([], [("--qa", f.qa), ("--out", f.out), ("--kg", KG), ("--quiet", None)]),
        "train-generator": ([], [("--qa", f.qa), ("--out", f.out), ("--kg", KG), ("--quiet", None)]),
        "demo": ([], [("--kg", KG), ("--quiet", None)]),
        "apply": ([("changes", f.changes)], [("--kg", KG), ("--quiet", None)]),
        "check": ([], [("--kg", KG), ("--quiet", None)]),
        "sync": ([("path", f.hrt)], [("--kg", KG), ("--quiet", None)]),
        "serve": ([], [("--port", "0"), ("--keys", f.out), ("--state-dir", f.directory)]),
        "keys": ([("action", "list")], [("--keys", f.out)]),
    }


def argv(f: Files, command: str, flag: str | None = None, value: str | None = None) -> list[str]:
    """``command``'s good arguments, with ``flag`` (an option, or a positional's dest) set to ``value``."""
    positionals, options = base(f)[command]
    out = [command]
    for dest, v in positionals:
        out.append(value if dest == flag else v)  # type: ignore[arg-type]
    replaced = False
    for opt, v in options:
        if opt == flag:
            replaced = True
            v = value
        out.extend([opt] if v is None else [opt, v])
    if flag is not None and flag.startswith("-") and not replaced:
        # the --flag=value form, so that a value starting with '-' is read as the value
        out.append(f"{flag}={value}" if flag.startswith("--") else f"{flag}{value}")
    return out


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(args)
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_line_error(rc: int, out: str, err: str, *needles: str, status: int = EXIT_ERROR,
                          prefix: str = "isorag: error: ") -> str:
    lines = err.splitlines()
    assert "Traceback" not in out + err, err
    assert rc == status, (rc, err)
    assert len(lines) == 1 and lines[0].startswith(prefix), err
    assert "unavailable" not in lines[0], f"found by a server, not by the check: {lines[0]}"
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]
