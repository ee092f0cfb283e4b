"""Benchmarks that cannot rot: every script of benchmarks/ declares ``--smoke`` the one way (``_common.parse_args``),
which ``make bench-smoke`` runs in CI; the declaration itself behaves as documented."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from helpers import ROOT

SCRIPTS = sorted(p for p in (ROOT / "benchmarks").glob("[a-z]*.py"))


def _common() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_common_under_test", ROOT / "benchmarks" / "_common.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_every_benchmark_declares_smoke(script: Path) -> None:
    tree = ast.parse(script.read_text(encoding="utf-8"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "parse_args"]
    assert calls, f"{script.name}: arguments not parsed by _common.parse_args (no --smoke)"
    assert all(len(c.args) == 2 and isinstance(c.args[1], ast.Dict) for c in calls), script.name
    assert "--smoke" in (ast.get_docstring(tree) or ""), f"{script.name}: the docstring shows no --smoke usage"


def test_the_smoke_runner_finds_every_script() -> None:
    runner = (ROOT / ".ci" / "bench-smoke").read_text(encoding="utf-8")
    assert "benchmarks/[a-z]*.py" in runner and "--smoke" in runner
    assert "bench-smoke" in (ROOT / "Makefile").read_text() and "make bench-smoke" in (ROOT / ".ci" / "run").read_text()


def test_parse_args_sets_the_smoke_values_and_keeps_what_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    common = _common()
    monkeypatch.setattr(sys, "path", list(sys.path))

    def parser() -> argparse.ArgumentParser:
        ap = argparse.ArgumentParser()
        ap.add_argument("--limit", type=int, default=None)
        ap.add_argument("--kg", default="metaqa")
        ap.add_argument("--data", default="/data")
        return ap

    smoke = {"limit": 4, "kg": "bench_smoke_x", "data": lambda a: f"made for {a.kg}"}
    args = common.parse_args(parser(), smoke, [])
    assert (args.smoke, args.limit, args.kg, args.data) == (False, None, "metaqa", "/data") and not common.SMOKE
    args = common.parse_args(parser(), smoke, ["--smoke"])
    assert (args.limit, args.kg, args.data) == (4, "bench_smoke_x", "made for bench_smoke_x") and common.SMOKE
    args = common.parse_args(parser(), smoke, ["--smoke", "--limit", "9", "--data", "/mine"])
    assert (args.limit, args.kg, args.data) == (9, "bench_smoke_x", "/mine")
