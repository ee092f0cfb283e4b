"""The examples of README.md and of every page under docs/ run as written, on the bundled demo KG, and print what
their comments claim.

The convention (README.md states it beside its examples; it holds for docs/ too, README first, then the pages in
sorted order):

- every ```python block runs, and in ```bash blocks every line starting with ``isorag `` runs, in README order,
  with the demo KG of this module: ``kg="demo"`` and ``--kg demo`` are replaced by its unique name (each one
  must name that KG, so that the test never touches a user's KG);
- ``# -> TEXT`` ending a ``print(...)`` line claims that this call prints exactly TEXT; ending a command line,
  that the command prints (on stdout) a line equal to TEXT; ``...`` in TEXT stands for any text;
- a block preceded by ``<!-- readme-test: skip: REASON -->`` does not run (usage with placeholders, server
  management, an LLM, a GPU, minutes of work); the main examples (the Python API, ``load``, ``stats``,
  ``match`` and ``ask --pattern``) must not be skipped.

The demo KG also checks that a named pattern node matching no entity exactly is reported, never replaced silently.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Iterator

import pytest

from helpers import ROOT
from helpers.kg import unique_kg
from helpers.readme import claim_regex, doc_files, instrument_python, readme_blocks, readme_commands

pytestmark = pytest.mark.long  # minutes of work: `make test` deals this file out first (tests/conftest.py)

DEMO_KB = ROOT / "engine" / "data" / "demo" / "kb.txt"


@pytest.fixture(scope="module")
def demo(neo4j_uri: str, milvus_uri: str, embedder: Any) -> Iterator[Any]:
    """The bundled demo KG, loaded once under a unique name; dropped afterwards."""
    from engine._config import EngineConfig, MilvusSettings, Neo4jSettings
    from engine._engine import Engine

    cfg = EngineConfig(kg=unique_kg("readme"), neo4j=Neo4jSettings.from_env(uri=neo4j_uri),
                       milvus=MilvusSettings.from_env(uri=milvus_uri))
    eng = Engine(cfg, llm=False, embedder=embedder)
    try:
        eng.load(DEMO_KB, progress=False)
        yield eng
    finally:
        eng.drop()
        eng.close()


def _env(demo: Any) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ISORAG_LLM_")}
    env.update(NEO4J_URI=demo.config.neo4j.uri, MILVUS_URI=demo.config.milvus.uri, HF_HUB_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    return env


def test_readme_examples_run_as_written(demo: Any) -> None:
    env = _env(demo)
    ran = 0
    for path in doc_files():
        ran += _run_examples(path, demo, env)
    assert ran >= 6


def _run_examples(path: Any, demo: Any, env: dict[str, str]) -> int:
    """Run one file's Python blocks, then its ``isorag`` lines; the number run."""
    name = path.relative_to(ROOT).as_posix()
    blocks = readme_blocks(path.read_text(encoding="utf-8"))
    ran = 0
    for b in blocks:
        if b.skip or b.lang != "python":
            continue
        code, _ = instrument_python(b, name)
        assert code.count('kg="demo"') >= 1, f"{name}:{b.line}: the example must name kg=\"demo\""
        code = code.replace('kg="demo"', f'kg="{demo.kg}"')
        res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=600)
        assert res.returncode == 0, f"{name}:{b.line}: the Python example failed\n{res.stdout}\n{res.stderr}"
        ran += 1
    for cmd in readme_commands(blocks):
        argv = cmd.argv[1:]
        assert argv.count("--kg") == 1 and argv[argv.index("--kg") + 1] == "demo", \
            f"{name}:{cmd.line}: a command that runs must name --kg demo"
        argv[argv.index("--kg") + 1] = demo.kg
        res = subprocess.run([sys.executable, "-m", "engine.cli", *argv], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=600)
        where = f"{name}:{cmd.line}: {' '.join(cmd.argv)}"
        assert res.returncode == 0, f"{where}\n{res.stdout}\n{res.stderr}"
        if cmd.claim:
            rx = claim_regex(cmd.claim)
            assert any(rx.fullmatch(ln.rstrip()) for ln in res.stdout.splitlines()), \
                f"{where}: no output line is {cmd.claim!r}\n{res.stdout}"
        ran += 1
    return ran


# ------------------------------------------------------------------------------------- unmatched names
def test_a_name_absent_from_the_kg_is_reported(demo: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from engine.cli import print_answer, print_retrieval

    res = demo.retrieve([["Kismet", "directed_by", "UNKNOWN director 1"]], k=3)
    assert res.subgraphs  # the match goes on with the nearest entities...
    closest = res.unmatched["Kismet"]  # ...and says so
    assert list(res.unmatched) == ["Kismet"] and len(closest) == 3
    assert [d for _, d in closest] == sorted(d for _, d in closest) and all(d > 0.5 for _, d in closest)
    assert closest[0][0] == "Klimt"
    assert res.warnings[0].startswith("no KG entity is named 'Kismet'") and "'Klimt' (0.9" in res.warnings[0]
    assert res.to_dict()["unmatched"] == {"Kismet": [{"name": n, "distance": d} for n, d in closest]}
    print_retrieval(res)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"warning: {res.warnings[0]}" and out.count(out[0]) == 1

    ans = demo.ask("who directed Kismet", pattern=[["Kismet", "directed_by", "UNKNOWN director 1"]])
    assert ans.unmatched == res.unmatched and ans.warnings[0] == res.warnings[0]
    assert ans.to_dict()["unmatched"] == res.to_dict()["unmatched"]
    print_answer(ans)
    out = capsys.readouterr().out.splitlines()
    assert f"warning: {res.warnings[0]}" in out[:3] and out.count(f"warning: {res.warnings[0]}") == 1


@pytest.mark.parametrize("text", ["Klute", "  klute ", "KLUTE", "Klute\u00a0"])
def test_a_name_of_the_kg_is_not_reported(demo: Any, text: str) -> None:
    res = demo.retrieve([[text, "directed_by", "UNKNOWN director 1"]], k=1)
    assert res.unmatched == {} and res.to_dict()["unmatched"] == {}
    assert not any("no KG entity is named" in w for w in res.warnings)
    assert [a.entity.name for a in res.answers] == ["Alan J. Pakula"]


def test_a_name_written_in_another_width_reaches_its_entity(demo: Any) -> None:
    """Full-width "Klute" is Klute's name after NFKC; the embedder places it far from Klute, but the search by
    spelling finds it: the match uses Klute, says how, and reports nothing."""
    wide = "\uff2b\uff4c\uff55\uff54\uff45"
    res = demo.retrieve([[wide, "directed_by", "UNKNOWN director 1"]], k=1)
    assert res.names[wide].name == "Klute" and res.names[wide].how == "normalized"
    assert not res.unmatched and res.answers[0].entity.name == "Alan J. Pakula"


def test_only_the_absent_name_of_two_is_reported(demo: Any) -> None:
    res = demo.retrieve([["Klute", "directed_by", "UNKNOWN director 1"],
                         ["Kismet", "directed_by", "UNKNOWN director 1"]], k=1)
    assert list(res.unmatched) == ["Kismet"]
    assert sum("no KG entity is named" in w for w in res.warnings) == 1
