"""The stages of answering and verification, written once (SimGRAG's three steps: pattern, subgraphs, answer).

``ask``:    question --LLM (few-shot)--> pattern --retrieve--> top-k subgraphs --score--> scored triples
            --verbalize--> LLM --> :class:`~engine.answering.results.Answer`
``verify``: claim --LLM (few-shot)--> pattern --retrieve--> evidence --LLM True/False--> ``Verdict``

A :class:`Pipeline` is built from its components (a retriever, an LLM, few-shot examples, optionally a triple
scorer) and makes a :class:`Flow` per question or claim: a generator that yields its I/O as requests
(:class:`Complete`, :class:`Generate`, :class:`Call`, :class:`Emit`) and is sent each result, as httpx's
``Auth.auth_flow`` is. The drivers of :mod:`engine.answering.drivers` carry the requests out: sync calls, awaits,
or tokens streamed to the caller. So ``ask``, ``aask``, ``ask_stream`` and ``aask_stream`` run the same stages.

The pattern may come from the caller (``pattern=``) or from the KG's learned pattern generator
(:mod:`engine.learned`: ``generator=``) instead of the LLM. Who writes it is the router's choice
(:mod:`engine.learned.router`, ``route=``): the generator without an LLM or when its pattern's probability reaches
its calibrated threshold, else the LLM; a learned beam is retrieved pattern by pattern until one matches exactly
(its relation path is in the KG; else the first that matches at all answers), and is answered without any LLM call
(``answer_source="learned"``); without an LLM, a question the router keeps from the generator is not answered, and
the answer says why (``answer_source="none"``). Every step but the pattern works without an LLM:

* an answer is then the entities bound to the pattern's unknown target in the best subgraphs;
* a verdict follows the rule of :mod:`engine.answering.verification` (``method="rule"``).

With a triple scorer (docs/triple-scorer.md) the scored triples of the matched subgraphs' neighbourhood join the
evidence; when no pattern matches (or none can be had and there is no LLM) the scorer retrieves from the entities linked
from the question, and without an LLM the answer is extracted from its triples (``answer_source="scorer"``).

Stage failures: with ``raise_errors=True`` (the default) a failing stage raises its typed error
(:class:`~engine._errors.ConfigError` when a pattern is needed and no LLM is configured,
:class:`~engine._errors.LLMError`, :class:`~engine._errors.PatternParseError`, a store error...); with
``raise_errors=False`` the result comes back with ``failed_stage`` and ``error`` set and what was done before
(a verdict then says NOT_ENOUGH_INFO). Batch APIs (``verify_many``, jobs) use ``raise_errors=False``. Stage
names: ``input`` (the question or claim is longer than ``max_question_chars``), ``pattern`` (the caller's pattern
is invalid, or none can be had), ``generate`` (the learned generator),
``llm_pattern``, ``retrieve``,
``scoring``, ``verify`` (the rule), ``llm_answer``, ``llm_verify``.

Timings are milliseconds per stage: ``link`` and ``generate`` (the learned generator), ``llm_pattern``, the retrieval's
``embed``, ``vector``, ``graph`` and its ``retrieve`` total, ``verbalize``, ``scoring`` and its parts (``scoring_*``),
``llm_answer`` / ``llm_verify``, and ``total``. A stage's time leaves out the time the caller of a stream holds an
event.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar, Union

from engine._config import DEFAULT_MAX_QUESTION_CHARS, MatchSettings, VerifySettings
from engine._errors import ConfigError, IsoragError, PatternError
from engine._timing import ms
from engine.answering.results import (
    NOT_ENOUGH_INFO,
    REFUTED,
    SUPPORTED,
    Answer,
    PatternEvent,
    ScoredEvent,
    SubgraphsEvent,
    TokenEvent,
    Verdict,
)
from engine.answering.verification import judge_claim
from engine.llm import LLM, NO_LLM_HELP, LLMStats
from engine.retrieval.pattern import Pattern, PatternLike
from engine.answering.prompting import parse_verdict, pattern_exchange, render_answer_prompt, render_verify_prompt
from engine.retrieval.results import RetrievalResult, Subgraph
from engine.retrieval.retriever import as_pattern
from engine.retrieval.verbalize import verbalize_subgraphs

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import Deferred
    from engine.learned.generator import PatternGenerator, Proposal
    from engine.retrieval.retriever import Retriever
    from engine.scoring.service import ScoringResult, ScoringService

__all__ = ["Call", "Complete", "Emit", "Flow", "Generate", "Pipeline", "Request", "Run", "SCORED_HEADER", "TEXT_TIE",
           "Result"]

#: without an LLM, the answer text names the answers whose GSD is within this of the best one (the others stay in
#: ``Answer.answers`` with their GSD): an entity bound in a worse subgraph is a worse answer, not another answer
TEXT_TIE = 0.02

#: a learned pattern's best subgraph at most this far (GSD) matches it exactly: its relation path is in the KG
EXACT_GSD = 1e-3
#: a pattern tried from a learned beam: (its place in the beam, the pattern, its probability, what it retrieved)
_Tried = tuple[int, Pattern, float | None, RetrievalResult]

#: heads the scored triples in the evidence the LLM reads (QSRAG's confidence-annotated triples)
SCORED_HEADER = "scored triples (confidence from the triple scorer):"


# ---------------------------------------------------------------------------------------------------------
# Requests: the I/O a flow asks its driver for
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """Blocking work on the stores or the scorer, ``fn(*args)``; the driver sends back what it returns (the async
    drivers run it in a worker thread)."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Complete:
    """A whole completion of ``prompt`` by ``llm``; the driver sends back its text, the call counted in the run's
    usage."""

    llm: LLM
    prompt: str


@dataclass(frozen=True)
class Generate(Complete):
    """The answer's text: a :class:`Complete` that the streaming drivers stream, handing each piece to their
    caller as a :class:`~engine.answering.results.TokenEvent`; the driver sends back the whole text."""


@dataclass(frozen=True)
class Emit:
    """An event for the caller of a streaming driver (the other drivers pass over it); the driver sends back None."""

    event: PatternEvent | SubgraphsEvent | ScoredEvent | TokenEvent


Request = Union[Call, Complete, Generate, Emit]
#: what a flow returns: an Answer (ask) or a Verdict (verify)
Result = TypeVar("Result", Answer, Verdict)
Steps = Generator[Request, Any, Result]


# ---------------------------------------------------------------------------------------------------------
# One run: the result being filled and its bookkeeping
# ---------------------------------------------------------------------------------------------------------


def _triples(subgraphs: Sequence[Subgraph]) -> list[list[tuple[str, str, str]]]:
    return [[t.as_tuple() for t in sg.triples] for sg in subgraphs]


def _anchors(subgraphs: Sequence[Subgraph]) -> list[int]:
    """The KG entities of the matched subgraphs: the anchors of the scorer's neighbourhood."""
    return list(dict.fromkeys(e.eid for sg in subgraphs for e in sg.mapping.values()))


class Run:
    """State of one ask or verify: the result being filled, stage timings, the stage running, the LLM usage
    (``usage``, into which the drivers meter the LLM calls) and ``away``, the seconds the caller of a stream held
    its events (added by the streaming drivers, left out of the stage timings)."""

    def __init__(self, result: Answer | Verdict, raise_errors: bool) -> None:
        self.result = result
        self.raise_errors = raise_errors
        self.started = time.perf_counter()
        self.stage_name: str | None = None
        self.usage = LLMStats()
        self.away = 0.0

    def clock(self) -> float:
        return time.perf_counter() - self.away

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a stage; an error inside it names the stage."""
        self.stage_name = name
        t0 = self.clock()
        try:
            yield
        finally:
            self.result.timings[name] = ms(self.clock() - t0)
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

    def finish(self) -> Answer | Verdict:
        self.result.timings["total"] = ms(time.perf_counter() - self.started)
        usage = self.usage.snapshot()
        usage["seconds"] = round(usage["seconds"], 4)
        self.result.usage = usage
        return self.result

    # -- what the stages add to the result ----------------------------------------------------------------

    def check_text(self, text: str, limit: int, what: str) -> None:
        """A question or claim longer than ``limit`` characters fails the ``input`` stage (an InputError)."""
        from engine.learned.generator import check_text

        self.stage_name = "input"
        check_text(text, limit, what)
        self.stage_name = None

    def given_pattern(self, pattern: PatternLike | None) -> Pattern | None:
        if pattern is None:
            return None
        self.stage_name = "pattern"
        pat = as_pattern(pattern)
        self.stage_name = None
        return pat

    def set_pattern(self, pattern: Pattern, text: str | None) -> None:
        self.result.pattern = pattern
        self.result.pattern_text = text

    def set_retrieval(self, res: RetrievalResult) -> None:
        r = self.result
        r.retrieval = res
        r.subgraphs = list(res.subgraphs)
        stage_ms = r.timings.pop("retrieve", 0.0)  # re-added after its parts, so that they read in order
        for name in ("embed", "vector", "names", "graph"):
            if name in res.timings:
                r.timings[name] = res.timings[name]
        # the stage's wall time: it includes starting the stores and the embedder at first use
        r.timings["retrieve"] = max(stage_ms, res.timings.get("total", 0.0))
        r.warnings.extend(res.warnings)
        r.kg_version = res.kg_version
        r.unmatched = dict(res.unmatched)
        if isinstance(r, Answer):
            r.answers = list(res.answers)
        elif r.subgraphs:
            r.gsd = r.subgraphs[0].gsd
        t0 = time.perf_counter()
        r.evidence = verbalize_subgraphs(_triples(r.subgraphs))
        r.timings["verbalize"] = ms(time.perf_counter() - t0)

    def add_scored(self, sr: ScoringResult) -> bool:
        """Add the scorer's selected triples, with their confidences, to the evidence. True when there are any."""
        r = self.result
        assert isinstance(r, Answer)
        r.scored = sr
        for name, took in sr.timings.items():
            r.timings[f"scoring_{name}"] = took
        r.warnings.extend(sr.warnings)
        if sr.triples:
            scored = SCORED_HEADER + "\n" + sr.evidence()
            r.evidence = f"{r.evidence}\n{scored}" if r.evidence else scored
        return bool(sr.triples)

    def scorer_text(self) -> str:
        """The answer from the scored triples alone (no pattern matched, no LLM)."""
        from engine.scoring.service import answer_text

        r = self.result
        assert isinstance(r, Answer) and r.scored is not None  # the scoring stage ran (add_scored)
        r.answer_source = "scorer"
        r.scored_answers = list(r.scored.answers)
        r.warnings.append("answer extracted from the triple scorer's top triples (no pattern matched and no LLM)")
        return answer_text(r.scored)

    def cannot_answer(self, kg: str) -> str:
        """The answer when nobody may write the pattern (:func:`engine.learned.router.decide`): no entity named,
        but the reason, the last warning."""
        r = self.result
        assert isinstance(r, Answer)
        r.answer_source = "none"
        why = r.warnings[-1] if r.warnings else "no pattern"
        return f"Cannot answer this from KG {kg!r}: {why}."

    def default_text(self, kg: str) -> str:
        """The answer without an LLM (or without evidence to give one)."""
        r = self.result
        assert isinstance(r, Answer)
        r.answer_source = "pattern"
        if not r.subgraphs:
            r.warnings.append("no subgraph matches the pattern: nothing to answer from")
            return f"No subgraph of KG {kg!r} matches the pattern."
        if r.answers:
            best = r.answers[0].gsd
            names = [a.entity.name for a in r.answers if a.gsd <= best + TEXT_TIE]
            more = len(r.answers) - len(names)
            return ", ".join(names) + (f" (and {more} more at a larger GSD)" if more else "")
        return f"The KG has {len(r.subgraphs)} subgraph(s) matching the pattern (best GSD {r.subgraphs[0].gsd:.4f})."

    def set_rule_verdict(self, res: RetrievalResult, label: str, reason: str, relaxed: str | None) -> None:
        verify_ms = self.result.timings.pop("verify", 0.0)
        self.set_retrieval(res)
        v = self.result
        assert isinstance(v, Verdict)
        v.timings["verify"] = verify_ms
        v.method = "rule"
        v.label, v.reason, v.relaxed = label, reason, relaxed

    def set_llm_verdict(self, text: str) -> None:
        v = self.result
        assert isinstance(v, Verdict)
        v.text = text
        v.method = "llm"
        said = parse_verdict(text)
        if said is None:
            v.label = NOT_ENOUGH_INFO
            v.reason = "the LLM's answer says neither True nor False"
        else:
            v.label = SUPPORTED if said else REFUTED
            v.reason = " ".join(text.split())[:500]

    def set_no_evidence(self) -> None:
        v = self.result
        assert isinstance(v, Verdict)
        v.method = "llm"
        v.label = NOT_ENOUGH_INFO
        v.reason = "no subgraph of the KG matches the claim's pattern: no evidence to judge it by"


@dataclass
class Flow(Generic[Result]):
    """One ask or verify for a driver: ``steps`` yields the requests and returns the result; ``run`` is its
    bookkeeping."""

    run: Run
    steps: Steps[Result]


# ---------------------------------------------------------------------------------------------------------
# The pipeline
# ---------------------------------------------------------------------------------------------------------


class Pipeline:
    """Answers and verdicts from a KG's components, given to it (it never sees the Engine).

    Each component that starts something (a store connection, a model, a checkpoint) is a
    :class:`~engine._protocols.Deferred`: made at first use inside the stage that needs it, once per pipeline (a KG
    or a store that cannot be reached fails ``retrieve``, a checkpoint that does not fit fails ``scoring``):

    * ``retriever``: the KG's :class:`~engine.retrieval.retriever.Retriever`;
    * ``llm``: the :class:`~engine.llm.LLM`, or None (no LLM);
    * ``fewshot(kind)``: the few-shot examples of ``kind`` (``pattern``, ``claim``, ``answer``, ``verify``);
    * ``scorer``: the :class:`~engine.scoring.service.ScoringService`; ``scorer=None``: no triple scorer;
    * ``generator``: the KG's learned :class:`~engine.learned.generator.PatternGenerator`, or None when the KG has
      none; looked up only when a route may use it (not for ``route="llm"`` nor a given pattern).

    ``kg`` names the KG in answers, ``match`` and ``verify`` are the settings a call's overrides start from,
    ``route`` the default route (:mod:`engine.learned.router`).
    """

    def __init__(self, *, retriever: Deferred[Retriever], llm: Deferred[LLM | None],
                 fewshot: Callable[[str], list[dict[str, Any]]], scorer: Deferred[ScoringService] | None = None,
                 kg: str = "", match: MatchSettings | None = None, verify: VerifySettings | None = None,
                 generator: Deferred[PatternGenerator | None] | None = None, route: str = "auto",
                 max_question_chars: int = DEFAULT_MAX_QUESTION_CHARS) -> None:
        from engine.learned.router import check_route

        self._retriever = retriever
        self._generator = generator
        self.route = check_route(route)
        self.max_question_chars = max_question_chars
        self._llm = llm
        self._fewshot = fewshot
        self._scorer = scorer
        self.kg = kg
        self.match = match or MatchSettings()
        self.verify_settings = verify or VerifySettings()

    # -- the entry points: one flow each --------------------------------------------------------------------

    def ask(self, query: str, *, pattern: PatternLike | None = None, k: int | None = None, raise_errors: bool = True,
            route: str | None = None, **match: Any) -> Flow[Answer]:
        """The flow that answers ``query``. It emits a PatternEvent and a SubgraphsEvent when it has them, and one
        TokenEvent with the answer's text when that text does not come from the LLM (which a :class:`Generate`
        may stream)."""
        from engine.learned.router import check_route

        run = Run(Answer(query), raise_errors)
        return Flow(run, self._answer(run, pattern, k, check_route(route or self.route), match))

    def verify(self, claim: str, *, pattern: PatternLike | None = None, k: int | None = None,
               threshold: float | None = None, raise_errors: bool = True, route: str | None = None,
               **match: Any) -> Flow[Verdict]:
        """The flow that judges ``claim`` (``threshold`` overrides the rule's ``VerifySettings.threshold``)."""
        from engine.learned.router import check_route

        run = Run(Verdict(claim), raise_errors)
        vs = self.verify_settings if threshold is None else replace(self.verify_settings, threshold=threshold)
        return Flow(run, self._judge(run, pattern, k, check_route(route or self.route), vs, match))

    # -- the flows ------------------------------------------------------------------------------------------

    def _answer(self, run: Run, pattern: PatternLike | None, k: int | None, route: str,
                match: Mapping[str, Any]) -> Steps[Answer]:
        r = run.result
        assert isinstance(r, Answer)
        try:
            run.check_text(r.query, self.max_question_chars, "question")
            pat = run.given_pattern(pattern)
            text = None
            scorer = self._scorer is not None
            beam: list[tuple[Pattern, float]] | None = None
            if pat is not None:
                r.pattern_source = "given"
            else:
                writer, beam = yield from self._route(run, r.query, route, claim=False, scorer=scorer)
                if beam is not None and not beam and not scorer:
                    r.text = run.cannot_answer(self.kg)
                    yield Emit(TokenEvent(r.text))
                    run.finish()
                    return r
                if writer == "llm":
                    try:
                        with run.stage("llm_pattern"):  # the client starts at first use
                            pat, text = yield from self._pattern(run, r.query, "pattern")
                        r.pattern_source = "llm"
                    except PatternError as e:
                        if not scorer:
                            raise
                        r.warnings.append(f"no pattern from the LLM ({e}): the triple scorer retrieves instead")
            res = yield from self._retrieve_tries(run, pat, text, beam, k, match)
            matched = res is not None and bool(res.subgraphs)
            scored = False
            if scorer:
                anchors = _anchors(res.subgraphs) if matched and res is not None else None
                with run.stage("scoring"):
                    sr = yield Call(self._score, (r.query, anchors))
                scored = run.add_scored(sr)
                if scored:
                    yield Emit(ScoredEvent(sr))
            # a learned pattern is answered without the LLM (the router kept it to spare the LLM)
            llm = None if r.pattern_source == "learned" else self._llm.get()
            if llm is not None and (matched or scored):
                with run.stage("llm_answer"):
                    prompt = render_answer_prompt(r.query, r.evidence, self._fewshot("answer"))
                    r.text = yield Generate(llm, prompt)
                r.answer_source = "llm"
            else:
                r.text = run.scorer_text() if scorer and not matched else run.default_text(self.kg)
                if r.answer_source == "pattern" and r.pattern_source == "learned":
                    r.answer_source = "learned"
                yield Emit(TokenEvent(r.text))
        except IsoragError as e:
            run.fail(e)
        run.finish()
        return r

    def _retrieve_tries(self, run: Run, pat: Pattern | None, text: str | None,
                        beam: list[tuple[Pattern, float]] | None, k: int | None,
                        match: Mapping[str, Any]) -> Generator[Request, Any, RetrievalResult | None]:
        """Retrieve for the pattern, or for a learned beam pattern by pattern until one matches; None when there is
        no pattern to retrieve for (the scorer alone answers)."""
        r = run.result
        assert isinstance(r, Answer)
        tries: list[tuple[Pattern, float | None]] = list(beam or []) if pat is None else [(pat, None)]
        if not tries:
            return None
        exact = bool(beam)  # a learned beam's named nodes are KG names: its right pattern matches exactly
        chosen: _Tried | None = None
        found: _Tried | None = None
        first: _Tried | None = None
        last = 0
        with run.stage("retrieve"):  # (the time a streaming caller holds an event is not the stage's: Run.away)
            for last, (p_i, prob_i) in enumerate(tries):
                # said before its retrieval, so that a streaming caller shows the pattern while the match runs (a
                # learned beam pattern that does not answer is followed by the next one's event)
                yield Emit(PatternEvent(p_i, text))
                res_i = yield Call(self._retrieve, (p_i, k, match))
                here: _Tried = (last, p_i, prob_i, res_i)
                first = first or here
                if res_i.subgraphs:
                    found = found or here
                    if not exact or res_i.subgraphs[0].gsd <= EXACT_GSD:
                        chosen = here
                        break
            # the pattern that answers: the first that matches (exactly, for a learned beam), else the first that
            # matches at all, else the first; said again when it was not the last one said
            assert first is not None
            n, pat, prob, res = chosen or found or first
            if n != last:
                yield Emit(PatternEvent(pat, text))
        if beam:
            r.pattern_probability = prob
            if n:
                r.warnings.append(f"the learned beam's first {n} pattern(s) matched nothing exactly: pattern {n + 1} "
                                  f"(probability {prob:.3f}) answers")
        run.set_pattern(pat, text)
        run.set_retrieval(res)
        yield Emit(SubgraphsEvent(r.subgraphs, r.evidence, res))
        return res

    def _route(self, run: Run, text: str, route: str, claim: bool, scorer: bool = False
               ) -> Generator[Request, Any, tuple[str, list[tuple[Pattern, float]] | None]]:
        """Who writes the pattern of ``text`` (:func:`engine.learned.router.plan`) and, when the router keeps the
        learned generator's, its beam: ``("learned", beam)``, or ``("learned", [])`` when nobody should (no entity
        named, no template fits, or unsure without an LLM; the last warning says why:
        :func:`engine.learned.router.decide`); ``("llm", None)`` or ``("scorer", None)`` otherwise. The generator is
        looked up only when the route may use it."""
        from engine.learned.router import LEARNED, LLM, decide, plan

        r = run.result
        gen = None
        load_ms = 0.0
        if route != "llm" and self._generator is not None:
            with run.stage("generate"):  # the generator's file is looked up, and loaded at first use
                gen = yield Call(self._generator.get)
            load_ms = r.timings.pop("generate")
        llm = self._llm.get() if route != "learned" else None
        writer = plan(route, generator=gen is not None, llm=llm is not None, scorer=scorer)
        if writer != "learned":
            return writer, None
        with run.stage("generate"):
            prop, threshold, note = yield Call(self._propose, (gen, text, claim))
        # disjoint stages, in the order they ran: the generate stage's clock also ran over the linking
        stage = r.timings.pop("generate") + load_ms
        r.timings["link"] = prop.timings["link"]
        r.timings["generate"] = round(max(stage - prop.timings["link"], 0.0), 3)
        r.proposal = prop
        r.warnings.extend(prop.warnings)
        has_llm = route != "learned" and llm is not None
        # a claim's probability is not calibrated: without an LLM its learned pattern is judged by the rule
        who, why = decide(route if not claim or has_llm else "learned", prop, threshold, has_llm, note)
        if who == LLM:
            r.warnings.append(f"{why}: the LLM writes the pattern")
            return "llm", None
        if who != LEARNED:
            if why and why not in r.warnings:
                r.warnings.append(why)
            return "learned", []
        r.pattern_source = "learned"
        r.pattern_probability = prop.probability
        return "learned", prop.beam

    def _judge(self, run: Run, pattern: PatternLike | None, k: int | None, route: str, vs: VerifySettings,
               match: Mapping[str, Any]) -> Steps[Verdict]:
        v = run.result
        assert isinstance(v, Verdict)
        try:
            run.check_text(v.claim, self.max_question_chars, "claim")
            pat = run.given_pattern(pattern)
            text = None
            if pat is not None:
                v.pattern_source = "given"
            else:
                _, beam = yield from self._route(run, v.claim, route, claim=True)
                if beam is not None and not beam:
                    v.label = NOT_ENOUGH_INFO
                    v.reason = "no pattern for the claim: " + "; ".join(v.warnings[-1:])
                    run.finish()
                    return v
                if beam:
                    pat = beam[0][0]
                else:
                    with run.stage("llm_pattern"):  # the client starts at first use
                        pat, text = yield from self._pattern(run, v.claim, "claim", claim=True)
                    v.pattern_source = "llm"
            run.set_pattern(pat, text)
            llm = None if v.pattern_source == "learned" else self._llm.get()
            if llm is None:
                with run.stage("verify"):
                    res, label, reason, relaxed = yield Call(self._rule, (pat, k, self._settings(match), vs))
                run.set_rule_verdict(res, label, reason, relaxed)
            else:
                with run.stage("retrieve"):
                    res = yield Call(self._retrieve, (pat, k, match))
                run.set_retrieval(res)
                if res.subgraphs:
                    with run.stage("llm_verify"):
                        prompt = render_verify_prompt(v.claim, v.evidence, self._fewshot("verify"))
                        answer = yield Complete(llm, prompt)
                    run.set_llm_verdict(answer)
                else:
                    run.set_no_evidence()
        except IsoragError as e:
            run.fail(e)
        run.finish()
        return v

    # -- the stages' parts ----------------------------------------------------------------------------------

    def _pattern(self, run: Run, text: str, kind: str, claim: bool = False) -> Generator[Request, Any,
                                                                                           tuple[Pattern, str]]:
        """The LLM's pattern of ``text`` (:func:`~engine.answering.prompting.pattern_exchange`, one Complete per
        prompt)."""
        llm = self._llm.get()
        if llm is None:
            run.stage_name = "pattern"
            raise ConfigError(NO_LLM_HELP)
        exchange = pattern_exchange(text, self._fewshot(kind), claim=claim)
        prompt = next(exchange)
        while True:
            reply = yield Complete(llm, prompt)
            try:
                prompt = exchange.send(reply)
            except StopIteration as done:
                return done.value

    def _settings(self, match: Mapping[str, Any]) -> MatchSettings:
        return replace(self.match, **match) if match else self.match

    def _retrieve(self, pattern: Pattern, k: int | None, match: Mapping[str, Any]) -> RetrievalResult:
        return self._retriever.get().retrieve(pattern, k=k, settings=self._settings(match))

    def _rule(self, pattern: Pattern, k: int | None, settings: MatchSettings,
              vs: VerifySettings) -> tuple[RetrievalResult, str, str, str | None]:
        return judge_claim(self._retriever.get(), pattern, k=k, settings=settings, verify=vs)

    @staticmethod
    def _propose(gen: PatternGenerator, text: str, claim: bool) -> tuple[Proposal, float, str]:
        return (gen.propose_claim(text) if claim else gen.propose(text)), gen.threshold, gen.threshold_note()

    def _score(self, query: str, anchors: list[int] | None) -> ScoringResult:
        assert self._scorer is not None
        return self._scorer.get().score(query, anchors)
