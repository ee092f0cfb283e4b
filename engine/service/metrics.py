"""``/metrics`` in Prometheus' text format: request and per-stage latency histograms, errors by type, cache hits.

Each worker process counts in its own :class:`Metrics` and writes a snapshot to ``<state>/metrics/<pid>.json``
(every :data:`FLUSH_S` seconds and whenever it serves ``/metrics``); ``/metrics`` adds up the snapshots of the
workers that are alive, so a scrape sees the whole server whichever worker answers it (a worker's last
:data:`FLUSH_S` seconds may be missing). Histograms share fixed buckets, so they add up exactly.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["BUCKETS", "Metrics", "render"]

#: seconds: from a cache hit to a slow LLM answer
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
FLUSH_S = 2.0

_HELP = {
    "isorag_requests_total": ("counter", "HTTP requests answered, by route and status"),
    "isorag_request_seconds": ("histogram", "time to answer an HTTP request (to its first byte when streamed)"),
    "isorag_stage_seconds": ("histogram", "time of each stage of an ask, retrieve or verify (engine timings)"),
    "isorag_errors_total": ("counter", "errors answered as problems, by the engine's error type and status"),
    "isorag_engine_cache_total": ("counter", "engines asked of the per-process pool: found (hit) or made (miss)"),
    "isorag_text_cache_total": ("counter", "pattern texts embedded (miss) or found in the engine's cache (hit)"),
    "isorag_first_event_seconds": ("histogram", "time to the first server-sent event of a streamed ask"),
}


def _key(labels: Mapping[str, str]) -> str:
    return json.dumps(sorted(labels.items()))


class Metrics:
    """Counters and histograms of one process (thread-safe)."""

    def __init__(self, state_dir: Path | None = None) -> None:
        self._lock = threading.Lock()
        self.counters: dict[str, dict[str, float]] = {}
        self.hists: dict[str, dict[str, list[float]]] = {}  # per labels: bucket counts..., +Inf count, sum
        self.gauges: dict[str, dict[str, float]] = {}  # counters read from elsewhere (set, not added)
        self.dir = state_dir / "metrics" if state_dir is not None else None
        self._flushed = 0.0
        self._flush_lock = threading.Lock()

    def inc(self, name: str, labels: Mapping[str, str], value: float = 1.0) -> None:
        with self._lock:
            series = self.counters.setdefault(name, {})
            k = _key(labels)
            series[k] = series.get(k, 0.0) + value

    def set_total(self, name: str, labels: Mapping[str, str], value: float) -> None:
        with self._lock:
            self.gauges.setdefault(name, {})[_key(labels)] = float(value)

    def observe(self, name: str, labels: Mapping[str, str], seconds: float) -> None:
        with self._lock:
            h = self.hists.setdefault(name, {}).setdefault(_key(labels), [0.0] * (len(BUCKETS) + 2))
            for i, b in enumerate(BUCKETS):
                if seconds <= b:
                    h[i] += 1
            h[len(BUCKETS)] += 1
            h[len(BUCKETS) + 1] += seconds

    def stages(self, route: str, timings: Mapping[str, float]) -> None:
        """A result's ``timings`` (milliseconds per stage) into ``isorag_stage_seconds``."""
        for stage, ms in timings.items():
            if isinstance(ms, (int, float)):
                self.observe("isorag_stage_seconds", {"route": route, "stage": stage}, ms / 1000.0)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            counters = {n: dict(s) for n, s in self.counters.items()}
            for n, s in self.gauges.items():
                counters.setdefault(n, {}).update(s)
            hists = {n: {k: list(v) for k, v in s.items()} for n, s in self.hists.items()}
            return {"counters": counters, "hists": hists}

    def flush(self, force: bool = False) -> None:
        """Write this process' snapshot for the other workers (at most every FLUSH_S s unless ``force``)."""
        now = time.monotonic()
        if self.dir is None or not force and now - self._flushed < FLUSH_S:
            return
        with self._flush_lock:  # the event loop's thread and a scrape's may flush at once
            self._flushed = now
            self.dir.mkdir(parents=True, exist_ok=True)
            tmp = self.dir / f".{os.getpid()}.tmp"
            tmp.write_text(json.dumps(self.snapshot()))
            os.replace(tmp, self.dir / f"{os.getpid()}.json")

    def gather(self) -> list[dict[str, Any]]:
        """The snapshots of every live worker (this one's taken now); files of dead workers are removed."""
        self.flush(force=True)
        if self.dir is None:
            return [self.snapshot()]
        out = []
        for f in self.dir.glob("*.json"):
            try:
                pid = int(f.stem)
                os.kill(pid, 0)
            except (ValueError, ProcessLookupError):
                f.unlink(missing_ok=True)
                continue
            except PermissionError:
                pass  # alive, another user's
            try:
                out.append(json.loads(f.read_text()))
            except (OSError, ValueError):
                continue  # being replaced: the next scrape has it
        return out


Counters = dict[str, dict[str, float]]
Hists = dict[str, dict[str, list[float]]]


def _merge(snapshots: Iterable[dict[str, Any]]) -> tuple[Counters, Hists]:
    counters: dict[str, dict[str, float]] = {}
    hists: dict[str, dict[str, list[float]]] = {}
    for snap in snapshots:
        for name, series in snap.get("counters", {}).items():
            into = counters.setdefault(name, {})
            for k, v in series.items():
                into[k] = into.get(k, 0.0) + v
        for name, series in snap.get("hists", {}).items():
            into_h = hists.setdefault(name, {})
            for k, v in series.items():
                have = into_h.setdefault(k, [0.0] * len(v))
                into_h[k] = [a + b for a, b in zip(have, v)]
    return counters, hists


def _labels(k: str, extra: Mapping[str, str] | None = None) -> str:
    pairs = list(json.loads(k)) + list((extra or {}).items())
    if not pairs:
        return ""
    esc = [(n, str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")) for n, v in pairs]
    return "{" + ",".join(f'{n}="{v}"' for n, v in esc) + "}"


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def render(snapshots: Iterable[dict[str, Any]]) -> str:
    """The Prometheus text exposition (format 0.0.4) of the merged snapshots."""
    counters, hists = _merge(snapshots)
    lines: list[str] = []
    for name, (kind, help_text) in _HELP.items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        if kind == "counter":
            for k, v in sorted(counters.get(name, {}).items()):
                lines.append(f"{name}{_labels(k)} {_num(v)}")
            continue
        for k, h in sorted(hists.get(name, {}).items()):
            for i, b in enumerate(BUCKETS):
                lines.append(f"{name}_bucket{_labels(k, {'le': repr(b)})} {_num(h[i])}")
            lines.append(f"{name}_bucket{_labels(k, {'le': '+Inf'})} {_num(h[len(BUCKETS)])}")
            lines.append(f"{name}_sum{_labels(k)} {repr(h[len(BUCKETS) + 1])}")
            lines.append(f"{name}_count{_labels(k)} {_num(h[len(BUCKETS)])}")
    return "\n".join(lines) + "\n"
