"""What the stages need from the stores and the embedder, as structural types (:class:`typing.Protocol`), and
:class:`Deferred`, a component that starts at first use.

The retriever, the matcher and its oracle, the scorers' neighbourhood fetch and features, the scoring service,
the answering rule and the ground-truth sampler read the KG through these members and nothing else, so each
takes any object that has them: :class:`~engine.stores.graph.GraphStore` and
:class:`~engine.stores.vectors.VectorStore` in the engine, a stand-in in a test. The LLM interface is
:class:`engine.llm.LLM` (a base class: the engine wraps other clients in it).

This module is in the lowest layer: it imports nothing of the engine, and numpy and neo4j only for the type checker.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from neo4j import Query

__all__ = ["CypherReader", "Deferred", "GraphReader", "RelationRow", "TextEmbedder", "VectorIndex"]

T = TypeVar("T")


class RelationRow(Protocol):
    """One relation of a KG's catalog (:class:`~engine.stores.graph.RelationInfo`): its id, the name the source
    gave it and the Neo4j relationship type it is stored as."""

    @property
    def rid(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def type(self) -> str: ...


class CypherReader(Protocol):
    """Read-only Cypher over one KG: what the matcher and the oracle use."""

    @property
    def kg(self) -> str: ...

    def read(self, query: str | Query, **params: Any) -> list[dict[str, Any]]:
        """The rows of a read-only statement (``query``: its text, or a ``neo4j.Query`` that carries a timeout)."""
        ...

    def read_named(self, name: str, **params: Any) -> list[dict[str, Any]]:
        """The rows of the named statement of ``cypher/`` (``<name>.cypher``)."""
        ...


class GraphReader(CypherReader, Protocol):
    """A KG's graph as retrieval, scoring, the no-LLM verdict and ground-truth sampling read it."""

    def relation_catalog(self, refresh: bool = False) -> Mapping[int, RelationRow]:
        """relation id -> the relation (cached; ``refresh`` reads it again)."""
        ...

    def relation_types(self) -> frozenset[str]:
        """The relationship types of the KG's catalog."""
        ...

    def entities(self, eids: Sequence[int]) -> Mapping[int, Mapping[str, Any]]:
        """eid -> the entity's properties (``name``, ``key``...), for the eids that exist."""
        ...

    def entities_by_key(self, keys: Sequence[str]) -> list[dict[str, Any]]:
        """Rows ``{eid, key, name}`` of the entities with these source keys."""
        ...

    def entities_by_name(self, names: Sequence[str]) -> list[dict[str, Any]]:
        """Rows ``{eid, key, name}`` of the entities with these display names."""
        ...

    def stats(self) -> Mapping[str, int]:
        """Counts of the KG's ``entities``, ``relations``, ``types``... ."""
        ...


class VectorIndex(Protocol):
    """A KG's vectors (kinds ``entities``, ``relations``, ``types``) as retrieval and scoring read them."""

    def search(self, kind: str, vectors: np.ndarray, limit: int) -> list[list[tuple[int, float]]]:
        """For each query row, the ``limit`` nearest ``(id, euclidean distance)``, nearest first."""
        ...

    def get_vectors(self, kind: str, ids: Sequence[int]) -> Mapping[int, np.ndarray]:
        """id -> vector, for the ids stored."""
        ...

    def count(self, kind: str) -> int:
        """Rows of ``kind``."""
        ...


class TextEmbedder(Protocol):
    """Text -> L2-normalized float32 vectors (:class:`~engine.embeddings.Embedder`, or a stand-in)."""

    @property
    def dim(self) -> int: ...

    @property
    def slug(self) -> str:
        """Names the vector space (the stores keep one collection per KG and slug)."""
        ...

    def encode(self, texts: Sequence[str], *, batch_size: int = ..., progress: bool = ...) -> np.ndarray:
        """``[len(texts), dim]`` float32 rows, in the order of ``texts``."""
        ...


class Deferred(Generic[T]):
    """A component handed to a stage that starts at first use, once: ``make`` runs the first time :meth:`get` is
    called (in the stage that needs the component, so that a store that cannot be reached fails that stage), and
    every later call returns the same object. :meth:`ready` wraps an object that exists already."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make: Callable[[], T] | None = make
        self._value: T | None = None
        self._lock = threading.Lock()

    @classmethod
    def ready(cls, value: T) -> Deferred[T]:
        d: Deferred[T] = cls(lambda: value)
        d.get()
        return d

    def get(self) -> T:
        with self._lock:
            if self._make is not None:
                self._value = self._make()
                self._make = None
            return self._value  # type: ignore[return-value]  # made above (T may itself admit None)
