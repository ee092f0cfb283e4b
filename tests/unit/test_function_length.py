"""No function of the package over :data:`MAX_LINES` lines without the reason it is one function: a paragraph of its
docstring that starts with ``Kept whole:`` (docs/architecture.md, "The layers")."""

from __future__ import annotations

import ast

from helpers import ROOT

#: a function longer than this (its whole definition, docstring included) says why it is not split
MAX_LINES = 80
REASON = "Kept whole:"


def _long_functions() -> list[tuple[str, int, str, int, str]]:
    out = []
    for path in sorted(p for pkg in ("engine", "loaders") for p in (ROOT / pkg).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_LINES:
                    rel = str(path.relative_to(ROOT))
                    out.append((rel, node.lineno, node.name, lines, ast.get_docstring(node) or ""))
    return out


def test_every_long_function_says_why_it_is_kept_whole() -> None:
    missing = [f"{path}:{line} {name} ({lines} lines)" for path, line, name, lines, doc in _long_functions()
               if not any(par.strip().startswith(REASON) for par in doc.split("\n\n"))]
    assert not missing, f"over {MAX_LINES} lines without a '{REASON}' paragraph in the docstring: {missing}"


def test_the_rule_sees_long_functions() -> None:
    # the walk finds functions of every size (a rule that reads nothing passes for nothing)
    assert any(lines > MAX_LINES for _, _, _, lines, _ in _long_functions())
