"""Lint: ruff passes with the repository's configuration ([tool.ruff] in pyproject.toml, also run by `make lint`),
and every ``noqa`` left says why (``# noqa: CODE - reason`` or ``# noqa: CODE (reason)``)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

from helpers import ROOT

NOQA = re.compile(r"#\s*noqa\b(?P<rest>.*)$")
WITH_REASON = re.compile(r":\s*[A-Z]+[0-9]+(\s*,\s*[A-Z]+[0-9]+)*\s+(-\s+\S|\(\S)")


def _python_files() -> list[Path]:
    return sorted(p for folder in ("engine", "loaders", "benchmarks", "tests") for p in (ROOT / folder).rglob("*.py")
                  if "__pycache__" not in p.parts)


def _bare(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line: comment`` of each noqa comment without a reason."""
    out = []
    with path.open(encoding="utf-8") as f:
        for tok in tokenize.generate_tokens(f.readline):
            m = NOQA.search(tok.string) if tok.type == tokenize.COMMENT else None
            if m and not WITH_REASON.match(m.group("rest")):
                out.append(f"{path.relative_to(root)}:{tok.start[0]}: {tok.string}")
    return out


def test_every_noqa_says_why() -> None:
    files = _python_files()
    assert len(files) > 100
    assert [x for p in files for x in _bare(p)] == []


def test_the_noqa_check_sees_a_bare_one(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("import a  # noqa: F401\nimport b  # noqa: F401 - re-exported\nimport c  # noqa\n"
                 "import d  # noqa: E402 (after sys.path)\n", encoding="utf-8")
    assert [x.split(":")[1] for x in _bare(f, tmp_path)] == ["1", "3"]


def test_ruff_passes() -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    res = subprocess.run([ruff, "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
