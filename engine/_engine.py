"""The Engine: one object that owns the stores, the embedder and (later) the LLM and the scorer."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

from engine._config import EngineConfig


class Engine:
    """Entry point of the Python API.

    >>> with Engine(kg="demo") as eng:          # local Neo4j and Milvus start on demand
    ...     eng.load("engine/data/demo/kb.txt")
    ...     eng.retrieve({"triples": [["Flashpoint", "starred_actors", "UNKNOWN actor 1"]]})
    """

    def __init__(self, config: EngineConfig | None = None, **overrides: Any) -> None:
        cfg = config or EngineConfig.from_env()
        if overrides:
            cfg = cfg.with_(**overrides)
        self.config = cfg
        self._lock = threading.RLock()
        self._graph: Any = None
        self._vectors: Any = None
        self._embedder: Any = None
        self._matcher: Any = None

    # -- components (lazy: a component starts or connects at first use) -------------------------------
    @property
    def kg(self) -> str:
        return self.config.kg

    @property
    def graph(self) -> Any:
        with self._lock:
            if self._graph is None:
                from engine.graph import GraphStore

                self._graph = GraphStore(self.config.neo4j, self.config.kg)
            return self._graph

    @property
    def embedder(self) -> Any:
        with self._lock:
            if self._embedder is None:
                from engine.embeddings import load_embedder

                self._embedder = load_embedder(self.config.embedding_model, device=self.config.device)
            return self._embedder

    @property
    def vectors(self) -> Any:
        with self._lock:
            if self._vectors is None:
                from engine.vectors import VectorStore

                uri = self.config.milvus.uri
                if not uri:
                    from engine.local_milvus import ensure_local_milvus

                    uri = ensure_local_milvus()
                emb = self.embedder
                self._vectors = VectorStore(uri, token=self.config.milvus.token, kg=self.config.kg,
                                            model=emb.slug, dim=emb.dim)
                self._vectors.ensure_collections()
            return self._vectors

    # -- loading -------------------------------------------------------------------------------------
    def load(self, path: str | Path, fmt: str | None = None, *, strict: bool = False, progress: bool = True,
             batch_size: int = 10_000, echo: Callable[[str], None] | None = None, **options: Any) -> Any:
        """Load a source file (see :mod:`loaders`) into Neo4j and Milvus; returns a ``LoadSummary``."""
        from loaders.bulk import BulkLoader

        loader = BulkLoader(self.graph, self.vectors, self.embedder, batch_size=batch_size, progress=progress)
        summary = loader.load_file(path, fmt, strict=strict, echo=echo, **options)
        self._matcher = None  # relation catalog changed
        return summary

    def load_existing(self, label: str, key: str, name: str | None = None, *, progress: bool = True,
                      batch_size: int = 10_000) -> Any:
        """Embed a graph already in Neo4j (nodes with ``label``) into Milvus without moving it."""
        from loaders.existing import embed_existing

        summary = embed_existing(self.graph, self.vectors, self.embedder, label=label, key=key, name=name,
                                 progress=progress, batch_size=batch_size)
        self._matcher = None
        return summary

    def stats(self) -> dict[str, Any]:
        """Counts from both stores and whether they agree."""
        g = self.graph.stats()
        v = {kind: self.vectors.count(kind) for kind in ("entities", "relations", "types")}
        return {
            "kg": self.kg,
            "neo4j": {"uri": self.graph.uri, **g},
            "milvus": {"uri": self.vectors.uri if hasattr(self.vectors, "uri") else self.config.milvus.uri, **v},
            "agree": g["entities"] == v["entities"] and g["relations"] == v["relations"] and g["types"] == v["types"],
        }

    def drop(self) -> None:
        """Delete this KG from both stores."""
        self.graph.drop()
        self.vectors.drop()
        self._vectors = None
        self._matcher = None

    # -- retrieval -------------------------------------------------------------------------------------
    @property
    def retriever(self) -> Any:
        with self._lock:
            if self._matcher is None:
                from engine.retrieval import Retriever

                self._matcher = Retriever(self.graph, self.vectors, self.embedder, self.config.match)
            return self._matcher

    def retrieve(self, pattern: Any, k: int | None = None, **match: Any) -> Any:
        """Exact top-k subgraphs of the KG with the smallest graph semantic distance to ``pattern``.

        ``pattern`` is a :class:`~engine.pattern.Pattern`, a ``{"triples": [[h, r, t], ...]}`` mapping, its
        JSON text or a list of triples. ``match`` overrides :class:`~engine._config.MatchSettings` fields for
        this call (``k_node``, ``k_rel``, ``injective``, ``directed``, ``deadline_s``, ...).
        """
        from dataclasses import replace

        settings = replace(self.config.match, **match) if match else self.config.match
        return self.retriever.retrieve(pattern, k=k, settings=settings)

    # -- lifecycle -----------------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            if self._vectors is not None and hasattr(self._vectors, "close"):
                self._vectors.close()
            self._vectors = None

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
