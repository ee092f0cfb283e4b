"""Adoption re-sync: bring a KG adopted from a user's graph (``isorag load --from-neo4j``) up to date with it.

The user's graph changes after the adoption: nodes are added to the label, renamed, re-keyed, removed from the
label or deleted, relationships come and go. A re-sync (``isorag sync --from-neo4j``, :meth:`Engine.resync_existing`)
picks all of it up and writes only what isorag owns (docs/security.md):

* nodes that left the label, lost their key or whose key changed (a changed key is another entity) are given back
  (``cypher/adopt_sync_release.cypher``: isorag's label, ``isorag_*`` properties, its type links and the
  relationships isorag wrote on them are removed; the node and its own relationships stay) and their vectors deleted;
* nodes whose name property changed get the new name as a :class:`~engine.changes.ops.SetEntity` change set applied
  by :func:`engine.changes.apply.apply_changes` (which re-embeds them and gives the KG a new version);
* nodes added to the label are adopted and embedded (:func:`loaders.existing.embed_existing`, which also adds the
  relation types new relationships brought and embeds what has no vector yet);
* deleted nodes leave vectors without an entity, and relation types may no longer be used by any relationship
  between the KG's entities: :func:`engine.changes.check.check_stores` with ``repair`` (ids of both stores compared
  in full) deletes those vectors and drops those catalog entries with theirs.

The user's relationships are the KG's triples and are read live by retrieval, so they need nothing else. Every
step is idempotent, so a re-sync killed at any point ends where an uninterrupted one would when run again.
"""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING, Any

from engine._cypher import cypher, label as label_slot, render
from engine._errors import ConfigError
from engine.changes.ops import SetEntity
from engine.changes.sync import SyncReport
from engine.stores.graph import GraphStore

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import TextEmbedder
    from engine.stores.vectors import VectorStore


def resync_existing(graph: GraphStore, vectors: VectorStore, embedder: TextEmbedder, *, label: str, key: str,
                    name: str | None = None, dry_run: bool = False, progress: bool = True,
                    batch_size: int = 10_000) -> SyncReport:
    """Re-sync the KG of ``graph``, adopted from the nodes of ``label`` (key property ``key``, name property
    ``name``), with what those nodes and their relationships are now (see the module docstring)."""
    from engine.changes.apply import apply_changes
    from engine.changes.vectors import sync_vectors
    from engine.changes.check import check_stores
    from loaders.existing import embed_existing

    t0 = time.perf_counter()
    kg = graph.kg
    report = SyncReport(path=f"neo4j:{label}", kg=kg, dry_run=dry_run)
    labels = graph.read_named("existing_labels")[0]["labels"]
    if label not in labels:
        raise ConfigError(f"label {label!r} is not in the Neo4j database at {graph.uri} (labels: {sorted(labels)})")
    slot = {"label": label_slot(label)}
    stale_rows = graph.read(render("adopt_sync_stale", **slot), kg=kg, key=key)
    stale = [r["eid"] for r in stale_rows]
    renamed = graph.read(render("adopt_sync_renamed", **slot), kg=kg, key=key, name=name or key)
    fresh = graph.read(render("adopt_sync_new", **slot), key=key)[0]["new"]
    # deleted nodes (their vectors have no entity left) and relation types nothing uses: what check finds
    chk = check_stores(graph, vectors, embedder, progress=False)
    report.entities_removed = len(stale) + chk.extra.get("entities", 0)
    report.entities_set = len(renamed)
    report.entities_added = int(fresh) + sum(1 for r in stale_rows if r["rekeyed"])
    report.relations_removed = len(chk.unused_relations)
    report.diff_s = time.perf_counter() - t0
    if dry_run:
        report.wall_s = report.diff_s
        return report
    t1 = time.perf_counter()
    applied: dict[str, Any] = {}
    if stale:
        with graph.lock(f"re-sync label {label}: release"):
            for i in range(0, len(stale), batch_size):
                graph.write(cypher("adopt_sync_release"), eids=stale[i:i + batch_size], kg=kg)
            sync_vectors(graph, vectors, embedder, stale, [], [])
    if renamed:
        ops = [SetEntity(r["key"], name=r["name"], path=f"neo4j:{label}") for r in renamed]
        rep = apply_changes(graph, vectors, embedder, ops, progress=progress, source=f"re-sync neo4j:{label}")
        applied["renamed"] = rep.to_dict()
    # nodes new to the label (and those whose key changed, released above); new relation types; missing vectors
    before = len(graph.relation_catalog(refresh=True))
    summary = embed_existing(graph, vectors, embedder, label=label, key=key, name=name, progress=progress,
                             batch_size=batch_size)
    applied["adopted"] = summary.to_dict()
    report.entities_added = summary.entities_created
    report.relations_added = max(0, summary.relations - before)
    # vectors of deleted nodes, relation types no relationship uses any more (and anything else out of step)
    chk = check_stores(graph, vectors, embedder, repair=True, progress=progress)
    applied["check"] = chk.to_dict()
    report.relations_removed = len(chk.unused_relations)
    report.entities_removed = len(stale) + chk.extra.get("entities", 0)
    if report.changes:
        report.version = _bump(graph, report, vectors.last_write_ts)
    else:
        from engine.changes.sync import current_version

        report.version = current_version(graph)
    report.applied = applied
    report.apply_s = time.perf_counter() - t1
    report.wall_s = time.perf_counter() - t0
    return report


def _bump(graph: GraphStore, report: SyncReport, vectors_ts: int) -> int:
    """A new version of the KG for the re-sync's writes outside a change set."""
    what = f"re-sync {report.path} {time.time()} {report.to_dict()}"
    return graph.bump_version(hashlib.blake2b(what.encode("utf-8"), digest_size=16).hexdigest(), vectors_ts)


__all__ = ["resync_existing"]
