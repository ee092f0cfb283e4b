"""The router: who writes a question's pattern, the learned generator or the LLM, and when nobody
should.

* ``route="learned"``: the generator, always (no generator: a ConfigError); when it has no pattern (no entity
  named, no template fits the topic) the question is not answered, and the answer says why;
* ``route="llm"``: the LLM, always (as before the generator existed);
* ``route="auto"`` (the default): the generator's pattern when its probability reaches the generator's calibrated
  threshold (:func:`engine.learned.train.calibrate`); else the LLM's when an LLM is configured; else no answer, and
  the answer says why (the probability, the threshold and what it was calibrated to), instead of naming an entity
  the pattern is likely wrong about. Without a generator, the LLM.

Without a generator and an LLM, a question goes to the triple scorer when one is configured (it retrieves from the
entities linked from the question), and is refused otherwise. :func:`plan` is that decision, made in one place: the
answering pipeline follows it, and ``Engine.pattern_route`` asks it before any server starts.

A learned pattern is answered without any LLM call: the answers are the entities bound to its unknown target.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine._errors import ConfigError
from engine.llm.config import NO_LLM_HELP

if TYPE_CHECKING:  # pragma: no cover
    from engine.learned.generator import Proposal

__all__ = ["LEARNED", "LLM", "NO_GENERATOR_HELP", "NO_PATTERN_HELP", "REFUSE", "ROUTES", "check_route", "decide",
           "keeps_learned", "plan"]

ROUTES = ("auto", "llm", "learned")
NO_GENERATOR_HELP = ("no pattern generator for this KG: train one with `isorag train-generator --kg KG --qa FILE` "
                     "(or Engine.train_generator), set ISORAG_GENERATOR to its file, or pass a pattern")
#: what :func:`decide` says
LEARNED, LLM, REFUSE = "learned", "llm", "refuse"
#: a text needs a pattern, and the KG has no generator and there is no LLM to write it
NO_PATTERN_HELP = (f"{NO_LLM_HELP}; or train this KG's pattern generator (isorag train-generator, or "
                   "Engine.train_generator)")


def check_route(route: Any) -> str:
    if route not in ROUTES:
        raise ConfigError(f"route must be one of {', '.join(ROUTES)}, got {route!r}")
    return str(route)


def keeps_learned(route: str, probability: float, threshold: float) -> bool:
    """Whether the learned pattern is sure enough for ``route`` (forced, or at least the threshold). With or
    without an LLM: without one, a pattern under the threshold is not answered either (:func:`decide`)."""
    return route == "learned" or probability >= threshold and probability > 0


def decide(route: str, proposal: Proposal, threshold: float, has_llm: bool, note: str = "") -> tuple[str, str | None]:
    """``(LEARNED | LLM | REFUSE, why)``: who writes the pattern of a question the generator made ``proposal``
    for, and when it is not the generator, why (``note``: what the threshold was calibrated to)."""
    if not proposal.beam:
        why = proposal.why or "the pattern generator has no pattern for it"
        return (LLM, why) if has_llm and route != "learned" else (REFUSE, why)
    if keeps_learned(route, proposal.probability, threshold):
        return LEARNED, None
    why = (f"the learned pattern's probability {proposal.probability:.3f} is under the router's threshold "
           f"{threshold:.3f}" + (f" ({note})" if note else ""))
    return (LLM, why) if has_llm else (REFUSE, why + ", and no LLM is configured to write a pattern")


def plan(route: str, *, generator: bool, llm: bool, scorer: bool = False) -> str:
    """Who first tries to write the pattern of a text given without one, under ``route``: ``"learned"`` (the
    generator: under ``auto`` the LLM may still write it when the learned pattern is unsure), ``"llm"``, or
    ``"scorer"`` (no pattern: the triple scorer retrieves from the entities linked from the text). ``generator``,
    ``llm``, ``scorer``: whether each is there. A route nothing can follow is a ConfigError."""
    route = check_route(route)
    if route == "learned" or (route == "auto" and generator):
        if not generator:
            raise ConfigError(NO_GENERATOR_HELP)
        return "learned"
    if llm:
        return "llm"
    if scorer:
        return "scorer"
    raise ConfigError(NO_LLM_HELP if route == "llm" else NO_PATTERN_HELP)
