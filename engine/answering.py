"""Answers and verdicts: SimGRAG's three steps around :meth:`Engine.retrieve` (paper 002, DIGEST §3.1, §6.2).

``ask``:    question --LLM (few-shot)--> pattern --retrieve--> top-k subgraphs --verbalize--> LLM --> :class:`Answer`
``verify``: claim --LLM (few-shot)--> pattern --retrieve--> evidence --LLM True/False--> :class:`Verdict`

The pattern may come from the caller (``pattern=``) instead of the LLM, and every step but the pattern works
without an LLM:

* an answer is then the entities bound to the pattern's unknown target in the best subgraphs;
* a verdict follows the rule below (``method="rule"``). A known element of the claim (entity or relation) is
  *grounded* when the KG has an item within :class:`~engine._config.VerifySettings` ``threshold``
  (``relation_threshold`` for relations) of its text, and *matched* by the nearest such item (ties within
  ``tie``). Then

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

Stage failures: with ``raise_errors=True`` (the default) a failing stage raises its typed error
(:class:`~engine._errors.ConfigError` when a pattern is needed and no LLM is configured,
:class:`~engine._errors.LLMError`, :class:`~engine._errors.PatternParseError`, a store error...); with
``raise_errors=False`` the result comes back with ``failed_stage`` and ``error`` set and what was done before
(a verdict then says NOT_ENOUGH_INFO). Batch APIs (``verify_many``, jobs) use ``raise_errors=False``. Stage
names: ``pattern`` (the caller's pattern is invalid, or none can be had), ``llm_pattern``, ``retrieve``,
``verify`` (the rule), ``llm_answer``, ``llm_verify``.

Timings are milliseconds per stage: ``llm_pattern``, the retrieval's ``embed``, ``vector``, ``graph`` and its
``retrieve`` total, ``verbalize``, ``llm_answer`` / ``llm_verify``, and ``total``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from engine._config import MatchSettings, VerifySettings
from engine._errors import ConfigError, IsoragError, PatternError
from engine.llm import LLMStats, metered
from engine.pattern import Pattern, unknown_number
from engine.retrieval import AnswerEntity, RetrievalResult, Subgraph, as_pattern, unmatched_dict
from engine.verbalize import verbalize_subgraphs

if TYPE_CHECKING:  # pragma: no cover
    from engine._engine import Engine

__all__ = [
    "LABELS",
    "NOT_ENOUGH_INFO",
    "REFUTED",
    "SUPPORTED",
    "Answer",
    "AnswerEvent",
    "PatternEvent",
    "SubgraphsEvent",
    "TokenEvent",
    "Verdict",
    "NO_LLM_HELP",
]

SUPPORTED = "SUPPORTED"
REFUTED = "REFUTED"
NOT_ENOUGH_INFO = "NOT_ENOUGH_INFO"
LABELS = (SUPPORTED, REFUTED, NOT_ENOUGH_INFO)
#: without an LLM, the answer text names the answers whose GSD is within this of the best one (the others stay in
#: ``Answer.answers`` with their GSD): an entity bound in a worse subgraph is a worse answer, not another answer
TEXT_TIE = 0.02

#: heads the scored triples in the evidence the LLM reads (QSRAG's confidence-annotated triples)
SCORED_HEADER = "scored triples (confidence from the triple scorer):"


def _scorer_configured(engine: Engine) -> bool:
    return bool(getattr(engine.config, "scorer", None))


def _anchors(subgraphs: Sequence[Subgraph]) -> list[int]:
    """The KG entities of the matched subgraphs: the anchors of the scorer's neighbourhood."""
    return list(dict.fromkeys(e.eid for sg in subgraphs for e in sg.mapping.values()))


NO_LLM_HELP = (
    "no LLM is configured to turn the text into a pattern. Either pass the pattern yourself "
    '(pattern={"triples": [["Heat", "directed_by", "UNKNOWN director 1"]]} in Python, --pattern on the command '
    "line), or configure an OpenAI-compatible "
    "endpoint: set ISORAG_LLM_BASE_URL (e.g. http://localhost:11434/v1) and ISORAG_LLM_MODEL (and "
    "ISORAG_LLM_API_KEY or OPENAI_API_KEY if it needs one), or pass Engine(llm=LLMConfig(base_url=..., "
    "model=...)) or Engine(llm=<a langchain-core chat model>)"
)


def _round(ms: float) -> float:
    return round(ms, 3)


def _usage_dict(stats: LLMStats) -> dict[str, float]:
    snap = stats.snapshot()
    snap["seconds"] = round(snap["seconds"], 4)
    return snap


def _subgraph_dicts(subgraphs: Sequence[Subgraph]) -> list[dict[str, Any]]:
    return [s.to_dict() for s in subgraphs]


def _triples(subgraphs: Sequence[Subgraph]) -> list[list[tuple[str, str, str]]]:
    return [[t.as_tuple() for t in sg.triples] for sg in subgraphs]


# ---------------------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------------------


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
    #: who gave ``text``: "llm", "pattern" (the entities bound to the pattern's target, no LLM) or "scorer"
    #: (no pattern matched and no LLM: extracted from the scored triples, see ``scored_answers``)
    answer_source: str | None = None
    #: the triple scorer's retrieval (``config.scorer``): an :class:`~engine.scoring.service.ScoringResult`
    scored: Any = None
    #: answers extracted from the scored triples (``answer_source == "scorer"``), best first
    scored_answers: list[Any] = field(default_factory=list)
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
            "exact": r.exact if r is not None else None,
            "stats": dict(r.stats) if r is not None else {},
            "answer_source": self.answer_source,
            "scored": self.scored.to_dict() if self.scored is not None else None,
            "scored_answers": [a.to_dict() for a in self.scored_answers],
            "unmatched": unmatched_dict(self.unmatched),
        }

    def to_json(self, **kw: Any) -> str:
        kw.setdefault("ensure_ascii", False)
        return json.dumps(self.to_dict(), **kw)


@dataclass
class Verdict:
    """What :meth:`Engine.verify` returns: SUPPORTED, REFUTED or NOT_ENOUGH_INFO, with the evidence.

    ``method`` is ``"llm"`` (SimGRAG's True/False prompt) or ``"rule"`` (no LLM: see the module docstring);
    ``reason`` says why in a sentence, ``text`` is the LLM's whole answer. ``gsd`` is the best evidence
    subgraph's GSD; ``relaxed`` (rule, REFUTED) the claim element the KG has differently.
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
    #: named pattern nodes that are no KG entity's name, with the closest names (``RetrievalResult.unmatched``)
    unmatched: dict[str, list[tuple[str, float]]] = field(default_factory=dict)

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
            "unmatched": unmatched_dict(self.unmatched),
        }

    def to_json(self, **kw: Any) -> str:
        kw.setdefault("ensure_ascii", False)
        return json.dumps(self.to_dict(), **kw)


# -- streaming events (Engine.ask_stream) -------------------------------------------------------------------


@dataclass
class PatternEvent:
    """First event: the pattern (from the caller or the LLM)."""

    pattern: Pattern
    text: str | None
    kind: str = "pattern"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "pattern": self.pattern.to_json(), "text": self.text}


@dataclass
class SubgraphsEvent:
    """Second event: the retrieved subgraphs and their verbalization."""

    subgraphs: list[Subgraph]
    evidence: str
    retrieval: RetrievalResult
    kind: str = "subgraphs"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "subgraphs": _subgraph_dicts(self.subgraphs), "evidence": self.evidence}


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


# ---------------------------------------------------------------------------------------------------------
# One run of the pipeline: the bookkeeping shared by the sync, async and streaming drivers
# ---------------------------------------------------------------------------------------------------------


class _Run:
    """State of one ask/verify: the result being filled, stage timings, the stage running, the LLM usage."""

    def __init__(self, engine: Engine, result: Answer | Verdict, raise_errors: bool) -> None:
        self.engine = engine
        self.result = result
        self.raise_errors = raise_errors
        self.started = time.perf_counter()
        self.stage_name: str | None = None
        self.usage = LLMStats()

    @contextlib.contextmanager
    def stage(self, name: str, *, llm: bool = False) -> Iterator[None]:
        """Time a stage; an error inside it names the stage. ``llm=True`` counts the LLM usage inside."""
        self.stage_name = name
        t0 = time.perf_counter()
        try:
            if llm:
                with metered(self.usage):
                    yield
            else:
                yield
        finally:
            self.result.timings[name] = _round((time.perf_counter() - t0) * 1000.0)
        self.stage_name = None

    def fail(self, exc: IsoragError) -> None:
        """Record a stage failure; re-raise it unless the caller asked for ``raise_errors=False``."""
        r = self.result
        r.failed_stage = self.stage_name or "pattern"
        r.error = str(exc)
        r.error_type = type(exc).__name__
        if isinstance(r, Verdict):
            r.label = NOT_ENOUGH_INFO
            r.reason = f"the {r.failed_stage} stage failed: {exc}"
        if self.raise_errors:
            self.finish()
            raise exc

    def finish(self) -> Any:
        self.result.timings["total"] = _round((time.perf_counter() - self.started) * 1000.0)
        self.result.usage = _usage_dict(self.usage)
        return self.result

    # -- steps ---------------------------------------------------------------------------------------------

    def given_pattern(self, pattern: Any) -> Pattern | None:
        if pattern is None:
            return None
        self.stage_name = "pattern"
        pat = as_pattern(pattern)
        self.stage_name = None
        return pat

    def need_llm(self) -> Any:
        llm = self.engine.llm
        if llm is None:
            self.stage_name = "pattern"
            raise ConfigError(NO_LLM_HELP)
        return llm

    def set_pattern(self, pattern: Pattern, text: str | None) -> None:
        self.result.pattern = pattern
        self.result.pattern_text = text

    def set_retrieval(self, res: RetrievalResult) -> None:
        r = self.result
        r.retrieval = res
        r.subgraphs = list(res.subgraphs)
        stage_ms = r.timings.pop("retrieve", 0.0)  # re-added after its parts, so that they read in order
        for name in ("embed", "vector", "graph"):
            if name in res.timings:
                r.timings[name] = res.timings[name]
        # the stage's wall time: it includes starting the stores and the embedder at first use
        r.timings["retrieve"] = max(stage_ms, res.timings.get("total", 0.0))
        r.warnings.extend(res.warnings)
        r.unmatched = dict(res.unmatched)
        if isinstance(r, Answer):
            r.answers = list(res.answers)
        elif r.subgraphs:
            r.gsd = r.subgraphs[0].gsd
        t0 = time.perf_counter()
        r.evidence = verbalize_subgraphs(_triples(r.subgraphs))
        r.timings["verbalize"] = _round((time.perf_counter() - t0) * 1000.0)

    # -- the triple scorer (DESIGN §5) ------------------------------------------------------------------------

    def add_scored(self, anchors: list[int] | None) -> bool:
        """Score the neighbourhood of ``anchors`` (None: entities linked from the question) with the engine's
        scorer and add the selected triples, with their confidences, to the evidence. True when there are any."""
        r = self.result
        assert isinstance(r, Answer)
        with self.stage("scoring"):
            sr = self.engine.score(r.query, anchors)
        r.scored = sr
        for name, ms in sr.timings.items():
            r.timings[f"scoring_{name}"] = ms
        r.warnings.extend(sr.warnings)
        if sr.triples:
            scored = SCORED_HEADER + "\n" + sr.evidence()
            r.evidence = f"{r.evidence}\n{scored}" if r.evidence else scored
        return bool(sr.triples)

    def scorer_text(self) -> str:
        """The answer from the scored triples alone (no pattern matched, no LLM)."""
        from engine.scoring.service import answer_text

        r = self.result
        assert isinstance(r, Answer)
        r.answer_source = "scorer"
        r.scored_answers = list(r.scored.answers) if r.scored is not None else []
        r.warnings.append("answer extracted from the triple scorer's top triples (no pattern matched and no LLM)")
        return answer_text(r.scored)

    # -- ask ------------------------------------------------------------------------------------------------

    def answer_prompt(self) -> str:
        from engine.prompting import render_answer_prompt

        return render_answer_prompt(self.result.query, self.result.evidence, self.engine.fewshot("answer"))

    def default_text(self) -> str:
        """The answer without an LLM (or without evidence to give one)."""
        r = self.result
        assert isinstance(r, Answer)
        if not r.subgraphs:
            msg = f"No subgraph of KG {self.engine.kg!r} matches the pattern."
            r.warnings.append("no subgraph matches the pattern: nothing to answer from")
            return msg
        if r.answers:
            best = r.answers[0].gsd
            names = [a.entity.name for a in r.answers if a.gsd <= best + TEXT_TIE]
            more = len(r.answers) - len(names)
            return ", ".join(names) + (f" (and {more} more at a larger GSD)" if more else "")
        return f"The KG has {len(r.subgraphs)} subgraph(s) matching the pattern (best GSD {r.subgraphs[0].gsd:.4f})."

    # -- verify ---------------------------------------------------------------------------------------------

    def verify_prompt(self) -> str:
        from engine.prompting import render_verify_prompt

        return render_verify_prompt(self.result.claim, self.result.evidence, self.engine.fewshot("verify"))

    def set_llm_verdict(self, text: str) -> None:
        from engine.prompting import parse_verdict

        r = self.result
        assert isinstance(r, Verdict)
        r.text = text
        r.method = "llm"
        said = parse_verdict(text)
        if said is None:
            r.label = NOT_ENOUGH_INFO
            r.reason = "the LLM's answer says neither True nor False"
        else:
            r.label = SUPPORTED if said else REFUTED
            r.reason = " ".join(text.split())[:500]

    def set_no_evidence(self) -> None:
        r = self.result
        assert isinstance(r, Verdict)
        r.method = "llm"
        r.label = NOT_ENOUGH_INFO
        r.reason = "no subgraph of the KG matches the claim's pattern: no evidence to judge it by"


# ---------------------------------------------------------------------------------------------------------
# ask
# ---------------------------------------------------------------------------------------------------------


def _match_settings(engine: Engine, match: Mapping[str, Any]) -> MatchSettings:
    return replace(engine.config.match, **match) if match else engine.config.match


def ask(engine: Engine, query: str, *, pattern: Any = None, k: int | None = None, raise_errors: bool = True,
        **match: Any) -> Answer:
    run = _Run(engine, Answer(query), raise_errors)
    try:
        pat = run.given_pattern(pattern)
        text = None
        scorer = _scorer_configured(engine)
        # with a scorer and no LLM, a question without a pattern goes to the scorer alone
        if pat is None and not (scorer and engine.llm is None):
            from engine.prompting import generate_pattern

            try:
                with run.stage("llm_pattern", llm=True):  # the client starts at first use
                    llm = run.need_llm()
                    pat, text = generate_pattern(llm, query, engine.fewshot("pattern"))
            except PatternError as e:
                if not scorer:
                    raise
                run.result.warnings.append(f"no pattern from the LLM ({e}): the triple scorer retrieves instead")
        res = None
        if pat is not None:
            run.set_pattern(pat, text)
            with run.stage("retrieve"):
                res = engine.retrieve(pat, k=k, **match)
            run.set_retrieval(res)
        matched = res is not None and bool(res.subgraphs)
        scored = scorer and run.add_scored(_anchors(res.subgraphs) if matched and res is not None else None)
        llm = engine.llm
        if llm is not None and (matched or scored):
            with run.stage("llm_answer", llm=True):
                run.result.text = llm.complete(run.answer_prompt())
            run.result.answer_source = "llm"
        elif scorer and not matched:
            run.result.text = run.scorer_text()
        else:
            run.result.text = run.default_text()
            run.result.answer_source = "pattern"
    except IsoragError as e:
        run.fail(e)
    return run.finish()


async def aask(engine: Engine, query: str, *, pattern: Any = None, k: int | None = None,
               raise_errors: bool = True, **match: Any) -> Answer:
    run = _Run(engine, Answer(query), raise_errors)
    try:
        pat = run.given_pattern(pattern)
        text = None
        scorer = _scorer_configured(engine)
        if pat is None and not (scorer and engine.llm is None):
            from engine.prompting import agenerate_pattern

            try:
                with run.stage("llm_pattern", llm=True):  # the client starts at first use
                    llm = run.need_llm()
                    pat, text = await agenerate_pattern(llm, query, engine.fewshot("pattern"))
            except PatternError as e:
                if not scorer:
                    raise
                run.result.warnings.append(f"no pattern from the LLM ({e}): the triple scorer retrieves instead")
        res = None
        if pat is not None:
            run.set_pattern(pat, text)
            with run.stage("retrieve"):
                res = await asyncio.to_thread(engine.retrieve, pat, k, **match)
            run.set_retrieval(res)
        matched = res is not None and bool(res.subgraphs)
        scored = scorer and await asyncio.to_thread(
            run.add_scored, _anchors(res.subgraphs) if matched and res is not None else None)
        llm = engine.llm
        if llm is not None and (matched or scored):
            with run.stage("llm_answer", llm=True):
                run.result.text = await llm.acomplete(run.answer_prompt())
            run.result.answer_source = "llm"
        elif scorer and not matched:
            run.result.text = run.scorer_text()
        else:
            run.result.text = run.default_text()
            run.result.answer_source = "pattern"
    except IsoragError as e:
        run.fail(e)
    return run.finish()


def _metered_next(it: Iterator[str], stats: LLMStats) -> str:
    with metered(stats):
        return next(it)


def ask_stream(engine: Engine, query: str, *, pattern: Any = None, k: int | None = None,
               raise_errors: bool = True, **match: Any) -> Iterator[Any]:
    """Events: :class:`PatternEvent`, :class:`SubgraphsEvent`, :class:`TokenEvent` (as the LLM streams) and
    finally :class:`AnswerEvent`."""
    run = _Run(engine, Answer(query), raise_errors)
    answer = run.result
    assert isinstance(answer, Answer)
    try:
        pat = run.given_pattern(pattern)
        text = None
        if pat is None:
            from engine.prompting import generate_pattern

            with run.stage("llm_pattern", llm=True):  # the client starts at first use
                llm = run.need_llm()
                pat, text = generate_pattern(llm, query, engine.fewshot("pattern"))
        run.set_pattern(pat, text)
        yield PatternEvent(pat, text)
        with run.stage("retrieve"):
            res = engine.retrieve(pat, k=k, **match)
        run.set_retrieval(res)
        yield SubgraphsEvent(answer.subgraphs, answer.evidence, res)
        llm = engine.llm
        if llm is not None and res.subgraphs:
            run.stage_name = "llm_answer"
            prompt = run.answer_prompt()
            parts: list[str] = []
            tokens = llm.stream(prompt)
            t_llm = 0.0
            try:
                while True:
                    run.stage_name = "llm_answer"
                    t0 = time.perf_counter()
                    try:
                        piece = _metered_next(tokens, run.usage)
                    except StopIteration:
                        break
                    finally:
                        t_llm += time.perf_counter() - t0
                        answer.timings["llm_answer"] = _round(t_llm * 1000.0)
                    run.stage_name = None
                    parts.append(piece)
                    yield TokenEvent(piece)
            finally:
                close = getattr(tokens, "close", None)
                if close is not None:
                    close()
            answer.text = "".join(parts)
        else:
            answer.text = run.default_text()
            yield TokenEvent(answer.text)
    except IsoragError as e:
        run.fail(e)
    yield AnswerEvent(run.finish())


async def aask_stream(engine: Engine, query: str, *, pattern: Any = None, k: int | None = None,
                      raise_errors: bool = True, **match: Any) -> AsyncIterator[Any]:
    """The async twin of :func:`ask_stream`."""
    run = _Run(engine, Answer(query), raise_errors)
    answer = run.result
    assert isinstance(answer, Answer)
    try:
        pat = run.given_pattern(pattern)
        text = None
        if pat is None:
            from engine.prompting import agenerate_pattern

            with run.stage("llm_pattern", llm=True):  # the client starts at first use
                llm = run.need_llm()
                pat, text = await agenerate_pattern(llm, query, engine.fewshot("pattern"))
        run.set_pattern(pat, text)
        yield PatternEvent(pat, text)
        with run.stage("retrieve"):
            res = await asyncio.to_thread(engine.retrieve, pat, k, **match)
        run.set_retrieval(res)
        yield SubgraphsEvent(answer.subgraphs, answer.evidence, res)
        llm = engine.llm
        if llm is not None and res.subgraphs:
            run.stage_name = "llm_answer"
            prompt = run.answer_prompt()
            parts: list[str] = []
            tokens = llm.astream(prompt).__aiter__()
            t_llm = 0.0
            try:
                while True:
                    run.stage_name = "llm_answer"
                    t0 = time.perf_counter()
                    try:
                        with metered(run.usage):
                            piece = await tokens.__anext__()
                    except StopAsyncIteration:
                        break
                    finally:
                        t_llm += time.perf_counter() - t0
                        answer.timings["llm_answer"] = _round(t_llm * 1000.0)
                    run.stage_name = None
                    parts.append(piece)
                    yield TokenEvent(piece)
            finally:
                aclose = getattr(tokens, "aclose", None)
                if aclose is not None:
                    await aclose()
            answer.text = "".join(parts)
        else:
            answer.text = run.default_text()
            yield TokenEvent(answer.text)
    except IsoragError as e:
        run.fail(e)
    yield AnswerEvent(run.finish())


# ---------------------------------------------------------------------------------------------------------
# verify
# ---------------------------------------------------------------------------------------------------------


def _verify_settings(engine: Engine, threshold: float | None) -> VerifySettings:
    vs = engine.config.verify
    return vs if threshold is None else replace(vs, threshold=threshold)


def verify(engine: Engine, claim: str, *, pattern: Any = None, k: int | None = None,
           threshold: float | None = None, raise_errors: bool = True, **match: Any) -> Verdict:
    run = _Run(engine, Verdict(claim), raise_errors)
    verdict = run.result
    assert isinstance(verdict, Verdict)
    vs = _verify_settings(engine, threshold)
    try:
        pat = run.given_pattern(pattern)
        text = None
        if pat is None:
            from engine.prompting import generate_pattern

            with run.stage("llm_pattern", llm=True):  # the client starts at first use
                llm = run.need_llm()
                pat, text = generate_pattern(llm, claim, engine.fewshot("claim"), claim=True)
        run.set_pattern(pat, text)
        llm = engine.llm
        if llm is None:
            with run.stage("verify"):
                res, label, reason, relaxed = judge_claim(engine, pat, k=k, settings=_match_settings(engine, match),
                                                          verify=vs)
            _set_rule_verdict(run, res, label, reason, relaxed)
        else:
            with run.stage("retrieve"):
                res = engine.retrieve(pat, k=k, **match)
            run.set_retrieval(res)
            if res.subgraphs:
                with run.stage("llm_verify", llm=True):
                    answer = llm.complete(run.verify_prompt())
                run.set_llm_verdict(answer)
            else:
                run.set_no_evidence()
    except IsoragError as e:
        run.fail(e)
    return run.finish()


async def averify(engine: Engine, claim: str, *, pattern: Any = None, k: int | None = None,
                  threshold: float | None = None, raise_errors: bool = True, **match: Any) -> Verdict:
    run = _Run(engine, Verdict(claim), raise_errors)
    verdict = run.result
    assert isinstance(verdict, Verdict)
    vs = _verify_settings(engine, threshold)
    try:
        pat = run.given_pattern(pattern)
        text = None
        if pat is None:
            from engine.prompting import agenerate_pattern

            with run.stage("llm_pattern", llm=True):  # the client starts at first use
                llm = run.need_llm()
                pat, text = await agenerate_pattern(llm, claim, engine.fewshot("claim"), claim=True)
        run.set_pattern(pat, text)
        llm = engine.llm
        if llm is None:
            settings = _match_settings(engine, match)
            with run.stage("verify"):
                res, label, reason, relaxed = await asyncio.to_thread(
                    judge_claim, engine, pat, k=k, settings=settings, verify=vs)
            _set_rule_verdict(run, res, label, reason, relaxed)
        else:
            with run.stage("retrieve"):
                res = await asyncio.to_thread(engine.retrieve, pat, k, **match)
            run.set_retrieval(res)
            if res.subgraphs:
                with run.stage("llm_verify", llm=True):
                    answer = await llm.acomplete(run.verify_prompt())
                run.set_llm_verdict(answer)
            else:
                run.set_no_evidence()
    except IsoragError as e:
        run.fail(e)
    return run.finish()


def _set_rule_verdict(run: _Run, res: RetrievalResult, label: str, reason: str, relaxed: str | None) -> None:
    verify_ms = run.result.timings.pop("verify", 0.0)
    run.set_retrieval(res)
    verdict = run.result
    assert isinstance(verdict, Verdict)
    verdict.timings["verify"] = verify_ms
    verdict.method = "rule"
    verdict.label, verdict.reason, verdict.relaxed = label, reason, relaxed


# -- the rule ---------------------------------------------------------------------------------------------


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


def judge_claim(engine: Engine, pattern: Pattern, *, k: int | None = None, settings: MatchSettings | None = None,
                verify: VerifySettings | None = None) -> tuple[RetrievalResult, str, str, str | None]:
    """The verdict on ``pattern`` without an LLM (the rule in the module docstring).

    Returns the evidence (a :class:`RetrievalResult`: the claim's own matches, or those of the claim with one
    element relaxed, or the nearest subgraphs), the label, a one-sentence reason and the relaxed element.
    Candidates are searched once (one embedding call, one vector search); the strict and relaxed searches reuse
    them with narrower or wider candidate sets.
    """
    from engine.matching import Candidates, Matcher

    settings = settings or engine.config.match
    vs = verify or engine.config.verify
    k = k or settings.k
    retriever = engine.retriever
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    cands = retriever.candidates(pattern, settings, timings)

    def search(pat: Pattern, c: Candidates, kk: int) -> RetrievalResult:
        t0 = time.perf_counter()
        matches, stats = Matcher(retriever.graph, settings).top_k(pat, c, kk,
                                                                  deadline=time.monotonic() + settings.deadline_s)
        res = retriever.build_result(pat, matches, c, stats)
        timings["graph"] = timings.get("graph", 0.0) + time.perf_counter() - t0
        return res

    def done(res: RetrievalResult) -> RetrievalResult:
        timings["total"] = time.perf_counter() - t_start
        res.timings = {name: _round(v * 1000.0) for name, v in timings.items()}
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
        c = cands.relations[edge.index]
        if not edge.known:
            strict_rels[edge.index] = c
            continue
        if not c:
            far_rels.append((edge.label, None, float("inf")))
            strict_rels[edge.index] = {}
            continue
        best = min(c.values())
        if best > vs.relation_threshold:
            far_rels.append((edge.label, cands.type_names.get(min(c, key=c.__getitem__)), best))
        strict_rels[edge.index] = {t: d for t, d in c.items()
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


# ---------------------------------------------------------------------------------------------------------
# many claims
# ---------------------------------------------------------------------------------------------------------


def claim_args(item: Any) -> tuple[str, Any]:
    """``(claim, pattern)`` from a claim string, a ``(claim, pattern)`` pair or a mapping with ``"claim"``
    (and optionally ``"pattern"``)."""
    if isinstance(item, str):
        return item, None
    if isinstance(item, Mapping):
        if not isinstance(item.get("claim"), str):
            raise PatternError(f'a claim mapping needs a "claim" string, got keys {sorted(item)[:10]}')
        return item["claim"], item.get("pattern")
    if isinstance(item, Sequence) and len(item) == 2 and isinstance(item[0], str):
        return item[0], item[1]
    raise PatternError(f"cannot read a claim from {type(item).__name__}: pass a string, (claim, pattern) or "
                       '{"claim": ..., "pattern": ...}')


def verify_many(engine: Engine, claims: Sequence[Any], *, concurrency: int = 4, raise_errors: bool = False,
                **kw: Any) -> list[Verdict]:
    from concurrent.futures import ThreadPoolExecutor

    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"concurrency must be a positive int, got {concurrency!r}")
    items = [claim_args(c) for c in claims]

    def one(item: tuple[str, Any]) -> Verdict:
        return verify(engine, item[0], pattern=item[1], raise_errors=raise_errors, **kw)

    if concurrency == 1 or len(items) <= 1:
        return [one(it) for it in items]
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="isorag-verify") as pool:
        return list(pool.map(one, items))


async def averify_many(engine: Engine, claims: Sequence[Any], *, concurrency: int = 4,
                       raise_errors: bool = False, **kw: Any) -> list[Verdict]:
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"concurrency must be a positive int, got {concurrency!r}")
    items = [claim_args(c) for c in claims]
    gate = asyncio.Semaphore(concurrency)

    async def one(item: tuple[str, Any]) -> Verdict:
        async with gate:
            return await averify(engine, item[0], pattern=item[1], raise_errors=raise_errors, **kw)

    return list(await asyncio.gather(*(one(it) for it in items)))
