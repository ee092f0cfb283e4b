"""The exhaustive form of matching: one Cypher statement per pattern that computes every isomorphic
subgraph's GSD and orders by it: a brute force over every isomorphic mapping. It is the test oracle of
:mod:`engine.retrieval.matcher` and is usable for small candidate sets; it enumerates everything, so it is no retriever
for large KGs.

The statement comes from ``cypher/oracle.cypher`` (:func:`engine.retrieval.statements.oracle_statement`): only
identifiers (relationship types from the KG's catalog, backtick-escaped) are written into the text; candidate ids
and distances are parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine._config import injective_mode
from engine.retrieval.statements import oracle_statement
from engine.retrieval.matcher import Candidates, KGEdge, Match
from engine.retrieval.pattern import Pattern

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import CypherReader


def oracle_query(pattern: Pattern, cands: Candidates, *, injective: bool | str = True,
                 directed: bool = False) -> str:
    """The oracle's statement for ``pattern`` (types checked against ``cands.type_names``, the KG's catalog,
    or against the candidates' own types when it is not given)."""
    allowed = cands.type_names or {t for rel in cands.relations.values() for t in rel}
    return oracle_statement(pattern, cands, allowed, distinct=injective_mode(injective), directed=directed)


def oracle_matches(graph: CypherReader, pattern: Pattern, cands: Candidates, *, limit: int = 1000,
                   injective: bool | str = True, directed: bool = False) -> list[Match]:
    """Every isomorphic subgraph up to ``limit``, GSD ascending (duplicates of undirected self-loops removed)."""
    var = {nid: f"n{i}" for i, nid in enumerate(pattern.nodes)}
    params: dict[str, Any] = {"limit": limit}
    for nid, v in var.items():
        c = cands.nodes[nid]
        if c is not None:
            params[f"c_{v}"] = list(c)
            params[f"d_{v}"] = {str(eid): d for eid, d in c.items()}
    for e in pattern.edges:
        params[f"d_r{e.index}"] = dict(cands.relations[e.index])
    rows = graph.read(oracle_query(pattern, cands, injective=injective, directed=directed), **params)
    out: list[Match] = []
    seen = set()
    for r in rows:
        nodes = {nid: r[v] for nid, v in var.items()}
        edges = {e.index: KGEdge(*r[f"r{e.index}"]) for e in pattern.edges}
        sig = (tuple(sorted(nodes.items())), tuple(sorted(edges.items(), key=lambda kv: kv[0])))
        if sig in seen:
            continue
        seen.add(sig)
        out.append(Match(float(r["gsd"]), nodes, edges))
    return out
