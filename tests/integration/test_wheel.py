"""The built wheel carries everything the engine reads at run time and works installed outside the checkout."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
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
    # every module of the packages, found by configuration (engine/changes/ was once missing from a list)
    modules = {p.relative_to(ROOT).as_posix() for pkg in ("engine", "loaders") for p in (ROOT / pkg).rglob("*.py")
               if "__pycache__" not in p.parts}
    assert {"engine/changes/apply.py", "engine/cli/__init__.py", "engine/datasets/metaqa.py"} <= modules
    assert modules <= names, sorted(modules - names)
    for folder in ("engine/answering/prompts", "engine/data/demo", "engine/servers/neo4j_launcher",
                   "engine/service/static"):
        want = {p.relative_to(ROOT).as_posix() for p in (ROOT / folder).rglob("*")
                if p.is_file() and "__pycache__" not in p.parts and "target" not in p.parts}
        assert want and want <= names, sorted(want - names)
    assert "engine/servers/neo4j_launcher/src/main/java/isorag/Neo4jServer.java" in names
    assert "engine/py.typed" in names and "loaders/bulk.py" in names
    assert {"engine/service/static/vendor/sigma.min.js", "engine/service/static/vendor/LICENSE-sigma.txt"} <= names
    assert not any(n.startswith(("tests/", "benchmarks/", "cypher/")) or "__pycache__" in n for n in names)


def _fresh_venv(where: Path, whl: Path) -> Path:
    """A virtual environment of its own with the wheel installed (not editable); the heavy dependencies (torch, the
    embedding model, the drivers) come from the running environment's site-packages through a path file, added
    after the install so that pip sees nothing of the running environment (nor its editable isorag)."""
    out = _run([sys.executable, "-m", "venv", "--without-pip", str(where)])
    assert out.returncode == 0, out.stderr
    py = where / "bin" / "python"
    out = _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index", "--no-compile",
                str(whl)], env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert out.returncode == 0, out.stdout + out.stderr
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    # a path file's plain lines are appended to sys.path; the path files of that folder (the running
    # environment's editable isorag) are not read
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "zz_dependencies.pth").write_text("\n".join(sorted(ours)) + "\n", encoding="utf-8")
    return where


LEARNED_QA = "".join(json.dumps({"question": f"who directed {film}", "topics": [film], "answers": [director]}) + "\n"
                     for film, director in [("Heat", "Michael Mann"), ("Collateral", "Michael Mann"),
                                            ("Top Gun", "Tony Scott")] for _ in range(3))
CHANGES = '{"op": "add", "head": "Heat", "relation": "starred_actors", "tail": "Robert De Niro"}\n'
CLAIMS = "".join(json.dumps(c) + "\n" for c in [
    {"id": "c1", "claim": "Heat was directed by Michael Mann", "label": "SUPPORTED",
     "pattern": {"triples": [["Heat", "directed_by", "Michael Mann"]]}},
    {"id": "c2", "claim": "Top Gun was directed by Michael Mann", "label": "REFUTED",
     "pattern": {"triples": [["Top Gun", "directed_by", "Michael Mann"]]}}])


def test_installed_wheel_runs_every_command(wheel: tuple[Path, str], tmp_path: Path, neo4j_uri: str,
                                            milvus_uri: str, make_engine: Callable[..., Any]) -> None:
    """The ``isorag`` command of the wheel, installed in a virtual environment of its own and run from a directory
    where the checkout is not importable: every command a user runs on a KG, against the real servers."""
    whl, _ = wheel
    venv = _fresh_venv(tmp_path / "venv", whl)
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    files = {"kb.txt": TRIPLES, "changes.jsonl": CHANGES, "qa.jsonl": LEARNED_QA, "claims.jsonl": CLAIMS,
             # the KG after the change, less one triple: what sync is to make of the KG
             "kb2.txt": TRIPLES.replace("Top Gun|directed_by|Tony Scott\n", "")
             + "Heat|starred_actors|Robert De Niro\n",
             # MetaQA's form: its question types (beside it) give the gold patterns (engine.datasets.metaqa)
             "qa_dev.txt": "who directed [Heat]\tMichael Mann\nwho starred in [Top Gun]\tTom Cruise\n",
             "qa_dev_qtype.txt": "movie_to_director\nmovie_to_actor\n"}
    for name, text in files.items():
        (cwd / name).write_text(text, encoding="utf-8")
    kg = unique_kg("wheel")
    cleanup = make_engine(kg=kg)  # drops the KG even when an assertion below fails
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ISORAG_GENERATOR", "ISORAG_SCORER")
           and not k.startswith(("ISORAG_LLM_", "OPENAI_"))}
    env.update(NEO4J_URI=neo4j_uri, MILVUS_URI=milvus_uri, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               ISORAG_GENERATOR=str(cwd / "gen.pt"))

    def isorag(*args: str, status: int = 0) -> Any:
        res = _run([str(venv / "bin" / "isorag"), *args], cwd=cwd, env=env)
        assert res.returncode == status, f"isorag {' '.join(args)}: {res.stdout}\n{res.stderr}"
        return json.loads(res.stdout) if "--json" in args or args[0] in ("synth", "eval") else res.stdout

    where = _run([str(venv / "bin" / "python"), "-c", "import engine, engine._cypher as c, engine.cli, json, sys; "
                  "print(json.dumps([engine.__file__, str(c.CYPHER_DIR), len(c.cypher('stats')), sys.path]))"],
                 cwd=cwd, env=env)
    assert where.returncode == 0, where.stderr
    engine_file, cypher_dir, _, path = json.loads(where.stdout)
    assert Path(engine_file).resolve().is_relative_to(venv.resolve())
    assert Path(cypher_dir).resolve().is_relative_to(venv.resolve())
    # nothing of the checkout on the path: the running environment's site-packages (the dependencies, through the
    # path file) may lie inside it (a project's .venv), its sources may not
    deps = {Path(p).resolve() for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}}
    assert not [p for p in path if p and Path(p).resolve() not in deps
                and Path(p).resolve().is_relative_to(ROOT.resolve())], path

    assert isorag("load", "kb.txt", "--kg", kg, "--quiet", "--json")["triples"] == 7
    got = isorag("match", '{"triples": [["Heat", "directed_by", "UNKNOWN director 1"]]}', "--kg", kg, "-k", "1",
                 "--json")
    assert [a["name"] for a in got["answers"]] == ["Michael Mann"]
    assert got["subgraphs"][0]["gsd"] == pytest.approx(0.0, abs=1e-4)
    assert isorag("apply", "changes.jsonl", "--kg", kg, "--quiet", "--json")["added"] == 1
    synced = isorag("sync", "kb2.txt", "--kg", kg, "--quiet", "--json")
    assert synced["changes"] >= 1 and synced["applied"], synced
    assert isorag("check", "--kg", kg, "--quiet", "--json")["ok"] is True
    stats = isorag("stats", "--kg", kg, "--json")
    assert stats["agree"] and stats["neo4j"]["triples"] == 7 and stats["version"]["seq"] >= 3, stats
    gone = isorag("match", '{"triples": [["Top Gun", "directed_by", "UNKNOWN director 1"]]}', "--kg", kg, "--json")
    assert all(a["name"] != "Tony Scott" for a in gone["answers"]), gone

    trained = isorag("train-generator", "--qa", "qa.jsonl", "--kg", kg, "--out", "gen.pt", "--quiet", "--json")
    assert trained["questions"] >= 6 and (cwd / "gen.pt").is_file()
    ans = isorag("ask", "who directed Collateral", "--kg", kg, "--route", "learned", "--json")
    assert ans["pattern_source"] == "learned" and ans["answers"][0]["name"] == "Michael Mann", ans

    summary = isorag("verify", "claims.jsonl", "--out", "verdicts.jsonl", "--kg", kg, "--no-llm", "--quiet", "--json")
    assert summary["verified"] == 2 and not summary["failed"] and not summary["malformed"], summary
    verdicts = {v["id"]: v["label"] for v in map(json.loads, (cwd / "verdicts.jsonl").read_text().splitlines())}
    assert verdicts == {"c1": "SUPPORTED", "c2": "REFUTED"}

    assert isorag("synth", "--kg", kg, "--out", "synth.jsonl", "--n", "4", "--no-llm", "--seed", "1")["records"] > 0
    evaluated = isorag("eval", "synth.jsonl", "--kg", kg, "--no-llm", "--quiet", "--directed")
    assert evaluated["summary"]["overall"]["n"] > 0 and not evaluated["failed"]
    metaqa = isorag("eval", "qa_dev.txt", "--kg", kg, "--no-llm", "--quiet")
    assert metaqa["summary"]["overall"]["n"] == 2 and metaqa["summary"]["overall"]["hits1_strict"] == 1.0, metaqa

    assert isorag("drop", "--kg", kg, "--yes").strip() == f"dropped KG {kg!r}"
    assert cleanup.graph.stats()["entities"] == 0
