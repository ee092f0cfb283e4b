"""One :class:`~engine.Engine` per KG and worker process, made at the KG's first request and reused by every later
one (an engine per request would reload the model, reconnect and rebuild every cache). Engines share the process'
embedding model. Each request still reads the KG's version, as the engine's reads always do, so a change set
applied through any worker or any other process is seen by the next request here."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from engine._config import EngineConfig, check_kg_name

if TYPE_CHECKING:  # pragma: no cover
    from engine._engine import Engine
    from engine._protocols import TextEmbedder
    from engine.service.metrics import Metrics

__all__ = ["EnginePool"]

#: engines kept per process; the least recently used beyond it is closed
MAX_ENGINES = 64


class EnginePool:
    """The engines of one process, by KG name."""

    def __init__(self, *, llm: Any = True, metrics: Metrics | None = None, embedder: TextEmbedder | None = None,
                 config: EngineConfig | None = None) -> None:
        """``llm``: True (the LLM the environment configures, if any), False (none) or an LLM object for every
        engine; ``embedder``: the model to share (default: loaded at the first engine); ``config``: the engines'
        configuration but for the KG (default: from the environment)."""
        self._llm = llm
        self.metrics = metrics
        self._embedder = embedder
        self._base = config
        self._lock = threading.Lock()
        self._engines: OrderedDict[str, Engine] = OrderedDict()

    def _shared_embedder(self, cfg: EngineConfig) -> TextEmbedder:
        if self._embedder is None:
            from engine.embeddings import load_embedder

            self._embedder = load_embedder(cfg.embedding_model, device=cfg.device)
        return self._embedder

    def get(self, kg: str) -> Engine:
        """The engine of ``kg`` (a valid KG name: checked here), made at first use."""
        check_kg_name(kg)
        with self._lock:
            eng = self._engines.get(kg)
            if eng is not None:
                self._engines.move_to_end(kg)
                self._count("hit")
                return eng
            from engine._engine import Engine

            cfg = self._base.with_(kg=kg) if self._base is not None else EngineConfig.from_env(kg=kg)
            llm = None if self._llm is True else self._llm  # None: from the environment
            eng = Engine(cfg, llm=llm, embedder=self._shared_embedder(cfg))
            self._engines[kg] = eng
            self._count("miss")
            while len(self._engines) > MAX_ENGINES:
                _, old = self._engines.popitem(last=False)
                old.close()
            return eng

    def any(self) -> Engine:
        """An engine for reads that concern no one KG (the list of KGs): the default KG's, made without a read."""
        return self.get(self._base.kg if self._base is not None else EngineConfig.from_env().kg)

    def _count(self, result: str) -> None:
        if self.metrics is not None:
            self.metrics.inc("isorag_engine_cache_total", {"result": result})

    def text_cache(self) -> dict[str, dict[str, int]]:
        """Per KG: the hits and misses of its engine's pattern-text embedding cache."""
        out: dict[str, dict[str, int]] = {}
        with self._lock:
            engines = list(self._engines.items())
        for kg, eng in engines:
            out[kg] = eng.cache_stats()["text_cache"]
        return out

    def close(self) -> None:
        with self._lock:
            for eng in self._engines.values():
                eng.close()
            self._engines.clear()
