"""Every Cypher statement lives in cypher/ (docs/architecture.md): no string literal in engine/ or loaders/ holds one.

Docstrings and comments may mention a clause ("MERGE a batch"); a string literal that is not a docstring and holds a
statement keyword in capitals is a statement written in Python, and fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KEYWORDS = re.compile(r"\b(MATCH|MERGE|UNWIND|CREATE|RETURN|DELETE|DETACH|CALL|SHOW|DROP|WITH|WHERE|SET|REMOVE|"
                      r"FOREACH|LOAD CSV|OPTIONAL MATCH|ORDER BY|LIMIT)\b")


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
        # an attribute's doc (a bare string after an assignment) is a docstring too
        if hasattr(node, "body") and isinstance(node.body, list):
            for prev, cur in zip(node.body, node.body[1:]):
                if isinstance(prev, (ast.Assign, ast.AnnAssign)) and isinstance(cur, ast.Expr) \
                        and isinstance(cur.value, ast.Constant):
                    ids.add(id(cur.value))
    return ids


def inline_statements(source: str) -> list[tuple[int, str]]:
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if KEYWORDS.search(node.value):
                found.append((node.lineno, node.value))
    return found


def test_no_cypher_statement_in_python():
    offenders = []
    for folder in ("engine", "loaders"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line, text in inline_statements(path.read_text(encoding="utf-8")):
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {text[:80]!r}")
    assert not offenders, "Cypher written in Python (move it to cypher/):\n" + "\n".join(offenders)


def test_the_check_finds_a_statement():
    assert inline_statements('q = "MATCH (n) RETURN n"\n')
    assert inline_statements('q = f"MERGE (n:{x})"\n')
    assert inline_statements('q = ("UNWIND $rows AS r\\n"\n     "CREATE (n)")\n')
    assert not inline_statements('def f():\n    """MERGE a batch of entities."""\n    # MATCH in a comment\n')
