"""The router: who writes a question's pattern, the learned generator or the LLM.

* ``route="learned"``: the generator, always (no generator: a ConfigError);
* ``route="llm"``: the LLM, always (as before the generator existed);
* ``route="auto"`` (the default): the generator when there is no LLM; with an LLM, the generator's pattern when its
  probability is at least the generator's calibrated threshold (:func:`engine.learned.train.calibrate`), else the
  LLM's. Without a generator, the LLM.

Without a generator and an LLM, a question goes to the triple scorer when one is configured (it retrieves from the
entities linked from the question), and is refused otherwise. :func:`plan` is that decision, made in one place: the
answering pipeline follows it, and ``Engine.pattern_route`` asks it before any server starts.

A learned pattern is answered without any LLM call: the answers are the entities bound to its unknown target.
"""

from __future__ import annotations

from typing import Any

from engine._errors import ConfigError
from engine.llm.config import NO_LLM_HELP

__all__ = ["NO_GENERATOR_HELP", "NO_PATTERN_HELP", "ROUTES", "check_route", "keeps_learned", "plan"]

ROUTES = ("auto", "llm", "learned")
NO_GENERATOR_HELP = ("no pattern generator for this KG: train one with `isorag train-generator --kg KG --qa FILE` "
                     "(or Engine.train_generator), set ISORAG_GENERATOR to its file, or pass a pattern")
#: a text needs a pattern, and the KG has no generator and there is no LLM to write it
NO_PATTERN_HELP = (f"{NO_LLM_HELP}; or train this KG's pattern generator (isorag train-generator, or "
                   "Engine.train_generator)")


def check_route(route: Any) -> str:
    if route not in ROUTES:
        raise ConfigError(f"route must be one of {', '.join(ROUTES)}, got {route!r}")
    return str(route)


def keeps_learned(route: str, probability: float, threshold: float, has_llm: bool) -> bool:
    """Whether the learned pattern is used: forced, no LLM to ask instead, or sure enough."""
    return route == "learned" or not has_llm or probability >= threshold


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
