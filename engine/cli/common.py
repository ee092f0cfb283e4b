"""What every command shares: the exit statuses, the one rule a command's status follows, and the engine a command
runs on.

The rule: a command returns :data:`EXIT_OK` when it did its work and the result is clean, :data:`EXIT_NOT_CLEAN`
when it did its work but the result is not clean (stores that disagree, malformed rows, failed claims, a server
that is not running): :func:`done` says which. Anything refused raises a typed error
(:class:`~engine._errors.IsoragError`), which :func:`engine.cli.main` turns into one line and :data:`EXIT_ERROR`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pragma: no cover
    from engine._engine import Engine

__all__ = ["EXIT_ERROR", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_NOT_CLEAN", "EXIT_OK", "EXIT_PIPE", "Command",
           "done", "open_engine"]

EXIT_OK, EXIT_NOT_CLEAN, EXIT_ERROR, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_PIPE = 0, 1, 2, 70, 130, 141

#: a command: its parsed arguments in, its exit status out (:func:`done`)
Command = Callable[[argparse.Namespace], int]


def done(clean: bool = True) -> int:
    """The status of a command that did its work: :data:`EXIT_OK` when the result is clean, else
    :data:`EXIT_NOT_CLEAN`."""
    return EXIT_OK if clean else EXIT_NOT_CLEAN


def open_engine(args: argparse.Namespace, **match: Any) -> Engine:
    """The engine of a command: its configuration is checked here, its stores and model start at first use.
    ``match`` overrides :class:`~engine._config.MatchSettings` fields (None: the configured value)."""
    from dataclasses import replace

    from engine._config import EngineConfig
    from engine._engine import Engine

    cfg = EngineConfig.from_env(kg=getattr(args, "kg", None))
    if match:
        cfg = cfg.with_(match=replace(cfg.match, **{k: v for k, v in match.items() if v is not None}))
    if getattr(args, "fewshot", None):
        cfg = cfg.with_(fewshot=args.fewshot)
    if getattr(args, "threshold", None) is not None:
        cfg = cfg.with_(verify=replace(cfg.verify, threshold=args.threshold))
    return Engine(cfg, llm=False if getattr(args, "no_llm", False) else None)
