"""The router: who writes a question's pattern, the learned generator or the LLM (DESIGN §13).

* ``route="learned"``: the generator, always (no generator: a ConfigError);
* ``route="llm"``: the LLM, always (as before the generator existed);
* ``route="auto"`` (the default): the generator when there is no LLM; with an LLM, the generator's pattern when its
  probability is at least the generator's calibrated threshold (:func:`engine.learned.train.calibrate`), else the
  LLM's. Without a generator, the LLM.

A learned pattern is answered without any LLM call: the answers are the entities bound to its unknown target.
"""

from __future__ import annotations

from typing import Any

from engine._errors import ConfigError

__all__ = ["NO_GENERATOR_HELP", "ROUTES", "check_route", "keeps_learned"]

ROUTES = ("auto", "llm", "learned")
NO_GENERATOR_HELP = ("no pattern generator for this KG: train one with `isorag train-generator --kg KG --qa FILE` "
                     "(or Engine.train_generator), set ISORAG_GENERATOR to its file, or pass a pattern")


def check_route(route: Any) -> str:
    if route not in ROUTES:
        raise ConfigError(f"route must be one of {', '.join(ROUTES)}, got {route!r}")
    return str(route)


def keeps_learned(route: str, probability: float, threshold: float, has_llm: bool) -> bool:
    """Whether the learned pattern is used: forced, no LLM to ask instead, or sure enough."""
    return route == "learned" or not has_llm or probability >= threshold
