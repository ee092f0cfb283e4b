"""Errors as ``application/problem+json`` (RFC 9457): the engine's error type, where it arose, and a message that
never carries a secret (every :class:`~engine._errors.IsoragError` message is scrubbed when it is made)."""

from __future__ import annotations

import json
from typing import Any

from engine._errors import (
    CheckpointError,
    ConfigError,
    DeadlineExceeded,
    InputError,
    IsoragError,
    KGLockedError,
    KGNotFoundError,
    LLMError,
    StoreError,
    StoreUnavailableError,
)
from engine._secrets import scrub

__all__ = ["PROBLEM_JSON", "EID_FIELDS", "Problem", "eids_as_text", "problem_body", "status_of"]

PROBLEM_JSON = "application/problem+json"

#: most specific first
_STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (KGNotFoundError, 404),
    (KGLockedError, 409),
    (StoreUnavailableError, 503),
    (StoreError, 502),
    (DeadlineExceeded, 504),
    (LLMError, 502),
    (CheckpointError, 500),
    (InputError, 422),
    (ConfigError, 400),
)

_TITLES = {400: "Bad request", 401: "Unauthorized", 403: "Forbidden", 404: "Not found", 408: "Request timeout",
           409: "Conflict", 413: "Content too large", 415: "Unsupported media type", 422: "Unprocessable content",
           500: "Internal error", 502: "Bad gateway", 503: "Service unavailable", 504: "Gateway timeout"}


class Problem(Exception):
    """A refusal of the service itself (auth, limits, routing): status, error type, message, where."""

    def __init__(self, status: int, error_type: str, detail: str, where: str = "", **extra: Any) -> None:
        super().__init__(detail)
        self.status, self.error_type, self.detail, self.where, self.extra = status, error_type, detail, where, extra


#: fields holding entity ids: 64-bit integers, which JavaScript's numbers cannot hold exactly, so the API sends them
#: as decimal strings (the explorer, and any browser client, would otherwise round them)
EID_FIELDS = frozenset({"eid", "head_eid", "tail_eid"})


def eids_as_text(value: Any) -> Any:
    """``value`` with every int under an :data:`EID_FIELDS` key (at any depth) as a decimal string."""
    if isinstance(value, dict):
        return {k: (str(v) if k in EID_FIELDS and isinstance(v, int) and not isinstance(v, bool) else eids_as_text(v))
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [eids_as_text(v) for v in value]
    return value


def status_of(e: BaseException) -> int:
    for cls, status in _STATUS:
        if isinstance(e, cls):
            return status
    return 500 if not isinstance(e, IsoragError) else 400


def problem_body(status: int, error_type: str, detail: str, where: str = "", instance: str = "",
                 **extra: Any) -> bytes:
    """The JSON of a problem: ``type`` (``urn:isorag:error:<ErrorType>``), ``title``, ``status``, ``detail``,
    ``error_type``, ``where`` (the route and, for a failed stage, the stage) and ``instance`` (the path)."""
    body = {"type": f"urn:isorag:error:{error_type}", "title": _TITLES.get(status, "Error"), "status": status,
            "detail": scrub(detail), "error_type": error_type, "where": where, "instance": instance, **extra}
    return json.dumps(body, ensure_ascii=False).encode("utf-8")
