"""Server-sent events of a streamed ask, in pipeline order: ``pattern``, ``subgraphs``, ``scored`` (with a triple
scorer), ``token`` (the answer's text as the LLM sends it), then ``answer`` (the whole answer with its timings and
KG version). A failed stage is said by an ``error`` event (a problem, as the other routes send it) just before the
``answer`` event that reports it."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MEDIA_TYPE", "event"]

MEDIA_TYPE = "text/event-stream"


def event(kind: str, data: Any, seq: int) -> bytes:
    """One event: ``id``, ``event`` and one ``data`` line of JSON (JSON has no raw line break to split)."""
    text = json.dumps(data, ensure_ascii=False, default=str)
    return f"id: {seq}\nevent: {kind}\ndata: {text}\n\n".encode("utf-8")
