"""No import circle inside the packages: read from the source (imports inside functions and under TYPE_CHECKING
count too, a circle of types is still one in the design), so a circle fails here before it fails at import."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers import ROOT


def _modules(package: str) -> dict[str, Path]:
    mods = {}
    for path in (ROOT / package).rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _imports(mods: dict[str, Path], package: str) -> dict[str, set[str]]:
    """module -> the package's modules it imports (a package's own __init__ and its parents not counted)."""

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        here = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                target = owner(name)
                if target and target not in (mod, package) and not mod.startswith(target + "."):
                    graph[mod].add(target)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    part = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        part.append(w)
                        if w == v:
                            break
                    if len(part) > 1:
                        found.append(sorted(part))
    return found


def test_the_finder_sees_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("package", ["engine", "loaders"])
def test_no_import_circle(package: str) -> None:
    mods = _modules(package)
    assert len(mods) > 3
    assert _circles(_imports(mods, package)) == []


# The layers, lowest first: a module imports only from its own layer or a lower one (imports inside functions
# and under TYPE_CHECKING included). Each entry names packages or modules; the longest name that is a prefix of
# a module decides its layer ("engine" alone is the package's own __init__).
LAYERS: list[tuple[str, ...]] = [
    ("engine._errors", "engine._secrets", "engine._protocols", "engine._reports", "engine._timing"),  # the error tree,
    # secret masking, the stages' seams, the reports' base and the skip log, stage timings
    ("engine._config", "engine.llm.config", "engine._cypher"),  # settings, statements from cypher/
    ("engine.datasets",),  # question files of the datasets (MetaQA, PathQuestion, JSON Lines): plain text
    ("engine.servers",),  # the local Neo4j and Milvus
    ("engine.stores",),  # the graph and vector stores
    ("engine.embeddings", "loaders"),  # text -> vectors; source files -> records and bulk loads
    ("engine.linking",),  # names as people write them: spelling, aliases, candidates, entities linked in text
    ("engine.changes",),  # living KGs: change sets, applying them, versions, sync, check
    ("engine.llm",),  # LLM clients
    ("engine.retrieval",),  # pattern -> top-k subgraphs
    ("engine.scoring",),  # GNN triple scorers
    ("engine.learned",),  # patterns without an LLM: plain-text linking, the learned generator, the router
    ("engine.answering",),  # the answering pipeline and its drivers
    ("engine.evaluation",),  # synth ground truth, metrics
    ("engine.integrations",),  # LangChain
    # the Engine facade, batch jobs, the command, the HTTP service (its commands are registered by the command)
    ("engine", "engine._engine", "engine.jobs", "engine.cli", "engine.service"),
]


def _layer(module: str) -> int:
    best, rank = "", -1
    for i, names in enumerate(LAYERS):
        for name in names:
            hit = module == name if name == "engine" else module == name or module.startswith(name + ".")
            if hit and len(name) > len(best):
                best, rank = name, i
    return rank


def test_every_module_has_a_layer() -> None:
    mods = {**_modules("engine"), **_modules("loaders")}
    assert [m for m in sorted(mods) if _layer(m) < 0] == []


def test_the_layer_rule_sees_an_upward_import() -> None:
    assert _layer("engine.stores.graph") < _layer("engine.retrieval.matcher") < _layer("engine.cli")
    assert _layer("engine.llm.config") < _layer("engine.servers.neo4j") < _layer("engine.llm.base")
    assert _layer("engine") == _layer("engine._engine")


def test_no_module_imports_a_higher_layer() -> None:
    mods = {**_modules("engine"), **_modules("loaders")}
    graph = _imports(mods, "")
    upward = sorted(f"{m} (layer {_layer(m)}) imports {t} (layer {_layer(t)})"
                    for m, targets in graph.items() for t in targets if _layer(t) > _layer(m))
    assert upward == []
