"""The exhaustive form of matching: one Cypher statement per pattern that computes every isomorphic
subgraph's GSD and orders by it (DIGEST §6.2 (b)). It is the test oracle of :mod:`engine.matching` and is
usable for small candidate sets; it enumerates everything, so it is no retriever for large KGs.

Only identifiers (relationship types from the KG's catalog, backtick-escaped) are written into the text;
candidate ids and distances are parameters.
"""

from __future__ import annotations

from typing import Any

from engine._config import injective_mode
from engine._cypher import escape_identifier
from engine.matching import Candidates, KGEdge, Match
from engine.pattern import Pattern


def oracle_query(pattern: Pattern, cands: Candidates, *, injective: bool | str = True,
                 directed: bool = False) -> str:
    distinct = injective_mode(injective)
    var = {nid: f"n{i}" for i, nid in enumerate(pattern.nodes)}
    parts = []
    for e in pattern.edges:
        types = sorted(cands.relations[e.index])
        if not types:
            return "RETURN 1 AS nothing LIMIT 0"
        alt = "|".join(escape_identifier(t) for t in types)
        arrow = ("-[r{i}:{alt}]->" if directed else "-[r{i}:{alt}]-").format(i=e.index, alt=alt)
        parts.append(f"({var[e.head]}:IsoragEntity){arrow}({var[e.tail]}:IsoragEntity)")
    # one MATCH: relationships distinct (Cypher's relationship isomorphism); one MATCH per edge: reusable
    match = ("MATCH " + ", ".join(parts)) if distinct != "none" else "\n".join("MATCH " + p for p in parts)
    where = []
    for nid, v in var.items():
        if cands.nodes[nid] is not None:
            where.append(f"{v}.isorag_eid IN $c_{v}")
    if distinct == "nodes":
        vs = list(var.values())
        where += [f"{a} <> {b}" for i, a in enumerate(vs) for b in vs[i + 1:]]
    elif distinct == "edges":  # distinct relationships (one MATCH); unknowns apart from the named entities
        where += [f"{var[k.id]} <> {var[u.id]}" for k in pattern.known_nodes for u in pattern.unknown_nodes]
    terms = [f"$d_{v}[toString({v}.isorag_eid)]" for nid, v in var.items() if cands.nodes[nid] is not None]
    terms += [f"$rd{e.index}[type(r{e.index})]" for e in pattern.edges]
    gsd = " + ".join(terms) if terms else "0.0"
    ret = [f"{v}.isorag_eid AS {v}" for v in var.values()]
    ret += [f"[startNode(r{e.index}).isorag_eid, type(r{e.index}), endNode(r{e.index}).isorag_eid] AS r{e.index}"
            for e in pattern.edges]
    return (match + ("\nWHERE " + " AND ".join(where) if where else "")
            + f"\nWITH *, {gsd} AS gsd\nRETURN " + ", ".join(ret) + ", gsd\nORDER BY gsd ASC\nLIMIT $limit")


def oracle_matches(graph: Any, pattern: Pattern, cands: Candidates, *, limit: int = 1000,
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
        params[f"rd{e.index}"] = dict(cands.relations[e.index])
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
