"""The built wheel carries everything the engine reads at run time and works installed outside the checkout."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any, Callable

import pytest

from helpers import ROOT
from helpers.kg import unique_kg

# what a wheel is built from; the rest of the checkout (tests, benchmarks, docker) is not shipped
SOURCES = ("pyproject.toml", "README.md", "engine", "loaders", "cypher")

TRIPLES = """\
Heat|directed_by|Michael Mann
Heat|starred_actors|Al Pacino
Heat|release_year|1995
Collateral|directed_by|Michael Mann
Collateral|starred_actors|Tom Cruise
Top Gun|starred_actors|Tom Cruise
Top Gun|directed_by|Tony Scott
"""


def _run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The wheel built from a copy of the sources (a build writes build/ and *.egg-info where it runs)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "target"))
        else:
            shutil.copy2(p, src / name)
    # no build isolation: the venv's setuptools (pinned as in [build-system]) builds it, offline
    out = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist"),
                str(src)], env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert out.returncode == 0, out.stdout + out.stderr
    [whl] = (tmp / "dist").glob("isorag-*.whl")
    return whl, out.stdout + out.stderr


def test_wheel_builds_without_warnings(wheel: tuple[Path, str]) -> None:
    """No setuptools warning (such as "Package 'engine.data.demo' is absent from the `packages` configuration")."""
    _, log = wheel
    assert not re.search(r"\w*Warning\b|would be ignored", log), log


def test_wheel_carries_the_runtime_files(wheel: tuple[Path, str]) -> None:
    whl, _ = wheel
    names = set(zipfile.ZipFile(whl).namelist())
    statements = sorted(p.name for p in (ROOT / "cypher").glob("*.cypher"))
    assert statements and {f"engine/cypher/{n}" for n in statements} <= names
    for folder in ("engine/answering/prompts", "engine/data/demo", "engine/servers/neo4j_launcher",
                   "engine/service/static"):
        want = {p.relative_to(ROOT).as_posix() for p in (ROOT / folder).rglob("*")
                if p.is_file() and "__pycache__" not in p.parts and "target" not in p.parts}
        assert want and want <= names, sorted(want - names)
    assert "engine/servers/neo4j_launcher/src/main/java/isorag/Neo4jServer.java" in names
    assert "engine/py.typed" in names and "loaders/bulk.py" in names
    assert {"engine/service/static/vendor/sigma.min.js", "engine/service/static/vendor/LICENSE-sigma.txt"} <= names
    assert not any(n.startswith(("tests/", "benchmarks/", "cypher/")) for n in names)


def test_installed_wheel_loads_and_matches(wheel: tuple[Path, str], tmp_path: Path, neo4j_uri: str, milvus_uri: str,
                                           make_engine: Callable[..., Any]) -> None:
    """Installed (not editable) into a folder of its own, run from a directory where the checkout is not importable."""
    whl, _ = wheel
    site = tmp_path / "site"
    # --target, never --prefix: pip would first uninstall the running venv's own (editable) isorag
    out = _run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "--target", str(site), str(whl)],
               env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert out.returncode == 0, out.stdout + out.stderr
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    (cwd / "kb.txt").write_text(TRIPLES, encoding="utf-8")
    kg = unique_kg("wheel")
    cleanup = make_engine(kg=kg)  # drops the KG even when an assertion below fails
    env = {**os.environ, "PYTHONPATH": str(site), "NEO4J_URI": neo4j_uri, "MILVUS_URI": milvus_uri,
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}

    def isorag(*args: str) -> subprocess.CompletedProcess[str]:
        res = _run([sys.executable, "-m", "engine.cli", *args], cwd=cwd, env=env)
        assert res.returncode == 0, f"isorag {' '.join(args)}: {res.stdout}\n{res.stderr}"
        return res

    where = _run([sys.executable, "-c", "import engine, engine._cypher as c; print(engine.__file__); "
                  "print(c.CYPHER_DIR); print(len(c.cypher('stats')))"], cwd=cwd, env=env)
    assert where.returncode == 0, where.stderr
    engine_file, cypher_dir, _ = where.stdout.splitlines()
    assert Path(engine_file).resolve().is_relative_to(site.resolve())
    assert Path(cypher_dir).resolve() == (site / "engine" / "cypher").resolve()

    isorag("load", "kb.txt", "--kg", kg, "--quiet")
    res = isorag("match", '{"triples": [["Heat", "directed_by", "UNKNOWN director 1"]]}', "--kg", kg, "-k", "1",
                 "--json")
    got = json.loads(res.stdout)
    assert [a["name"] for a in got["answers"]] == ["Michael Mann"]
    assert got["subgraphs"][0]["gsd"] == pytest.approx(0.0, abs=1e-4)
    isorag("drop", "--kg", kg, "--yes")
    assert cleanup.graph.stats()["entities"] == 0
