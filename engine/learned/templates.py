"""Pattern templates: what the learned generator chooses among (docs/learned-patterns.md).

A template is a pattern with its topic entities taken out: triples over *slots*, ``T1``, ``T2``... for the topics
(in the order the question names them) and ``U1``, ``U2``... for the unknown nodes, the answer being the last
unknown. ``(T1, directed_by, U1), (U2, directed_by, U1)`` is "the films that share a director with T1". A
template fills into a :class:`~engine.retrieval.pattern.Pattern` with the linked topics' names
(:meth:`Template.fill`), unknown nodes written ``UNKNOWN <type> <n>`` (the type where the KG has entity types).

Templates come from a gold pattern (:meth:`Template.from_pattern`: synth records, the demo's questions, MetaQA's
question types) or, for a question-answer pair whose data gives none, from the KG (:func:`reaching_paths`: the
relation paths, up to 3 hops, from the topic to the answers; :func:`path_reach`: how much else each reaches; the
training chooses one per question across the training set, :func:`engine.learned.train.derive_candidates`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine._errors import PatternError
from engine.retrieval.pattern import Pattern
from engine.retrieval.retriever import normalize_name

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import GraphReader

__all__ = ["Template", "PathHit", "path_reach", "reaching_paths", "MAX_HOPS"]

#: longest relation path derived from the KG for a question-answer pair
MAX_HOPS = 3
#: walks read per derivation query (a dense entity's 3-hop walks are cut there)
DERIVE_CAP = 20_000
#: entities counted per path for its precision (a path reaching more is as bad as one reaching this many)
REACH_CAP = 5_000


@dataclass(frozen=True)
class Template:
    """A pattern over slots (see the module docstring). ``types``: the type hint of an unknown slot (``U2`` ->
    ``"film"``), where one is known; not part of equality."""

    triples: tuple[tuple[str, str, str], ...]
    types: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def topics(self) -> int:
        """How many topic slots it has."""
        return len({s for h, _, t in self.triples for s in (h, t) if s.startswith("T")})

    @property
    def relations(self) -> tuple[str, ...]:
        """The relation names in triple order (the relation path of a one-topic chain)."""
        return tuple(r for _, r, _ in self.triples)

    def key(self) -> str:
        return " ; ".join(f"{h} {r} {t}" for h, r, t in self.triples)

    def skeleton(self) -> str:
        """Its structure with the relations taken out (``T1 - U1 ; U1 - U2``: a chain of two, whichever)."""
        return " ; ".join(f"{h} - {t}" for h, _, t in self.triples)

    def slot_relations(self, slot: str) -> set[tuple[str, bool]]:
        """``(relation name, leaves the slot)`` of the edges at ``slot``."""
        return {(r, h == slot) for h, r, t in self.triples if slot in (h, t)}

    def answer_slot(self) -> str:
        """The answer's slot: the unknown with the highest number."""
        return max((s for h, _, t in self.triples for s in (h, t) if s.startswith("U")), key=lambda s: int(s[1:]))

    @classmethod
    def from_pattern(cls, pattern: Pattern, topics: Sequence[str], *, keep_types: bool = True) -> Template:
        """The template of ``pattern`` whose known nodes are ``topics`` (their texts, in the question's order; a
        node is one of them when its normalized text is). Raises PatternError when a known node is no topic, or
        the pattern has no unknown node."""
        want = {normalize_name(t): i for i, t in enumerate(dict.fromkeys(topics))}
        unknowns = pattern.unknown_nodes
        if not unknowns:
            raise PatternError("a template needs an unknown answer node")
        answer = pattern.answer_node()
        slot: dict[str, str] = {}
        for n in pattern.known_nodes:
            i = want.get(normalize_name(n.text or ""))
            if i is None:
                raise PatternError(f"pattern node {n.id!r} is none of the topics {list(topics)!r}")
            slot[n.id] = f"T{i + 1}"
        number = 0
        for n in unknowns:  # in order of first appearance, the answer last
            if n.id != answer:
                number += 1
                slot[n.id] = f"U{number}"
        slot[str(answer)] = f"U{number + 1}"
        types = {slot[n.id]: n.type_hint for n in unknowns if keep_types and n.type_hint}
        return cls(tuple((slot[h], r, slot[t]) for h, r, t in pattern.triples), types)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Template:
        return cls(tuple((str(h), str(r), str(t)) for h, r, t in obj["triples"]), dict(obj.get("types") or {}))

    def to_json(self) -> dict[str, Any]:
        return {"triples": [list(t) for t in self.triples], "types": dict(self.types)}

    def fill(self, topics: Sequence[str]) -> Pattern:
        """The pattern with ``topics[i]`` (a KG name) for slot ``T{i+1}``."""
        names: dict[str, str] = {f"T{i + 1}": t for i, t in enumerate(topics)}
        for h, _, t in self.triples:
            for s in (h, t):
                if s.startswith("U") and s not in names:
                    hint = self.types.get(s)
                    names[s] = f"UNKNOWN {hint} {s[1:]}" if hint else f"UNKNOWN {s[1:]}"
        return Pattern.from_triples([(names[h], r, names[t]) for h, r, t in self.triples])


def chain(relations: Sequence[str], outs: Sequence[bool], answer_type: str | None = None) -> Template:
    """The template of a relation path from ``T1``: hop i is ``relations[i]``, written from the walk's side when
    ``outs[i]`` (the KG's relationship leaves it), else towards it."""
    nodes = ["T1"] + [f"U{i + 1}" for i in range(len(relations))]
    triples = tuple((a, r, b) if out else (b, r, a) for a, b, r, out in zip(nodes, nodes[1:], relations, outs))
    return Template(triples, {nodes[-1]: answer_type} if answer_type else {})


@dataclass(frozen=True)
class PathHit:
    """A relation path from a topic that reaches some of a question's answers: its template, relationship types
    and directions (``outs``: the relationship leaves the walk's side), and how many of the ``answers`` it reaches."""

    template: Template
    types: tuple[str, ...]
    outs: tuple[bool, ...]
    reached: int
    answers: int

    @property
    def recall(self) -> float:
        return self.reached / self.answers


def reaching_paths(graph: GraphReader, topic: int, answers: Sequence[int], *, names: Mapping[str, str],
                   max_hops: int = MAX_HOPS) -> list[PathHit]:
    """Every relation path of 1 to ``max_hops`` hops from entity ``topic`` that reaches some of the ``answers``
    (eids), most reaching first (shorter first among equals), one read per length. The answer slot's type hint is
    the answers' most common entity type where the KG has entity types. ``names``: relationship type -> relation
    name (the KG's catalog)."""
    answers = sorted({a for a in answers if a != topic})
    if not answers:
        return []
    types = sorted(names)
    found: list[PathHit] = []
    for hops in range(1, max_hops + 1):
        rows = graph.read_named(f"learned_paths_{hops}", topic=topic, answers=answers, types=types, cap=DERIVE_CAP)
        for r in rows:
            t, o = tuple(r["types"]), tuple(bool(x) for x in r["outs"])
            found.append(PathHit(chain([names.get(x, x) for x in t], o), t, o, int(r["reached"]), len(answers)))
    if not found:
        return []
    typed = graph.read_named("learned_answer_types", eids=answers)
    if typed:
        hint = str(typed[0]["type"])
        found = [PathHit(Template(h.template.triples, {h.template.answer_slot(): hint}), h.types, h.outs, h.reached,
                         h.answers) for h in found]
    found.sort(key=lambda h: (-h.recall, len(h.types), h.template.key()))
    return found


def path_reach(graph: GraphReader, topic: int, hits: Sequence[PathHit], cap: int = REACH_CAP) -> list[int]:
    """How many distinct entities each path reaches from ``topic`` (at most ``cap``), one read per length: what
    a path's precision is measured by (a path through a year or a genre reaches its answers among thousands)."""
    out = [0] * len(hits)
    for hops in range(1, MAX_HOPS + 1):
        paths = [{"i": i, "types": list(h.types), "outs": list(h.outs)} for i, h in enumerate(hits)
                 if len(h.types) == hops]
        if paths:
            for r in graph.read_named(f"learned_path_reach_{hops}", topic=topic, paths=paths, cap=cap):
                out[int(r["i"])] = int(r["reach"])
    return out
