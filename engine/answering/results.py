"""What answering returns: :class:`Answer`, :class:`Verdict` and its labels, and the events of a streamed answer."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from engine.retrieval.pattern import Pattern
from engine.retrieval.results import AnswerEntity, RetrievalResult, Subgraph, unmatched_dict

if TYPE_CHECKING:  # pragma: no cover
    from engine.learned.generator import Proposal
    from engine.scoring.service import ScoredAnswer, ScoringResult

__all__ = [
    "LABELS",
    "NOT_ENOUGH_INFO",
    "REFUTED",
    "SUPPORTED",
    "Answer",
    "AnswerEvent",
    "PatternEvent",
    "ScoredEvent",
    "SubgraphsEvent",
    "StreamEvent",
    "TokenEvent",
    "Verdict",
]

SUPPORTED = "SUPPORTED"
REFUTED = "REFUTED"
NOT_ENOUGH_INFO = "NOT_ENOUGH_INFO"
LABELS = (SUPPORTED, REFUTED, NOT_ENOUGH_INFO)


def _subgraph_dicts(subgraphs: Sequence[Subgraph]) -> list[dict[str, Any]]:
    return [s.to_dict() for s in subgraphs]


@dataclass
class Answer:
    """What :meth:`Engine.ask` returns: the answer and why it was given.

    ``text`` is the LLM's answer (or, without an LLM, the names of ``answers``); ``answers`` the KG entities
    bound to the pattern's unknown target in the best subgraphs, best GSD first; ``evidence`` the verbalized
    subgraphs the LLM read. ``failed_stage`` / ``error`` are set when a stage failed and the caller asked for
    ``raise_errors=False``.
    """

    query: str
    text: str = ""
    answers: list[AnswerEntity] = field(default_factory=list)
    pattern: Pattern | None = None
    #: the LLM's text the pattern was parsed from (None when the caller gave the pattern)
    pattern_text: str | None = None
    subgraphs: list[Subgraph] = field(default_factory=list)
    evidence: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    failed_stage: str | None = None
    error: str | None = None
    error_type: str | None = None
    usage: dict[str, float] = field(default_factory=dict)
    retrieval: RetrievalResult | None = None
    warnings: list[str] = field(default_factory=list)
    #: the KG's version the result was computed on (``RetrievalResult.kg_version``; None without a retrieval)
    kg_version: int | None = None
    #: who gave ``text``: "llm", "pattern" (the entities bound to the given pattern's target, no LLM), "learned"
    #: (the same for the learned generator's pattern, see ``proposal``), "scorer" (no pattern matched and no LLM:
    #: extracted from the scored triples, see ``scored_answers``) or "none" (not answered: nobody may write the
    #: pattern, :func:`engine.learned.router.decide`; ``text`` says why and ``answers`` is empty)
    answer_source: str | None = None
    #: the learned generator's proposal (linked topics, beam of patterns with probabilities), when it ran
    proposal: Proposal | None = None
    #: the probability of the learned pattern used (None: the pattern came from the caller or the LLM)
    pattern_probability: float | None = None
    #: who wrote the pattern: "given", "llm" or "learned" (``route``: the router's choice)
    pattern_source: str | None = None
    #: the triple scorer's retrieval (``config.scorer``): an :class:`~engine.scoring.service.ScoringResult`
    scored: ScoringResult | None = None
    #: answers extracted from the scored triples (``answer_source == "scorer"``), best first
    scored_answers: list[ScoredAnswer] = field(default_factory=list)
    #: named pattern nodes that are no KG entity's name, with the closest names (``RetrievalResult.unmatched``)
    unmatched: dict[str, list[tuple[str, float]]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.failed_stage is None

    @property
    def gsd(self) -> float | None:
        return self.subgraphs[0].gsd if self.subgraphs else None

    def to_dict(self) -> dict[str, Any]:
        r = self.retrieval
        return {
            "query": self.query,
            "text": self.text,
            "answers": [a.to_dict() for a in self.answers],
            "pattern": self.pattern.to_json() if self.pattern is not None else None,
            "pattern_text": self.pattern_text,
            "subgraphs": _subgraph_dicts(self.subgraphs),
            "evidence": self.evidence,
            "timings": dict(self.timings),
            "failed_stage": self.failed_stage,
            "error": self.error,
            "error_type": self.error_type,
            "usage": dict(self.usage),
            "warnings": list(self.warnings),
            "kg_version": self.kg_version,
            "exact": r.exact if r is not None else None,
            "stats": dict(r.stats) if r is not None else {},
            "answer_source": self.answer_source,
            "scored": self.scored.to_dict() if self.scored is not None else None,
            "scored_answers": [a.to_dict() for a in self.scored_answers],
            "unmatched": unmatched_dict(self.unmatched),
            "proposal": self.proposal.to_dict() if self.proposal is not None else None,
            "pattern_probability": self.pattern_probability,
            "pattern_source": self.pattern_source,
        }

    def to_json(self, **kw: Any) -> str:
        kw.setdefault("ensure_ascii", False)
        return json.dumps(self.to_dict(), **kw)


@dataclass
class Verdict:
    """What :meth:`Engine.verify` returns: SUPPORTED, REFUTED or NOT_ENOUGH_INFO, with the evidence.

    ``method`` is ``"llm"`` (SimGRAG's True/False prompt) or ``"rule"`` (no LLM: the rule of
    :mod:`engine.answering.verification`); ``reason`` says why in a sentence, ``text`` is the LLM's whole answer.
    ``gsd`` is the best evidence subgraph's GSD; ``relaxed`` (rule, REFUTED) the claim element the KG has
    differently.
    """

    claim: str
    label: str = NOT_ENOUGH_INFO
    reason: str = ""
    text: str | None = None
    method: str = "rule"
    evidence: str = ""
    gsd: float | None = None
    relaxed: str | None = None
    pattern: Pattern | None = None
    pattern_text: str | None = None
    subgraphs: list[Subgraph] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    failed_stage: str | None = None
    error: str | None = None
    error_type: str | None = None
    usage: dict[str, float] = field(default_factory=dict)
    retrieval: RetrievalResult | None = None
    warnings: list[str] = field(default_factory=list)
    #: the KG's version the result was computed on (``RetrievalResult.kg_version``; None without a retrieval)
    kg_version: int | None = None
    #: named pattern nodes that are no KG entity's name, with the closest names (``RetrievalResult.unmatched``)
    unmatched: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    #: the learned generator's proposal for the claim, when it wrote the pattern
    proposal: Proposal | None = None
    pattern_probability: float | None = None
    #: who wrote the pattern: "given", "llm" or "learned"
    pattern_source: str | None = None

    @property
    def ok(self) -> bool:
        return self.failed_stage is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "label": self.label,
            "reason": self.reason,
            "text": self.text,
            "method": self.method,
            "evidence": self.evidence,
            "gsd": self.gsd,
            "relaxed": self.relaxed,
            "pattern": self.pattern.to_json() if self.pattern is not None else None,
            "pattern_text": self.pattern_text,
            "subgraphs": _subgraph_dicts(self.subgraphs),
            "timings": dict(self.timings),
            "failed_stage": self.failed_stage,
            "error": self.error,
            "error_type": self.error_type,
            "usage": dict(self.usage),
            "warnings": list(self.warnings),
            "kg_version": self.kg_version,
            "unmatched": unmatched_dict(self.unmatched),
            "proposal": self.proposal.to_dict() if self.proposal is not None else None,
            "pattern_probability": self.pattern_probability,
            "pattern_source": self.pattern_source,
        }

    def to_json(self, **kw: Any) -> str:
        kw.setdefault("ensure_ascii", False)
        return json.dumps(self.to_dict(), **kw)


# -- streaming events (Engine.ask_stream) -------------------------------------------------------------------


@dataclass
class PatternEvent:
    """The pattern (from the caller, the LLM or the learned generator), sent before its retrieval: the first event,
    unless there is none and the triple scorer answers alone. When a learned beam pattern matches nothing, the next
    one's event follows: the last before the :class:`SubgraphsEvent` is the pattern that answers."""

    pattern: Pattern
    text: str | None
    kind: str = "pattern"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "pattern": self.pattern.to_json(), "text": self.text}


@dataclass
class SubgraphsEvent:
    """The retrieved subgraphs and their verbalization, after the :class:`PatternEvent` (the scored triples, when
    a scorer adds some, are in the final answer's evidence)."""

    subgraphs: list[Subgraph]
    evidence: str
    retrieval: RetrievalResult
    kind: str = "subgraphs"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "subgraphs": _subgraph_dicts(self.subgraphs), "evidence": self.evidence}


@dataclass
class ScoredEvent:
    """The triple scorer's selected triples with their confidences (only with a scorer: ``config.scorer``), after
    the :class:`SubgraphsEvent` and before the answer's tokens."""

    scored: ScoringResult
    kind: str = "scored"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "scored": self.scored.to_dict()}


@dataclass
class TokenEvent:
    """A piece of the answer's text, as the LLM sends it (the whole text at once without an LLM)."""

    text: str
    kind: str = "token"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text}


@dataclass
class AnswerEvent:
    """Last event: the complete :class:`Answer` (also when a stage failed and ``raise_errors=False``)."""

    answer: Answer
    kind: str = "answer"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "answer": self.answer.to_dict()}


#: what :meth:`Engine.ask_stream` yields
StreamEvent = Union[PatternEvent, SubgraphsEvent, ScoredEvent, TokenEvent, AnswerEvent]
