"""README.md's examples run as written, on the bundled demo KG, and print what their comments claim.

The convention (README.md states it beside its examples):

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

import io
import os
import re
import shlex
import subprocess
import sys
import tokenize
from dataclasses import dataclass
from typing import Any, Iterator

import pytest

from helpers import ROOT
from helpers.kg import unique_kg

README = ROOT / "README.md"
DEMO_KB = ROOT / "engine" / "data" / "demo" / "kb.txt"
SKIP = re.compile(r"^<!--\s*readme-test:\s*skip:\s*(\S.*?)\s*-->$")
FENCE = re.compile(r"^```(\w*)")
PRINT = re.compile(r"^(\s*)print\((.*)\)$", re.S)


@dataclass
class Block:
    lang: str
    line: int  # README line of its first code line
    text: str
    skip: str | None


def readme_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        before = next((ln.strip() for ln in reversed(lines[:i]) if ln.strip()), "")
        skip = SKIP.match(before)
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        blocks.append(Block(m.group(1), i + 2, "\n".join(lines[i + 1:j]) + "\n", skip.group(1) if skip else None))
        i = j + 1
    return blocks


def claim_regex(claim: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in claim.split("...")), re.S)


def split_comment(line: str) -> tuple[str, str | None]:
    """A shell line's command and its comment (a ``#`` after white space, outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1:].strip()
    return line.rstrip(), None


def claim_of(comment: str | None) -> str | None:
    if comment is not None and comment.startswith("->"):
        return comment[2:].strip()
    return None


@dataclass
class Command:
    line: int
    argv: list[str]
    claim: str | None


def readme_commands(blocks: list[Block]) -> list[Command]:
    out = []
    for b in blocks:
        if b.lang not in ("bash", "sh", "shell", "console") or b.skip:
            continue
        for k, raw in enumerate(b.text.splitlines()):
            cmd, comment = split_comment(raw.strip().removeprefix("$ "))
            if cmd.startswith("isorag "):
                out.append(Command(b.line + k, shlex.split(cmd), claim_of(comment)))
    return out


def instrument_python(b: Block) -> tuple[str, int]:
    """The block with each claimed ``print(...)`` turned into a call that checks what it prints."""
    lines = b.text.splitlines()
    claims = 0
    for tok in tokenize.generate_tokens(io.StringIO(b.text).readline):
        claim = claim_of(tok.string[1:].strip()) if tok.type == tokenize.COMMENT else None
        if claim is None:
            continue
        row, col = tok.start
        m = PRINT.match(lines[row - 1][:col].rstrip())
        assert m, f"README.md:{b.line + row - 1}: a '# ->' claim ends a line that is not a print(...) call"
        lines[row - 1] = f"{m.group(1)}__claim__({b.line + row - 1}, {claim!r}, {m.group(2)})"
        claims += 1
    prelude = (
        "import re as __re\n"
        "def __claim__(line, claim, *args, sep=' '):\n"
        "    text = sep.join(str(a) for a in args)\n"
        "    print(text)\n"
        "    rx = '.*'.join(__re.escape(p) for p in claim.split('...'))\n"
        "    if not __re.fullmatch(rx, text, __re.S):\n"
        "        raise AssertionError(f'README.md:{line}: printed {text!r}, its comment claims {claim!r}')\n"
    )
    return prelude + "\n".join(lines) + "\n", claims


# ------------------------------------------------------------------------------------------ extraction
def test_convention_is_parsed() -> None:
    text = ("x\n<!-- readme-test: skip: needs an LLM -->\n```bash\nisorag ask q --kg demo\n```\n\n"
            "```bash\n$ isorag match '{\"a\": \"# no\"}' --kg demo   # -> answers: X...\nmake demo\n```\n"
            "```python\nprint(1)  # -> 1\nprint(2)  # plain comment\n```\n")
    blocks = readme_blocks(text)
    assert [(b.lang, b.skip) for b in blocks] == [("bash", "needs an LLM"), ("bash", None), ("python", None)]
    [cmd] = readme_commands(blocks)
    assert cmd.argv == ["isorag", "match", '{"a": "# no"}', "--kg", "demo"] and cmd.claim == "answers: X..."
    assert cmd.line == 8
    code, claims = instrument_python(blocks[2])
    assert claims == 1 and "__claim__(12, '1', 1)" in code and "print(2)" in code
    assert claim_regex("answers: X...").fullmatch("answers: X (0.000), Y (1.0)")
    assert not claim_regex("answers: X").fullmatch("answers: XY")


def test_readme_has_the_main_examples_unskipped() -> None:
    blocks = readme_blocks(README.read_text(encoding="utf-8"))
    python = [b for b in blocks if b.lang == "python" and not b.skip]
    assert python and all(instrument_python(b)[1] for b in python), "a Python example without a '# ->' claim"
    cmds = readme_commands(blocks)
    ran = {c.argv[1] for c in cmds}
    assert {"load", "stats", "match", "ask"} <= ran
    assert any(c.argv[1] == "ask" and "--pattern" in c.argv for c in cmds)
    assert all(c.claim for c in cmds), [c.line for c in cmds if not c.claim]


# ------------------------------------------------------------------------------------------ running
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


@pytest.mark.integration
def test_readme_examples_run_as_written(demo: Any) -> None:
    blocks = readme_blocks(README.read_text(encoding="utf-8"))
    env = _env(demo)
    ran = 0
    for b in blocks:
        if b.skip:
            continue
        if b.lang == "python":
            code, _ = instrument_python(b)
            assert code.count('kg="demo"') >= 1, f"README.md:{b.line}: the example must name kg=\"demo\""
            code = code.replace('kg="demo"', f'kg="{demo.kg}"')
            res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=600)
            assert res.returncode == 0, f"README.md:{b.line}: the Python example failed\n{res.stdout}\n{res.stderr}"
            ran += 1
    for cmd in readme_commands(blocks):
        argv = cmd.argv[1:]
        assert argv.count("--kg") == 1 and argv[argv.index("--kg") + 1] == "demo", \
            f"README.md:{cmd.line}: a command that runs must name --kg demo"
        argv[argv.index("--kg") + 1] = demo.kg
        res = subprocess.run([sys.executable, "-m", "engine.cli", *argv], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=600)
        where = f"README.md:{cmd.line}: {' '.join(cmd.argv)}"
        assert res.returncode == 0, f"{where}\n{res.stdout}\n{res.stderr}"
        if cmd.claim:
            rx = claim_regex(cmd.claim)
            assert any(rx.fullmatch(ln.rstrip()) for ln in res.stdout.splitlines()), \
                f"{where}: no output line is {cmd.claim!r}\n{res.stdout}"
        ran += 1
    assert ran >= 6


# ------------------------------------------------------------------------------------- unmatched names
@pytest.mark.integration
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


@pytest.mark.integration
@pytest.mark.parametrize("text", ["Klute", "  klute ", "KLUTE", "Klute\u00a0"])
def test_a_name_of_the_kg_is_not_reported(demo: Any, text: str) -> None:
    res = demo.retrieve([[text, "directed_by", "UNKNOWN director 1"]], k=1)
    assert res.unmatched == {} and res.to_dict()["unmatched"] == {}
    assert not any("no KG entity is named" in w for w in res.warnings)
    assert [a.entity.name for a in res.answers] == ["Alan J. Pakula"]


@pytest.mark.integration
def test_a_name_the_search_did_not_reach_is_reported(demo: Any) -> None:
    """Full-width "Klute" is Klute's name after NFKC, but the embedder places it far from Klute: the match
    did not use Klute, so the name is reported (the rule looks at the candidates the match could bind)."""
    res = demo.retrieve([["\uff2b\uff4c\uff55\uff54\uff45", "directed_by", "UNKNOWN director 1"]], k=1)
    [(text, closest)] = res.unmatched.items()
    assert text == "\uff2b\uff4c\uff55\uff54\uff45" and "Klute" not in [n for n, _ in closest]


@pytest.mark.integration
def test_only_the_absent_name_of_two_is_reported(demo: Any) -> None:
    res = demo.retrieve([["Klute", "directed_by", "UNKNOWN director 1"],
                         ["Kismet", "directed_by", "UNKNOWN director 1"]], k=1)
    assert list(res.unmatched) == ["Kismet"]
    assert sum("no KG entity is named" in w for w in res.warnings) == 1


def test_unmatched_warning_text() -> None:
    from engine.retrieval import normalize_name, unmatched_warning

    assert unmatched_warning("X", [("Y", 1.0304), ("Z", 1.1)]) == (
        "no KG entity is named 'X': the match used the nearest entities instead (closest: 'Y' (1.030), 'Z' (1.100))")
    assert unmatched_warning("X", []).endswith("(closest: none)")
    assert normalize_name("  Ｋｌｕｔｅ\u00a0 II ") == normalize_name("klute ii") == "klute ii"
