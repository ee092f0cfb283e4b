"""The verdict on a claim without an LLM: a rule over exact matches of the claim's pattern and of the pattern
with one element made unknown.

A known element of the claim (entity or relation) is *grounded* when the KG has an item within
:class:`~engine._config.VerifySettings` ``threshold`` (``relation_threshold`` for relations) of its text, and
*matched* by the nearest such item (ties within ``tie``). Then

- **SUPPORTED**: a subgraph of the KG is isomorphic to the claim's pattern with every known element matched:
  the KG states the claim (its GSD is then the smallest the candidates allow);
- **NOT_ENOUGH_INFO**: some element of the claim is not grounded (the KG does not know that entity or that kind
  of relation, so it can say nothing either way), or everything is grounded but the KG has nothing around the
  claim's entities to compare it with;
- **REFUTED**: every element is grounded, the claim is not in the KG, and the KG has the claim's structure
  with exactly one element different: the claim with one entity (or one relation) made unknown matches
  (``"Heat" directed_by "Michael Mann"`` against the claim ``"Heat" directed_by "Ridley Scott"``). That
  subgraph is the evidence, and :attr:`Verdict.relaxed` names the element that differs. This is the
  closed-world reading a KG-based verifier can honestly make: the KG records this fact about these entities,
  and records it otherwise. It is wrong when the KG is incomplete for a many-valued relation (an actor the
  KG forgot); the LLM path (SimGRAG's True/False) has the same blind spot and says so less plainly.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from engine._config import MatchSettings, VerifySettings
from engine._errors import PatternError
from engine.answering.results import NOT_ENOUGH_INFO, REFUTED, SUPPORTED
from engine.retrieval.pattern import Pattern, unknown_number
from engine.retrieval.results import RetrievalResult
from engine._timing import ms

if TYPE_CHECKING:  # pragma: no cover
    from engine.retrieval.retriever import Retriever

__all__ = ["judge_claim"]


def _fresh_unknown(pattern: Pattern) -> int:
    return 1 + max((unknown_number(n.id) or 0 for n in pattern.unknown_nodes), default=0)


def _relax_node(pattern: Pattern, node_id: str) -> tuple[Pattern, str]:
    new = f"UNKNOWN {_fresh_unknown(pattern)}"
    triples = [(new if h == node_id else h, r, new if t == node_id else t) for h, r, t in pattern.triples]
    return Pattern.from_triples(triples), new


def _relax_edge(pattern: Pattern, index: int) -> Pattern:
    numbers = [unknown_number(e.label) or 0 for e in pattern.edges if not e.known]
    label = f"UNKNOWN relation {1 + max(numbers, default=0)}"
    triples = [(h, label if i == index else r, t) for i, (h, r, t) in enumerate(pattern.triples)]
    return Pattern.from_triples(triples)


def _fmt_triple(t: Any) -> str:
    return f"({t.head.name!r}, {t.relation!r}, {t.tail.name!r})"


def judge_claim(retriever: Retriever, pattern: Pattern, *, k: int | None = None,
                settings: MatchSettings | None = None,
                verify: VerifySettings | None = None) -> tuple[RetrievalResult, str, str, str | None]:
    """The verdict on ``pattern`` without an LLM (the rule in the module docstring), from ``retriever``'s KG.

    Returns the evidence (a :class:`RetrievalResult`: the claim's own matches, or those of the claim with one
    element relaxed, or the nearest subgraphs), the label, a one-sentence reason and the relaxed element.
    Candidates are searched once (one embedding call, one vector search); the strict and relaxed searches reuse
    them with narrower or wider candidate sets.

    Kept whole: it is the verdict rule, in its order (grounding, strict match, each node relaxed, each relation
    relaxed, not enough info), returning at the first step that decides; every step reuses the one candidate search
    ``cands``, the strict sets ``strict_nodes`` and ``strict_rels`` built from it, and the ``timings`` of ``search``.
    """
    from engine.retrieval.matcher import Candidates

    settings = settings or retriever.settings
    vs = verify or VerifySettings()
    k = k or settings.k
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    retriever.check_version()  # the graph stage's path (the replica only when built on this version)
    path = retriever.graph_path(settings)
    cands = retriever.candidates(pattern, settings, timings, path)

    def search(pat: Pattern, c: Candidates, kk: int) -> RetrievalResult:
        t0 = time.perf_counter()
        matches, stats, entities, served = path.top_k(pat, c, kk, settings,
                                                      deadline=time.monotonic() + settings.deadline_s)
        res = retriever.build_result(pat, matches, c, stats, entities)
        res.stats["graph_path"] = served
        timings["graph"] = timings.get("graph", 0.0) + time.perf_counter() - t0
        return res

    def done(res: RetrievalResult) -> RetrievalResult:
        timings["total"] = time.perf_counter() - t_start
        res.timings = {name: ms(v) for name, v in timings.items()}
        return res

    # grounding: the nearest KG item of every known element, within the thresholds
    strict_nodes: dict[str, dict[int, float] | None] = {}
    far: list[tuple[str, int | None, float]] = []  # (node, nearest eid, distance)
    for node in pattern.nodes.values():
        c = cands.nodes[node.id]
        if not node.known or c is None:
            strict_nodes[node.id] = c
            continue
        if not c:
            far.append((node.id, None, float("inf")))
            strict_nodes[node.id] = {}
            continue
        best = min(c.values())
        if best > vs.threshold:
            far.append((node.id, min(c, key=c.__getitem__), best))
        strict_nodes[node.id] = {eid: d for eid, d in c.items() if d <= best + vs.tie and d <= vs.threshold}
    strict_rels: dict[int, dict[str, float]] = {}
    far_rels: list[tuple[str, str | None, float]] = []
    for edge in pattern.edges:
        rc = cands.relations[edge.index]
        if not edge.known:
            strict_rels[edge.index] = rc
            continue
        if not rc:
            far_rels.append((edge.label, None, float("inf")))
            strict_rels[edge.index] = {}
            continue
        best = min(rc.values())
        if best > vs.relation_threshold:
            far_rels.append((edge.label, cands.type_names.get(min(rc, key=rc.__getitem__)), best))
        strict_rels[edge.index] = {t: d for t, d in rc.items()
                                   if d <= best + vs.tie and d <= vs.relation_threshold}

    if far or far_rels:
        names = retriever.graph.entities([eid for _, eid, _ in far if eid is not None]) if far else {}
        parts = []
        for nid, eid, d in far:
            if eid is None:
                parts.append(f"no entity like {nid!r}")
            else:
                near = (names.get(eid) or {}).get("name") or str(eid)
                parts.append(f"no entity like {nid!r} (nearest {near!r} at {d:.2f} > {vs.threshold:g})")
        for label, near_rel, d in far_rels:
            if near_rel is None:
                parts.append(f"no relation like {label!r}")
            else:
                parts.append(f"no relation like {label!r} (nearest {near_rel!r} at {d:.2f} > "
                             f"{vs.relation_threshold:g})")
        res = search(pattern, cands, k)
        return done(res), NOT_ENOUGH_INFO, f"the KG has {'; '.join(parts)}", None

    strict = Candidates(strict_nodes, strict_rels, cands.type_names, cands.cut)
    res = search(pattern, strict, k)
    if res.subgraphs:
        sg = res.subgraphs[0]
        said = ", ".join(_fmt_triple(t) for t in sg.triples)
        return done(res), SUPPORTED, f"the KG states it: {said} (GSD {sg.gsd:.3f})", None

    # relax one element at a time: objects before subjects (claims name what they assert last), then relations
    for node in reversed([n for n in pattern.nodes.values() if n.known]):
        relaxed, new_id = _relax_node(pattern, node.id)
        nodes = {(new_id if nid == node.id else nid): (None if nid == node.id else c)
                 for nid, c in strict_nodes.items()}
        try:
            res = search(relaxed, Candidates(nodes, dict(strict_rels), cands.type_names, cands.cut), k)
        except PatternError:  # nothing left to anchor the search (e.g. a self-loop on that node)
            continue
        if res.subgraphs:
            sg = res.subgraphs[0]
            other = sg.mapping[new_id].name
            said = ", ".join(_fmt_triple(t) for t in sg.triples)
            return (done(res), REFUTED,
                    f"the KG has {said}: {other!r} where the claim has {node.id!r}", node.id)
    for edge in pattern.edges:
        if not edge.known:
            continue
        relaxed = _relax_edge(pattern, edge.index)
        rels = dict(strict_rels)
        rels[edge.index] = {t: 0.0 for t in cands.type_names}
        try:
            res = search(relaxed, Candidates(dict(strict_nodes), rels, cands.type_names, cands.cut), k)
        except PatternError:
            continue
        if res.subgraphs:
            sg = res.subgraphs[0]
            got = next((t.relation for t in sg.triples if t.pattern_edge == edge.index), "?")
            said = ", ".join(_fmt_triple(t) for t in sg.triples)
            return (done(res), REFUTED,
                    f"the KG has {said}: relation {got!r} where the claim has {edge.label!r}", edge.label)

    res = search(pattern, cands, k)
    return (done(res), NOT_ENOUGH_INFO,
            "the KG knows every entity of the claim but has nothing that states or contradicts it", None)
