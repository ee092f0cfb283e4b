"""What the wheel ships stands alone: no module of ``engine`` or ``loaders`` imports from the checkout's
``benchmarks/`` or ``tests/`` (by name, by file path, or by putting them on ``sys.path``), since an installed
package has neither."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import ROOT

#: the top-level names a module of the checkout outside the packages is imported by
OUTSIDE = ({"benchmarks", "tests", "helpers", "conftest"}
           | {p.stem for p in (ROOT / "benchmarks").glob("*.py")}
           | {p.stem for p in (ROOT / "tests" / "helpers").glob("*.py")})


def _sources() -> list[Path]:
    return sorted(p for pkg in ("engine", "loaders") for p in (ROOT / pkg).rglob("*.py"))


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (their text may name any file of the repository)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _reaches(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        found += [f"imports {n}" for n in names if n.split(".")[0] in OUTSIDE]
        if isinstance(node, ast.Attribute) and node.attr in ("spec_from_file_location", "path") \
                and isinstance(node.value, ast.Name) and node.value.id in ("importlib", "util", "sys"):
            found.append(f"uses {node.value.id}.{node.attr}")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            parts = set(Path(node.value).parts) if "\n" not in node.value else set()
            if parts & {"benchmarks", "tests"}:
                found.append(f"names {node.value!r}")
    return [f"{path.relative_to(root)}: {x}" for x in found]


def test_the_packages_reach_nothing_outside_them() -> None:
    assert len(_sources()) > 50
    assert [x for p in _sources() for x in _reaches(p)] == []


def test_the_check_sees_a_reach(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text('"""doc naming benchmarks/x.py is fine"""\nimport metaqa\nfrom helpers.kg import unique_kg\n'
                   'import sys\nsys.path.insert(0, "x")\np = Path(__file__).parents[2] / "benchmarks" / "q.py"\n',
                   encoding="utf-8")
    got = [x.split(": ", 1)[1] for x in _reaches(bad, root=tmp_path)]
    assert got == ["imports metaqa", "imports helpers.kg", "uses sys.path", "names 'benchmarks'"], got
