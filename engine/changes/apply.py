"""Apply a change set to both stores (interface; the implementation follows)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from .ops import Op

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import TextEmbedder
    from engine.stores.graph import GraphStore
    from engine.stores.vectors import VectorStore


@dataclass
class ApplyReport:
    """What a change set did: counts per operation kind, the skipped operations (``file:line: reason``) and the
    KG's version after it."""

    kg: str = ""
    source: str = ""
    ops: int = 0
    added: int = 0
    removed: int = 0
    entities_set: int = 0
    entities_removed: int = 0
    merged: int = 0
    skipped: int = 0
    skip_examples: list[str] = field(default_factory=list)
    batches: int = 0
    batches_resumed: int = 0  # batches found applied by an earlier (killed) run and not applied again
    already_applied: bool = False  # the whole change set had been applied: nothing changed
    vectors_upserted: int = 0
    vectors_deleted: int = 0
    version: int = 0
    version_at: str = ""
    graph_s: float = 0.0
    vector_s: float = 0.0
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def apply_changes(graph: GraphStore, vectors: VectorStore | None, embedder: TextEmbedder | None,
                  ops: Iterable[Op], *, strict: bool = False, progress: bool = True,
                  batch_size: int = 10_000, source: str = "") -> ApplyReport:
    raise NotImplementedError
