"""The documentation stands on the repository alone and stays complete: no file cites a document the repository
does not contain (a design note, a digest of papers, numbered papers, a README section that moved), docs/cli.md
documents every command and option of ``isorag``, and docs/configuration.md every environment variable the engine
reads."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import re
from pathlib import Path

from helpers import ROOT

#: what a citation of a document outside the repository looks like
CITATIONS = [
    re.compile(r"\b" + "DESIGN" + r"(\.md)?\b\s*(§|section\b)|\b" + "DESIGN" + r"\.md\b"),
    re.compile(r"\b" + "DIGEST" + r"\b"),
    re.compile(r"\b[Pp]aper 0\d\d\b"),
    re.compile(r"\bTEST-GAPS\b|\bSTYLE\.md\b|\bpapers/"),
    re.compile(r"\bREADME\s*[,(]\s*[\"'“]?[A-Z][a-z]"),  # "README, Triple scorer": a section that moved to docs/
]
TEXT = {".py", ".md", ".cypher", ".toml", ".yml", ".yaml", ".txt", ".cfg", ".java", ".xml", ".sh"}
SKIP_DIRS = {".git", ".venv", "__pycache__", ".hypothesis", ".mypy_cache", ".pytest_cache", "results", "data",
             "target", "build", "dist"}


def _text_files() -> list[Path]:
    out = []
    for p in ROOT.rglob("*"):
        rel = p.relative_to(ROOT)
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts[:-1]) or not p.is_file():
            continue
        if p.suffix in TEXT or p.name in ("Makefile", "Dockerfile", "run", "bench-smoke"):
            out.append(p)
    return out


def citations(text: str) -> list[str]:
    return [m.group(0) for rx in CITATIONS for m in rx.finditer(text)]


def test_no_file_cites_a_document_the_repository_lacks() -> None:
    files = [p for p in _text_files() if p != Path(__file__)]
    assert len(files) > 150
    found = [f"{p.relative_to(ROOT)}: {c!r}" for p in files for c in citations(p.read_text(encoding="utf-8",
                                                                                          errors="replace"))]
    assert found == []


def test_the_citation_check_sees_one() -> None:
    for text in ("(" + "DESIGN §10)", "DESIGN section 8", "see " + "DIGEST §3.1", "paper 002's prompts",
                 "(README, Triple scorer)", "README, \"Security and data safety\"", "TEST-GAPS.md"):
        assert citations(text), text
    for text in ("SimGRAG's Algorithm 1", "see docs/security.md", "the README is a front door", "design choices"):
        assert not citations(text), text


def _parser() -> argparse.ArgumentParser:
    from engine.cli import build_parser

    return build_parser()


def test_the_cli_page_documents_every_command_and_option() -> None:
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = []
    for name, parser in sub.choices.items():
        section = re.search(rf"^### isorag {re.escape(name)}\n(.*?)(?=^##|\Z)", page, re.M | re.S)
        if section is None:
            missing.append(f"isorag {name}")
            continue
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            names = action.option_strings or [action.dest.upper()]
            if not any(f"`{n}" in section.group(1) or "`{" in section.group(1) and not action.option_strings
                       for n in names):
                missing.append(f"isorag {name} {names[0]}")
    assert missing == []


#: variables the engine sets for its own child processes, not a user's to set
INTERNAL = {"ISORAG_PASS_FDS", "ISORAG_MILVUS_LIBS", "ISORAG_IS_A", "NEO4J_VERSION"}


def _variables_read() -> set[str]:
    names: set[str] = set()
    for pkg in ("engine", "loaders"):
        for path in (ROOT / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                        and re.fullmatch(r"(ISORAG|NEO4J|MILVUS|OPENAI)_[A-Z0-9_]*[A-Z0-9]", node.value):
                    names.add(node.value)
    from engine.llm.config import LLMConfig

    names |= {f"ISORAG_LLM_{f.name.upper()}" for f in dataclasses.fields(LLMConfig)}
    names.add("ISORAG_DATA")  # the benchmarks' (benchmarks/_common.py)
    return names - INTERNAL


def test_the_configuration_page_documents_every_variable() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    names = _variables_read()
    assert {"NEO4J_URI", "MILVUS_URI", "ISORAG_HOME", "ISORAG_LLM_MODEL", "ISORAG_ROUTE"} <= names
    assert sorted(n for n in names if f"`{n}`" not in page) == []
