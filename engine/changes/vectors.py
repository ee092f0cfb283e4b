"""The vector side of change sets: Milvus brought in line with what Neo4j holds now.

Each batch of a change set queues, in its own transaction, the ids of the entities, relations and types whose
vectors it made stale (new, changed or gone) on the KG's version node. :func:`catch_up` works the queue off: every
queued id is looked up in Neo4j; what exists is embedded from its current text and upserted (the row records the
digest of that text), what is gone is deleted; then the queue is cleared, and the version stamp moves again with the
Milvus timestamp of the last write, so that a reader in any process drops what it cached before the vectors changed
and reads the new ones (:class:`engine.stores.version.VersionWatch`). A kill between the two stores leaves the queue
in Neo4j, and the next run (of this or any change set, or ``check --repair``) works it off first.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from engine._cypher import cypher
from engine.stores.texts import entity_text

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import TextEmbedder
    from engine.stores.graph import GraphStore
    from engine.stores.vectors import VectorStore

#: entity ids whose texts are read (and embedded) per round
TEXTS_PER_READ = 8_192


def sync_vectors(graph: GraphStore, vectors: VectorStore, embedder: TextEmbedder, eids: Iterable[int],
                 rids: Iterable[int], tids: Iterable[int], *, embed_batch_size: int = 64) -> tuple[int, int]:
    """Make Milvus hold, for each of these ids, the vector of what Neo4j holds now: embedded from its current text
    when it exists (always for entities, whose text may have changed; relations and types only when missing or
    embedded from another name), deleted when it does not. Returns (upserted, deleted)."""
    up_e, del_e = _sync_entities(graph, vectors, embedder, sorted(set(eids)), embed_batch_size)
    up_c, del_c = _sync_catalog(graph, vectors, embedder, sorted(set(rids)), sorted(set(tids)), embed_batch_size)
    return up_e + up_c, del_e + del_c


def _sync_entities(graph: GraphStore, vectors: VectorStore, embedder: TextEmbedder, eids: list[int],
                   embed_batch_size: int) -> tuple[int, int]:
    upserted = deleted = 0
    for start in range(0, len(eids), TEXTS_PER_READ):
        chunk = eids[start:start + TEXTS_PER_READ]
        rows = graph.read_named("changes_texts", eids=chunk, kg=graph.kg)
        texts = {r["eid"]: entity_text(r["name"], r["description"]) for r in rows}
        gone = [e for e in chunk if e not in texts]
        if gone:
            vectors.delete("entities", gone)
            deleted += len(gone)
        if texts:
            ids = list(texts)
            said = [texts[i] for i in ids]
            vectors.upsert("entities", ids, embedder.encode(said, batch_size=embed_batch_size), texts=said)
            upserted += len(ids)
        up, down = sync_alias_vectors(vectors, embedder, graph.kg, chunk,
                                      {r["eid"]: list(r["aliases"]) for r in rows}, embed_batch_size=embed_batch_size)
        upserted, deleted = upserted + up, deleted + down
    return upserted, deleted


def sync_alias_vectors(vectors: VectorStore, embedder: TextEmbedder, kg: str, eids: Sequence[int],
                       aliases: dict[int, list[str]], *, embed_batch_size: int = 64) -> tuple[int, int]:
    """Make the alias vectors of these entities those of their aliases now (``aliases``: eid -> its aliases; an
    entity not in it has none): the rows of aliases they lost deleted, those of new ones embedded (an alias row's id
    is made of its entity and its text). Returns (upserted, deleted)."""
    from engine.stores.graph import alias_id
    from engine.stores.vectors import ALIASES

    want = {alias_id(kg, e, a): (e, a) for e in eids for a in aliases.get(e, ())}
    have = vectors.alias_rows(eids)
    gone = [i for i in have if i not in want]
    if gone:
        vectors.delete(ALIASES, gone)
    todo = [i for i in want if i not in have]
    if todo:
        said = [want[i][1] for i in todo]
        vectors.upsert(ALIASES, todo, embedder.encode(said, batch_size=embed_batch_size), names=said,
                       owners=[want[i][0] for i in todo])
    return len(todo), len(gone)


def _sync_catalog(graph: GraphStore, vectors: VectorStore, embedder: TextEmbedder, rids: list[int],
                  tids: list[int], embed_batch_size: int) -> tuple[int, int]:
    if not rids and not tids:
        return 0, 0
    upserted = deleted = 0
    names: dict[str, dict[int, str]] = {"relations": {}, "types": {}}
    for r in graph.read_named("changes_catalog_names", rids=rids, tids=tids, kg=graph.kg):
        names[r["kind"]][r["id"]] = r["name"]
    for kind, ids in (("relations", rids), ("types", tids)):
        if not ids:
            continue
        have = names[kind]
        gone = [i for i in ids if i not in have]
        if gone:
            vectors.delete(kind, gone)
            deleted += len(gone)
        stored = vectors.get_names(kind, list(have))
        todo = [i for i in have if stored.get(i) != have[i]]
        if todo:
            said = [have[i] for i in todo]
            vectors.upsert(kind, todo, embedder.encode(said, batch_size=embed_batch_size), names=said)
            upserted += len(todo)
    return upserted, deleted


def catch_up(graph: GraphStore, vectors: VectorStore | None, embedder: TextEmbedder | None, report: Any, *,
             done: bool | None = None, embed_batch_size: int = 64) -> None:
    """Work off the vector queue the committed batches left (see the module docstring), counting into ``report``
    (``vectors_upserted``, ``vectors_deleted``, ``vector_s``); ``done``: also mark the change set complete (or
    not). ``vectors=None``: the graph alone (benchmarks): the queue is only cleared."""
    rows = graph.read_named("changes_state", kg=graph.kg)
    if not rows:
        return
    st = rows[0]
    ents, rids, tids = st["pending_entities"], st["pending_relations"], st["pending_types"]
    wrote = False
    if vectors is not None and embedder is not None and (ents or rids or tids):
        t0 = time.perf_counter()
        upserted, deleted = sync_vectors(graph, vectors, embedder, ents, rids, tids,
                                         embed_batch_size=embed_batch_size)
        report.vectors_upserted += upserted
        report.vectors_deleted += deleted
        report.vector_s += time.perf_counter() - t0
        wrote = bool(upserted or deleted)
    if ents or rids or tids or done is not None:
        graph.write(cypher("changes_vectors_done"), kg=graph.kg, done=bool(st["cs_done"]) if done is None else done,
                    moved=wrote, vectors_ts=vectors.last_write_ts if vectors is not None else 0)


__all__ = ["sync_alias_vectors", "sync_vectors", "catch_up", "TEXTS_PER_READ"]
