"""A stand-in verifier for the job tests: ``World.verify`` answers as ``Engine.verify`` would, with the outcome the
test set for each claim, and is "killed" after a budget of calls."""

from __future__ import annotations

import threading
from typing import Any

from engine.answering import LABELS, Verdict
from engine.jobs import FAILED

__all__ = ["OUTCOMES", "Killed", "World", "label_of"]

OUTCOMES = (*LABELS, FAILED)


class Killed(BaseException):
    """What a kill of the job looks like to it: not an Exception, so no claim's error handler takes it."""


class World:
    """Answers ``verify`` with the outcome the test set for the claim; raises Killed after ``budget`` calls."""

    def __init__(self) -> None:
        self.outcome: dict[str, str] = {}
        self.budget: int | None = None
        self.lock = threading.Lock()

    def verify(self, claim: str, *, pattern: Any = None, raise_errors: bool = False, **_: Any) -> Verdict:
        with self.lock:
            if self.budget is not None:
                if self.budget == 0:
                    raise Killed()
                self.budget -= 1
            outcome = self.outcome[claim]
        if outcome == FAILED:
            return Verdict(claim, reason="verification failed: the store is down", failed_stage="retrieval",
                           error="down", error_type="StoreUnavailableError")
        return Verdict(claim, label=outcome, reason="as the world says")


def label_of(rec: dict[str, Any]) -> str:
    return FAILED if rec.get("failed_stage") else str(rec["label"])
