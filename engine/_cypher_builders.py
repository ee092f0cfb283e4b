"""Statements generated per call: each builder picks templates from ``cypher/`` and fills their slots through
:func:`engine._cypher.render`, with identifiers validated against the KG's catalog; every value stays a parameter.

The matcher's expansions (:func:`expand_statement`), the exhaustive matching oracle (:func:`oracle_statement`)
and a synthetic sample's own query (:func:`answer_statement`) are built here, and nowhere else.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

from engine._cypher import Fragment, direction, render, rel_types


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
