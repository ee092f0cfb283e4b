"""What the routes of one worker process share: :class:`Service` (settings, keys, engines, metrics, jobs)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from engine.service.auth import Guard
from engine.service.engines import EnginePool
from engine.service.jobs import JobStore
from engine.service.keys import KeyStore, key_from_env
from engine.service.metrics import Metrics, render
from engine.service.settings import ServiceSettings

__all__ = ["Service"]


class Service:
    """What the routes share in one worker process: settings, keys, engines, metrics, jobs."""

    def __init__(self, settings: ServiceSettings, pool: EnginePool | None = None) -> None:
        self.settings = settings
        state = settings.state_path
        state.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.metrics = Metrics(state)
        self.guard = Guard(KeyStore(settings.keys_path, env_key=key_from_env()) if settings.auth else None)
        self.pool = pool or EnginePool(llm=settings.llm, metrics=self.metrics)
        if self.pool.metrics is None:
            self.pool.metrics = self.metrics
        self.jobs = JobStore(state / "jobs", self.pool.get, concurrency=settings.job_concurrency)
        self._spool = state / "spool"

    def spool(self, data: bytes, suffix: str) -> Path:
        """``data`` in a private temporary file (a change set for the engine to read)."""
        self._spool.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, name = tempfile.mkstemp(suffix=suffix, dir=self._spool)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return Path(name)

    def scrape(self) -> str:
        for kg, c in self.pool.text_cache().items():
            for result, n in c.items():
                self.metrics.set_total("isorag_text_cache_total", {"kg": kg, "result": result}, n)
        return render(self.metrics.gather())
