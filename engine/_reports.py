"""What the reports of the engine's commands share, and the one log of skipped input.

:class:`Report` is the base of the reports a load, a sync, a change set and a check return
(:class:`loaders.bulk.LoadSummary`, :class:`engine.changes.sync.SyncReport`, :class:`engine.changes.apply.ApplyReport`,
:class:`engine.changes.check.CheckReport`): a dataclass that is a dict for JSON (:meth:`Report.to_dict`) and lines
for people (:meth:`Report.lines`), and, for the reports of commands that read input, the count of what was skipped,
by reason, with the first few examples.

:class:`SkipLog` is what a reader calls with each line (or operation) it cannot use (its ``on_skip``): it counts them
by reason (the reason's text before its first ``:``, such as ``wrong field count``) and keeps the first ``keep``; with
``strict`` it raises the first instead, and given a report (``into``) it counts into it as it goes.

This module is in the lowest layer: it imports nothing of the engine but its errors.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

from engine._errors import MalformedInputError

__all__ = ["Report", "SkipLog", "reason_kind"]


def reason_kind(reason: str) -> str:
    """The kind of a skip reason: its text before the first ``:``, at most 80 characters."""
    return reason.split(":", 1)[0].strip()[:80]


class Report:
    """Base of the commands' reports (dataclasses). Subclasses say which field counts skipped input
    (:attr:`SKIP_COUNT`, with ``skip_reasons`` and ``skip_examples`` beside it) and how many examples they keep."""

    #: the field that counts skipped input; None: the report counts none
    SKIP_COUNT: ClassVar[str | None] = None
    #: skipped lines (or operations) kept as examples, ``file:line: reason``
    KEEP_SKIPPED: ClassVar[int] = 10
    # the fields beside SKIP_COUNT in the reports that have one (declared by each such dataclass)
    skip_reasons: dict[str, int]
    skip_examples: list[str]

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready values (``--json``)."""
        return dataclasses.asdict(self)  # type: ignore[call-overload]  # every subclass is a dataclass

    def lines(self) -> list[str]:
        """The report as lines of text (what the CLI prints)."""
        raise NotImplementedError

    def add_skip(self, kind: str, example: str | None = None) -> None:
        """Count one skipped line of ``kind``; ``example`` (``file:line: reason``) is kept while there is room."""
        assert self.SKIP_COUNT is not None, f"{type(self).__name__} counts no skipped input"
        setattr(self, self.SKIP_COUNT, getattr(self, self.SKIP_COUNT) + 1)
        self.skip_reasons[kind] = self.skip_reasons.get(kind, 0) + 1
        if example is not None and len(self.skip_examples) < self.KEEP_SKIPPED:
            self.skip_examples.append(example)

    def add_skips(self, log: SkipLog) -> None:
        """Count what another log skipped (before its input reached this report's command: a reader's)."""
        assert self.SKIP_COUNT is not None, f"{type(self).__name__} counts no skipped input"
        setattr(self, self.SKIP_COUNT, getattr(self, self.SKIP_COUNT) + log.count)
        for kind, n in log.by_reason.items():
            self.skip_reasons[kind] = self.skip_reasons.get(kind, 0) + n
        self.skip_examples.extend(log.messages[:max(self.KEEP_SKIPPED - len(self.skip_examples), 0)])

    def skip_lines(self, indent: str = "    ") -> list[str]:
        """The skipped input as lines: ``n x reason`` by kind, most first, then ``e.g. file:line: reason``."""
        if self.SKIP_COUNT is None:
            return []
        reasons = sorted(self.skip_reasons.items(), key=lambda kv: -kv[1])
        return [f"{indent}{n:,} x {reason}" for reason, n in reasons] + [f"{indent}e.g. {ex}"
                                                                           for ex in self.skip_examples]


class SkipLog:
    """An ``on_skip`` collector: counts skipped lines by reason and keeps the first ``keep`` errors.

    ``strict``: raise the first instead. ``echo``: told ``skipped <file:line: reason>`` of each one kept.
    ``into``: a :class:`Report` that counts each one too, as it comes (so that a report is right even when a
    reader stops half-way).
    """

    def __init__(self, keep: int = 20, *, strict: bool = False, echo: Callable[[str], None] | None = None,
                 into: Report | None = None) -> None:
        self.keep, self.strict, self.echo, self.into = keep, strict, echo, into
        self.count = 0
        self.by_reason: collections.Counter[str] = collections.Counter()
        self.errors: list[MalformedInputError] = []

    def __call__(self, err: MalformedInputError) -> None:
        if self.strict:
            raise err
        self.count += 1
        kind = reason_kind(err.reason)
        self.by_reason[kind] += 1
        kept = len(self.errors) < self.keep
        if kept:
            self.errors.append(err)
            if self.echo:
                self.echo(f"skipped {err}")
        if self.into is not None:
            self.into.add_skip(kind, str(err) if kept else None)

    def reject(self, path: str, line: int, reason: str) -> None:
        """Skip (or, strict, raise) what a reader found wrong itself: ``path:line: reason``."""
        self(MalformedInputError(path, line, reason))

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0

    @property
    def messages(self) -> list[str]:
        """``file:line: reason`` of the first ``keep`` skipped lines."""
        return [str(e) for e in self.errors]

    def summary(self) -> str:
        if not self.count:
            return "no lines skipped"
        kinds = ", ".join(f"{kind}: {n}" for kind, n in self.by_reason.most_common())
        more = self.count - len(self.errors)
        lines = [f"{self.count} lines skipped ({kinds})", *("  " + m for m in self.messages)]
        if more > 0:
            lines.append(f"  ... and {more} more")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"SkipLog(count={self.count}, by_reason={dict(self.by_reason)})"
