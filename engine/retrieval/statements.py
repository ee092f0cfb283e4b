"""Statements generated per call: each builder picks templates from ``cypher/`` and fills their slots through
:func:`engine._cypher.render`, with identifiers validated against the KG's catalog; every value stays a parameter.

The matcher's expansions (:func:`expand_statement`), the exhaustive matching oracle (:func:`oracle_statement`),
the one-statement path's statement (:func:`match_statement`) and a synthetic sample's own query
(:func:`answer_statement`) are built here, and nowhere else.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from engine._cypher import Fragment, direction, joined, rel_type, rel_types, render, variable

if TYPE_CHECKING:
    from engine.retrieval.pattern import Pattern


class CandidateSets(Protocol):
    """What the oracle's statement reads of :class:`engine.retrieval.matcher.Candidates` (a Protocol, so that this
    module does not import the matcher, which imports it)."""

    @property
    def nodes(self) -> Mapping[str, Mapping[int, float] | None]: ...

    @property
    def relations(self) -> Mapping[int, Mapping[str, float]]: ...


def _direction(forward: bool | None) -> dict[str, Fragment]:
    return direction("both" if forward is None else "out" if forward else "in")


def expand_statement(types: Sequence[str] | None, allowed: Container[str], forward: bool | None, *,
                     closes: bool = False, filter_nodes: bool = False, capped: bool = False,
                     split: bool = False) -> Fragment:
    """One matcher statement for a batch of states along one pattern edge (``cypher/match_expand*.cypher``).

    ``types`` (checked against ``allowed``, the KG's catalog) become a type alternation in the pattern; ``None``
    leaves the relationship untyped and each row filters by its own ``s.types``. ``forward``: the edge's direction
    from the mapped node (``None``: either). ``closes``: both ends mapped; ``filter_nodes``: the new node has
    candidates (``$cands``), and with ``split`` hubs above ``$dense`` are left to the caller; ``capped``: at most
    ``$cap`` relationships per state.
    """
    slots = {"rel_types": rel_types(types or (), allowed), **_direction(forward)}
    if closes:
        return render("match_expand_closing", **slots)
    if filter_nodes:
        return render("match_expand_split" if split else "match_expand_candidates", **slots)
    if capped:
        return render("match_expand_capped", **slots)
    return render("match_expand", **slots)


def _edge(head: Fragment, rel: Fragment, tail: Fragment, types: Fragment, forward: bool | None) -> Fragment:
    return render("pattern_edge", head=head, rel=rel, tail=tail, rel_types=types, **_direction(forward))


def _conditions(parts: list[Fragment]) -> Fragment:
    return joined(parts, " AND ") if parts else render("always")


def oracle_statement(pattern: Pattern, cands: CandidateSets, allowed: Container[str], *, distinct: str,
                     directed: bool) -> Fragment:
    """Every binding of ``pattern`` with its GSD (``cypher/oracle.cypher``). Node ``i`` of the pattern is the
    variable ``n<i>``, edge ``j`` is ``r<j>``; the parameters are ``$c_n<i>``/``$d_n<i>`` (candidates and
    their distances, eid as text) for each known node, ``$d_r<j>`` for each edge and ``$limit``."""
    var = {nid: variable("n", i) for i, nid in enumerate(pattern.nodes)}
    rel = {e.index: variable("r", e.index) for e in pattern.edges}
    parts = []
    for e in pattern.edges:
        types = sorted(cands.relations[e.index])
        if not types:
            return render("oracle_empty")
        parts.append(_edge(var[e.head], rel[e.index], var[e.tail], rel_types(types, allowed),
                           True if directed else None))
    # one MATCH: relationships distinct (Cypher's relationship isomorphism); one MATCH per edge: reusable
    if distinct != "none":
        match = render("match_clause", patterns=joined(parts, ", "))
    else:
        match = joined([render("match_clause", patterns=p) for p in parts], "\n")
    known = [v for nid, v in var.items() if cands.nodes[nid] is not None]
    where = [render("oracle_in_candidates", node=v) for v in known]
    if distinct == "nodes":
        vs = list(var.values())
        where += [render("distinct_pair", a=a, b=b) for i, a in enumerate(vs) for b in vs[i + 1:]]
    elif distinct == "edges":  # distinct relationships (one MATCH); unknowns apart from the named entities
        where += [render("distinct_pair", a=var[k.id], b=var[u.id])
                  for k in pattern.known_nodes for u in pattern.unknown_nodes]
    terms = [render("oracle_node_cost", node=v) for v in known]
    terms += [render("oracle_rel_cost", rel=r) for r in rel.values()]
    columns = [render("oracle_node_column", node=v) for v in var.values()]
    columns += [render("oracle_rel_column", triple=render("triple_of", rel=r), rel=r) for r in rel.values()]
    return render("oracle", match=match, conditions=_conditions(where), gsd=joined(terms, " + "),
                  columns=joined(columns, ", "))


def match_statement(pattern: Pattern, filtered_nodes: Container[str], tiers: Sequence[Container[int]], *,
                    distinct: str, directed: bool) -> Fragment:
    """The one-statement path's statement for a connected ``pattern`` (``cypher/match_statement.cypher``), one
    ``match_statement_tier`` block per cost tier.

    Node ``i`` of the pattern is ``n<i>``, edge ``j`` is ``r<j>``, tier ``t`` reads the map ``$tier<t>``. A node in
    ``filtered_nodes`` is bound to one of the first ``$tier<t>.k_n<i>`` of ``$c_n<i>`` (candidates nearest first)
    and, when known, costs ``$d_n<i>[eid as text]``; an edge in ``tiers[t]`` takes one of the first
    ``$tier<t>.k_r<j>`` of ``$t_r<j>`` (any other edge any type) and costs ``$d_r<j>[type]``. Relationships are
    untyped in the pattern, so that the text depends on the pattern's shape and never on its candidates (Neo4j
    plans each new text once)."""
    var = {nid: variable("n", i) for i, nid in enumerate(pattern.nodes)}
    rel = {e.index: variable("r", e.index) for e in pattern.edges}
    untyped = rel_types((), ())
    parts = [_edge(var[e.head], rel[e.index], var[e.tail], untyped, True if directed else None)
             for e in pattern.edges]
    if distinct != "none":
        match = render("match_clause", patterns=joined(parts, ", "))
    else:
        match = joined([render("match_clause", patterns=p) for p in parts], "\n")
    apart: list[Fragment] = []
    if distinct == "nodes":
        vs = list(var.values())
        apart = [render("distinct_pair", a=a, b=b) for i, a in enumerate(vs) for b in vs[i + 1:]]
    elif distinct == "edges":
        apart = [render("distinct_pair", a=var[k.id], b=var[u.id])
                 for k in pattern.known_nodes for u in pattern.unknown_nodes]
    terms = [render("oracle_node_cost", node=var[n.id]) for n in pattern.known_nodes]
    terms += [render("oracle_rel_cost", rel=r) for r in rel.values()]
    gsd = joined(terms, " + ") if terms else render("statement_zero")
    nodes = render("statement_list", items=joined([render("statement_eid", node=v) for v in var.values()], ", "))
    rels = render("statement_list", items=joined([render("triple_of", rel=r) for r in rel.values()], ", "))
    blocks = []
    for t, typed in enumerate(tiers):
        tier = variable("tier", t)
        where = [render("statement_in_candidates", node=v, tier=tier) for nid, v in var.items()
                 if nid in filtered_nodes]
        where += [render("statement_in_types", rel=rel[e.index], tier=tier) for e in pattern.edges
                  if e.index in typed]
        blocks.append(render("match_statement_tier", match=match, conditions=_conditions(where + apart),
                             nodes=nodes, rels=rels, gsd=gsd, tier=tier))
    return render("match_statement", tiers=joined(blocks, "\n"))


def answer_statement(edges: Sequence[tuple[int, int, str, int]], answer: int, seeds: Sequence[int],
                     allowed: Container[str] | None, *, directed: bool) -> Fragment:
    """The query of a synthetic sample's pattern (``cypher/synth_answer.cypher``): ``edges`` are ``(edge index,
    head index, relationship type, tail index)``, node ``i`` the variable ``n<i>``, edge ``j`` ``r<j>``; each seed's
    entity is the parameter ``$n<i>``; every node is a distinct entity.
    Types are checked against ``allowed`` (``None``: the types as sampled from the KG)."""
    used = sorted({h for _, h, _, _ in edges} | {t for _, _, _, t in edges})
    var = {i: variable("n", i) for i in used}
    patterns, triples = [], []
    for j, h, rtype, t in edges:
        r = variable("r", j)
        patterns.append(_edge(var[h], r, var[t], rel_type(rtype, allowed if allowed is not None else {rtype}),
                              True if directed else None))
        triples.append(render("triple_of", rel=r))
    where = [render("synth_seed", node=var[s]) for s in seeds if s in var]
    where += [render("distinct_pair", a=var[a], b=var[b]) for j, a in enumerate(used) for b in used[j + 1:]]
    return render("synth_answer", match=render("match_clause", patterns=joined(patterns, ", ")),
                  conditions=_conditions(where), answer=variable("n", answer), triples=joined(triples, ", "))
