"""Compare a KG's two stores in full, and repair what differs.

Neo4j is the store of record; Milvus must hold exactly one vector per entity, relation, type and alias of the KG,
embedded from its current text (an alias's id is made of its entity and its text, so a present alias id is
up to date). :func:`check_stores` compares

* counts per kind (and rows stored twice under one id),
* ids: every id of Neo4j against every id of Milvus (read in pages, kept as int64 arrays: 8 bytes an id), and every
  entity's id against its key's (:func:`engine.stores.graph.entity_id`: an id that is not its key's is an entity
  that no look-up by key finds),
* texts: every vector row records the digest of the text it was embedded from (:mod:`engine.stores.texts`), which
  is compared with the digest of the text Neo4j holds now (an entity's name and description, a relation's or a
  type's name) without embedding anything; ``deep=True`` also embeds every entity's text again and compares the
  vectors themselves (costly: the embedder's speed). Collections made before rows recorded digests are checked by
  name (relations, types) and, for entities, only ``deep``,
* the change-set queue: vector work a killed run left (see :mod:`engine.changes.vectors`),
* relation catalog entries that no triple of the KG uses any more,

and with ``repair=True`` makes Milvus (and the catalog) agree: missing or stale vectors are embedded, extra ones
deleted, duplicates removed, unused catalog entries dropped, the queue worked off; then the KG's version stamp moves
so that readers drop what they cached. An entity whose id is not its key's is reported, not repaired.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from engine._cypher import cypher
from engine._reports import Report
from engine.stores.graph import entity_id
from engine.stores.texts import entity_text, text_digest

from .apply import ApplyReport, unused_types
from .vectors import catch_up, sync_alias_vectors, sync_vectors

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import TextEmbedder
    from engine.stores.graph import GraphStore
    from engine.stores.vectors import VectorStore

#: ids of one kind shown per difference in a report
SHOWN = 5
#: an entity vector farther than this (Euclidean, normalized vectors) from its text's embedding is stale
STALE_DISTANCE = 1e-3
_PAGE = 10_000
KINDS = ("entities", "relations", "types")


@dataclass
class CheckReport(Report):
    """What differs between the stores (all zero and empty: they agree) and what a repair did."""

    kg: str = ""
    neo4j: dict[str, int] = field(default_factory=dict)
    milvus: dict[str, int] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)  # ids in Neo4j without a vector
    extra: dict[str, int] = field(default_factory=dict)  # vectors whose id is not in Neo4j
    stale: dict[str, int] = field(default_factory=dict)  # vectors embedded from another text
    duplicates: dict[str, int] = field(default_factory=dict)  # rows stored twice under one id
    wrong_ids: int = 0  # entities whose id is not their key's
    examples: dict[str, list[Any]] = field(default_factory=dict)
    queued: int = 0  # ids a change set queued for the vector side and that are not done yet
    unused_relations: list[str] = field(default_factory=list)  # catalog entries no triple uses
    texts_checked: dict[str, int] = field(default_factory=dict)
    digests: dict[str, bool] = field(default_factory=dict)  # whether the kind's rows record their text's digest
    deep: bool = False
    repaired: bool = False
    upserted: int = 0
    deleted: int = 0
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether the stores agreed (before any repair)."""
        return not (any(self.missing.values()) or any(self.extra.values()) or any(self.stale.values())
                    or any(self.duplicates.values()) or self.queued or self.unused_relations or self.wrong_ids)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "ok": self.ok}

    def lines(self) -> list[str]:
        kinds = ("entities", "relations", "types") + (
            ("aliases",) if self.neo4j.get("aliases") or self.milvus.get("aliases") else ())
        out = [f"KG {self.kg!r}: the stores " + ("agree" if self.ok else "differ")
               + f" (checked in {self.wall_s:.1f} s; texts of "
               + ", ".join(f"{self.texts_checked.get(k, 0):,} {k}" for k in kinds)
               + (", every entity embedded again" if self.deep else "") + ")"]
        for k in kinds:
            out.append(f"  {k:<9} neo4j {self.neo4j.get(k, 0):,}  milvus {self.milvus.get(k, 0):,}  missing "
                       f"{self.missing.get(k, 0):,}  extra {self.extra.get(k, 0):,}  stale {self.stale.get(k, 0):,}"
                       f"  duplicates {self.duplicates.get(k, 0):,}")
        if self.digests and not self.digests.get("entities", True) and not self.deep:
            out.append("  entity vectors carry no text digest (made by an earlier isorag): only --deep compares "
                       "their texts; a reload of the KG adds digests")
        if self.wrong_ids:
            out.append(f"  {self.wrong_ids:,} entities whose id is not their key's (not repairable by check: "
                       f"e.g. {self.examples.get('wrong_ids')})")
        if self.queued:
            out.append(f"  {self.queued:,} ids queued by an unfinished change set")
        if self.unused_relations:
            out.append(f"  relation catalog entries no triple uses: {', '.join(self.unused_relations)}")
        if self.repaired:
            out.append(f"  repaired: {self.upserted:,} vectors embedded, {self.deleted:,} deleted")
        return out


def _neo4j_entities(graph: GraphStore) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Every entity of the KG in eid order: (eids, digests of their texts, eids that are not their key's)."""
    eids: list[np.ndarray] = []
    digests: list[np.ndarray] = []
    wrong: list[int] = []
    kg, last = graph.kg, -(1 << 63)
    while True:
        rows = graph.read_named("entities_page", kg=kg, last=last, limit=_PAGE)
        if not rows:
            break
        eids.append(np.fromiter((r["eid"] for r in rows), dtype=np.int64, count=len(rows)))
        digests.append(np.fromiter((text_digest(entity_text(r["name"], r["description"])) for r in rows),
                                   dtype=np.int64, count=len(rows)))
        wrong.extend(r["eid"] for r in rows if entity_id(kg, r["key"]) != r["eid"])
        last = rows[-1]["eid"]
    if not eids:
        return np.empty(0, np.int64), np.empty(0, np.int64), wrong
    return np.concatenate(eids), np.concatenate(digests), wrong


def _neo4j_catalog(graph: GraphStore) -> dict[str, dict[int, str]]:
    """The KG's relation and type catalog: kind -> id -> name."""
    out: dict[str, dict[int, str]] = {"relations": {}, "types": {}}
    for r in graph.read_named("check_catalog", kg=graph.kg):
        out[r["kind"]][r["id"]] = r["name"]
    return out


def _milvus_rows(vectors: VectorStore, kind: str) -> tuple[np.ndarray, np.ndarray | None, int]:
    """(every stored id, sorted and unique; the digest of each, or None without digests; rows in all: a pk stored
    twice counts twice, which only ``count(*)`` tells)."""
    if kind not in vectors.existing_kinds():
        return np.empty(0, np.int64), None, 0
    rows = vectors.count(kind)
    if vectors.has_digests(kind):  # one scan: ids and digests
        parts = list(vectors.iter_digests(kind))
        ids = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, np.int64)
        dig = np.concatenate([p[1] for p in parts]) if parts else np.empty(0, np.int64)
        unique, first = np.unique(ids, return_index=True)
        return unique, dig[first], rows
    if rows <= vectors.query_limit:
        return np.unique(np.asarray(vectors.all_ids(kind), dtype=np.int64)), None, rows
    got = list(vectors.iter_ids(kind))
    return (np.unique(np.concatenate(got)) if got else np.empty(0, np.int64)), None, rows


def _stale_by_digest(want: np.ndarray, want_digest: np.ndarray, have: np.ndarray, have_digest: np.ndarray,
                     ) -> list[int]:
    """The ids present on both sides whose stored digest is not the digest of the current text."""
    common, wi, hi = np.intersect1d(want, have, assume_unique=True, return_indices=True)
    return common[want_digest[wi] != have_digest[hi]].tolist()


def _stale_entities_deep(graph: GraphStore, vectors: VectorStore, embedder: TextEmbedder, eids: np.ndarray,
                         progress: bool) -> list[int]:
    """Entities whose stored vector is not the embedding of their current text (every one embedded again)."""
    from tqdm import tqdm

    stale: list[int] = []
    with tqdm(total=len(eids), desc="check  (entity texts)", unit="ent", disable=not progress, file=sys.stderr,
              dynamic_ncols=True, leave=False) as bar:
        for start in range(0, len(eids), 2_048):
            chunk = [int(e) for e in eids[start:start + 2_048]]
            texts = {r["eid"]: entity_text(r["name"], r["description"])
                     for r in graph.read_named("changes_texts", eids=chunk, kg=graph.kg)}
            stored = vectors.get_vectors("entities", list(texts))
            ids = [e for e in texts if e in stored]
            if ids:
                fresh = np.asarray(embedder.encode([texts[e] for e in ids]), dtype=np.float32)
                have = np.stack([stored[e] for e in ids])
                dist = np.linalg.norm(fresh - have, axis=1)
                stale.extend(e for e, d in zip(ids, dist.tolist()) if d > STALE_DISTANCE)
            bar.update(len(chunk))
    return stale


def _compare(rep: CheckReport, kind: str, want: np.ndarray, have: np.ndarray, rows: int) -> np.ndarray:
    """Counts, missing and extra ids of one kind; returns the ids on both sides."""
    rep.neo4j[kind], rep.milvus[kind] = len(want), len(have)
    rep.duplicates[kind] = max(0, rows - len(have))
    missing = np.setdiff1d(want, have, assume_unique=True)
    extra = np.setdiff1d(have, want, assume_unique=True)
    rep.missing[kind], rep.extra[kind] = len(missing), len(extra)
    rep.examples[f"missing_{kind}"] = missing[:SHOWN].tolist()
    rep.examples[f"extra_{kind}"] = extra[:SHOWN].tolist()
    return np.intersect1d(want, have, assume_unique=True)


def _check_entities(graph: GraphStore, vectors: VectorStore, embedder: TextEmbedder, rep: CheckReport,
                    queued: list[int], deep: bool, progress: bool) -> tuple[set[int], list[int]]:
    """Entities: returns (ids to embed again, ids to delete from Milvus)."""
    want, want_digest, wrong = _neo4j_entities(graph)
    order = np.argsort(want)
    want, want_digest = want[order], want_digest[order]
    have, have_digest, rows = _milvus_rows(vectors, "entities")
    present = _compare(rep, "entities", want, have, rows)
    rep.wrong_ids, rep.examples["wrong_ids"] = len(wrong), wrong[:SHOWN]
    rep.digests["entities"] = have_digest is not None
    stale: set[int] = set()
    if have_digest is not None:
        stale.update(_stale_by_digest(want, want_digest, have, have_digest))
        rep.texts_checked["entities"] = len(present)
    if deep:
        stale.update(_stale_entities_deep(graph, vectors, embedder, present, progress))
        rep.texts_checked["entities"] = len(present)
    elif have_digest is None:  # no digests: the entities a change set left queued, embedded again
        sample = np.intersect1d(present, np.asarray(sorted(queued), np.int64))
        stale.update(_stale_entities_deep(graph, vectors, embedder, sample, progress) if len(sample) else [])
        rep.texts_checked["entities"] = len(sample)
    rep.stale["entities"] = len(stale)
    rep.examples["stale_entities"] = sorted(stale)[:SHOWN]
    return stale | set(np.setdiff1d(want, have, assume_unique=True).tolist()), \
        np.setdiff1d(have, want, assume_unique=True).tolist()


def _check_catalog(vectors: VectorStore, rep: CheckReport, kind: str, names: dict[int, str]
                   ) -> tuple[set[int], list[int]]:
    """Relations or types: returns (ids to embed again, ids to delete from Milvus)."""
    want = np.asarray(sorted(names), dtype=np.int64)
    have, have_digest, rows = _milvus_rows(vectors, kind)
    present = _compare(rep, kind, want, have, rows)
    rep.digests[kind] = have_digest is not None
    if have_digest is not None:  # the digest of the name each row was embedded from
        want_digest = np.asarray([text_digest(names[int(i)]) for i in want], dtype=np.int64)
        stale = set(_stale_by_digest(want, want_digest, have, have_digest))
    else:  # rows made before digests: the name each row stores
        stored = vectors.get_names(kind, present.tolist()) if len(present) else {}
        stale = {i for i in present.tolist() if stored.get(i) != names.get(i)}
    rep.texts_checked[kind] = len(present)
    rep.stale[kind] = len(stale)
    rep.examples[f"stale_{kind}"] = sorted(stale)[:SHOWN]
    return stale | set(np.setdiff1d(want, have, assume_unique=True).tolist()), \
        np.setdiff1d(have, want, assume_unique=True).tolist()


def _alias_owners(graph: GraphStore) -> dict[int, int]:
    """aid -> eid of every alias of the KG (what the aliases collection must hold)."""
    from engine.stores.graph import alias_id

    return {alias_id(graph.kg, r["eid"], a): r["eid"] for r in graph.read_named("check_aliases", kg=graph.kg)
            for a in r["aliases"]}


def _check_aliases(vectors: VectorStore, rep: CheckReport, owners: dict[int, int]) -> tuple[set[int], list[int]]:
    """Aliases: an alias row's id is made of its entity and its text, so the ids say it all; returns (the entities
    whose alias vectors to write again, alias ids to delete from Milvus)."""
    want = np.asarray(sorted(owners), dtype=np.int64)
    have, _, rows = _milvus_rows(vectors, "aliases")
    present = _compare(rep, "aliases", want, have, rows)
    rep.texts_checked["aliases"] = len(present)
    rep.stale["aliases"] = 0
    missing = np.setdiff1d(want, have, assume_unique=True).tolist()
    return {owners[a] for a in missing}, np.setdiff1d(have, want, assume_unique=True).tolist()


def _unused_relations(graph: GraphStore) -> list[str]:
    catalog = {ri.type for ri in graph.relation_catalog(refresh=True).values()}
    return unused_types(graph, sorted(catalog), catalog)


def check_stores(graph: GraphStore, vectors: VectorStore, embedder: TextEmbedder, *, repair: bool = False,
                 deep: bool = False, progress: bool = True) -> CheckReport:
    """Compare Neo4j and Milvus for the KG of ``graph`` (see the module docstring); ``repair``: make them agree,
    holding the KG's writer lease. Read-only without ``repair``."""
    if repair:
        with graph.lock("check --repair"):
            return _check(graph, vectors, embedder, repair=True, deep=deep, progress=progress)
    return _check(graph, vectors, embedder, repair=False, deep=deep, progress=progress)


def _check(graph: GraphStore, vectors: VectorStore, embedder: TextEmbedder, *, repair: bool, deep: bool,
           progress: bool) -> CheckReport:
    t0 = time.perf_counter()
    rep = CheckReport(kg=graph.kg, deep=deep)
    state = graph.read_named("changes_state", kg=graph.kg)
    queued: dict[str, list[int]] = {k: list(state[0][f"pending_{k}"]) if state else [] for k in KINDS}
    rep.queued = sum(len(v) for v in queued.values())
    fix: dict[str, set[int]] = {}
    gone: dict[str, list[int]] = {}
    fix["entities"], gone["entities"] = _check_entities(graph, vectors, embedder, rep, queued["entities"], deep,
                                                        progress)
    catalog = _neo4j_catalog(graph)
    for kind in ("relations", "types"):
        fix[kind], gone[kind] = _check_catalog(vectors, rep, kind, catalog[kind])
    fix["aliases"], gone["aliases"] = _check_aliases(vectors, rep, _alias_owners(graph))
    rep.unused_relations = _unused_relations(graph)
    if repair:
        _repair(graph, vectors, embedder, rep, fix, gone, queued)
    rep.wall_s = time.perf_counter() - t0
    return rep


def _repair(graph: GraphStore, vectors: VectorStore, embedder: TextEmbedder, rep: CheckReport,
            fix: dict[str, set[int]], gone: dict[str, list[int]], queued: dict[str, list[int]]) -> None:
    rep.repaired = True
    for kind in KINDS:
        if rep.duplicates[kind]:
            rep.deleted += vectors.remove_duplicates(kind)
    if rep.unused_relations:
        dropped = graph.write_tx([(cypher("changes_drop_relations"),
                                   {"kg": graph.kg, "types": rep.unused_relations})])[0]
        gone["relations"].extend(r["rid"] for r in dropped)
    for kind in (*KINDS, "aliases"):
        if gone[kind]:
            vectors.delete(kind, gone[kind])
            rep.deleted += len(gone[kind])
    # the stale and missing ones, and what a change set queued, embedded from what Neo4j holds now
    up, de = sync_vectors(graph, vectors, embedder, fix["entities"] | set(queued["entities"]),
                          fix["relations"] | set(queued["relations"]), fix["types"] | set(queued["types"]))
    rep.upserted += up
    rep.deleted += de
    if fix["aliases"]:  # the entities of missing alias vectors: theirs written again
        eids = sorted(fix["aliases"])
        held = graph.read_named("changes_texts", eids=eids, kg=graph.kg)
        up, de = sync_alias_vectors(vectors, embedder, graph.kg, eids, {r["eid"]: list(r["aliases"]) for r in held})
        rep.upserted += up
        rep.deleted += de
    if rep.queued:
        catch_up(graph, None, None, ApplyReport())
    vectors.ensure_ready()
    if rep.upserted or rep.deleted:  # readers in any process drop what they cached and read the new vectors
        graph.write(cypher("kg_stamp"), kg=graph.kg, vectors_ts=vectors.last_write_ts)
    graph.invalidate()


__all__ = ["CheckReport", "check_stores", "STALE_DISTANCE"]
