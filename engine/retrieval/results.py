"""What a retrieval returns (:class:`RetrievalResult`, from :meth:`engine.retrieval.retriever.Retriever.retrieve`): the
entities, triples and subgraphs found, the answers, the named nodes that matched no name, and their JSON forms."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from engine.linking.names import NameMatch
from engine.retrieval.pattern import Pattern

__all__ = ["AnswerEntity", "Entity", "RetrievalResult", "Subgraph", "Triple", "unmatched_dict", "unmatched_warning"]


def unmatched_warning(text: str, closest: Sequence[tuple[str, float]]) -> str:
    near = ", ".join(f"{name!r} ({d:.3f})" for name, d in closest) or "none"
    return f"no KG entity is named {text!r}: the match used the nearest entities instead (closest: {near})"


@dataclass(frozen=True)
class Entity:
    eid: int
    name: str
    key: str

    def to_dict(self) -> dict[str, Any]:
        return {"eid": self.eid, "name": self.name, "key": self.key}


@dataclass(frozen=True)
class Triple:
    """A KG triple in its source direction, with names for reading and ids for joining."""

    head: Entity
    relation: str
    tail: Entity
    pattern_edge: int

    def as_tuple(self) -> tuple[str, str, str]:
        return (self.head.name, self.relation, self.tail.name)

    def to_dict(self) -> dict[str, Any]:
        return {"head": self.head.name, "relation": self.relation, "tail": self.tail.name,
                "head_eid": self.head.eid, "tail_eid": self.tail.eid, "pattern_edge": self.pattern_edge}


@dataclass
class Subgraph:
    """A matched subgraph: pattern node -> KG entity, its triples, and its GSD, the sum of ``node_distances``
    (pattern node -> distance of its entity to the node's text; 0 for an unknown) and ``edge_distances`` (pattern
    edge index -> distance of its relation to the edge's text; 0 for an unknown relation)."""

    gsd: float
    mapping: dict[str, Entity]
    triples: list[Triple]
    node_distances: dict[str, float] = field(default_factory=dict)
    edge_distances: dict[int, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"gsd": self.gsd, "mapping": {k: v.to_dict() for k, v in self.mapping.items()},
                "triples": [t.to_dict() for t in self.triples],
                "node_distances": dict(self.node_distances),
                "edge_distances": {str(k): v for k, v in sorted(self.edge_distances.items())}}


@dataclass
class AnswerEntity:
    entity: Entity
    gsd: float
    node: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.entity.to_dict(), "gsd": self.gsd, "node": self.node}


@dataclass
class RetrievalResult:
    pattern: Pattern
    subgraphs: list[Subgraph]
    answers: list[AnswerEntity]
    #: per unknown pattern node: entities bound to it, best GSD first
    bindings: dict[str, list[AnswerEntity]]
    timings: dict[str, float]
    warnings: list[str] = field(default_factory=list)
    exact: bool = True
    stats: dict[str, Any] = field(default_factory=dict)
    #: per named pattern node text that is no KG entity's name (see
    #: :func:`~engine.retrieval.retriever.normalize_name`; only the NAME_CHECK_CANDIDATES nearest candidates are
    #: looked at): the closest names with their distances
    unmatched: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    #: the KG's version (:meth:`engine.stores.graph.GraphStore.version`'s ``seq``) the result was computed on
    kg_version: int | None = None
    #: per named pattern node text: how it reached the entity the best subgraph binds to it (or, with no subgraph,
    #: its nearest candidate): the entity's name, the name or alias that matched and how (exact, normalized,
    #: spelling or meaning: :class:`engine.linking.names.NameMatch`)
    names: dict[str, NameMatch] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern.to_json(),
            "subgraphs": [s.to_dict() for s in self.subgraphs],
            "answers": [a.to_dict() for a in self.answers],
            "bindings": {k: [a.to_dict() for a in v] for k, v in self.bindings.items()},
            "timings": self.timings,
            "warnings": self.warnings,
            "exact": self.exact,
            "stats": self.stats,
            "unmatched": unmatched_dict(self.unmatched),
            "kg_version": self.kg_version,
            "names": {t: m.to_dict() for t, m in self.names.items()},
        }


def unmatched_dict(unmatched: Mapping[str, Sequence[tuple[str, float]]]) -> dict[str, list[dict[str, Any]]]:
    return {text: [{"name": name, "distance": d} for name, d in closest] for text, closest in unmatched.items()}
