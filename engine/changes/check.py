"""Compare a KG's two stores in full, and repair what differs.

Neo4j is the store of record; Milvus must hold exactly one vector per entity, relation, type and alias of the KG,
embedded from its current text (an alias's id is made of its entity and its text, so a present alias id is
up to date). :func:`check_stores` compares

* counts per kind (and rows stored twice under one id),
* ids: every id of Neo4j against every id of Milvus (read in pages, kept as int64 arrays: 8 bytes an id),
* texts: relation and type vectors carry the name they were embedded from, compared with the catalog's; entity
  vectors carry no text, so with ``deep=True`` every entity's text is embedded again and compared with its stored
  vector (costly: the embedder's speed), otherwise only the entities a change set left queued are,
* the change-set queue: vector work a killed run left (see :mod:`engine.changes.apply`),
* relation catalog entries that no triple of the KG uses any more,

and with ``repair=True`` makes Milvus (and the catalog) agree: missing or stale vectors are embedded, extra ones
deleted, duplicates removed, unused catalog entries dropped, the queue worked off.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from engine._cypher import cypher

from .apply import ApplyReport, ChangeApplier, entity_text, sync_alias_vectors, sync_vectors, unused_types

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import TextEmbedder
    from engine.stores.graph import GraphStore
    from engine.stores.vectors import VectorStore

#: ids of one kind shown per difference in a report
SHOWN = 5
#: an entity vector farther than this (Euclidean, normalized vectors) from its text's embedding is stale
STALE_DISTANCE = 1e-3
_PAGE = 10_000


@dataclass
class CheckReport:
    """What differs between the stores (all zero and empty: they agree) and what a repair did."""

    kg: str = ""
    neo4j: dict[str, int] = field(default_factory=dict)
    milvus: dict[str, int] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)  # ids in Neo4j without a vector
    extra: dict[str, int] = field(default_factory=dict)  # vectors whose id is not in Neo4j
    stale: dict[str, int] = field(default_factory=dict)  # vectors embedded from another text
    duplicates: dict[str, int] = field(default_factory=dict)  # rows stored twice under one id
    examples: dict[str, list[int]] = field(default_factory=dict)
    queued: int = 0  # ids a change set queued for the vector side and that are not done yet
    unused_relations: list[str] = field(default_factory=list)  # catalog entries no triple uses
    texts_checked: dict[str, int] = field(default_factory=dict)
    deep: bool = False
    repaired: bool = False
    upserted: int = 0
    deleted: int = 0
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether the stores agreed (before any repair)."""
        return not (any(self.missing.values()) or any(self.extra.values()) or any(self.stale.values())
                    or any(self.duplicates.values()) or self.queued or self.unused_relations)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}

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
        if self.queued:
            out.append(f"  {self.queued:,} ids queued by an unfinished change set")
        if self.unused_relations:
            out.append(f"  relation catalog entries no triple uses: {', '.join(self.unused_relations)}")
        if self.repaired:
            out.append(f"  repaired: {self.upserted:,} vectors embedded, {self.deleted:,} deleted")
        return out


def _neo4j_ids(graph: GraphStore) -> dict[str, np.ndarray]:
    """Every id of the KG per kind, sorted (entities read in eid pages)."""
    parts: list[np.ndarray] = []
    last = -(1 << 63)
    while True:
        rows = graph.read_named("entities_page", kg=graph.kg, last=last, limit=_PAGE)
        if not rows:
            break
        parts.append(np.fromiter((r["eid"] for r in rows), dtype=np.int64, count=len(rows)))
        last = rows[-1]["eid"]
    ents = np.concatenate(parts) if parts else np.empty(0, np.int64)
    cat = graph.read_named("check_catalog", kg=graph.kg)
    rels = np.asarray(sorted(r["id"] for r in cat if r["kind"] == "relations"), dtype=np.int64)
    types = np.asarray(sorted(r["id"] for r in cat if r["kind"] == "types"), dtype=np.int64)
    aliases = np.asarray(sorted(_alias_owners(graph)), dtype=np.int64)
    return {"entities": np.sort(ents), "relations": rels, "types": types, "aliases": aliases}


def _alias_owners(graph: GraphStore) -> dict[int, int]:
    """aid -> eid of every alias of the KG (what the aliases collection must hold)."""
    from engine.stores.graph import alias_id

    return {alias_id(graph.kg, r["eid"], a): r["eid"] for r in graph.read_named("check_aliases", kg=graph.kg)
            for a in r["aliases"]}


def _milvus_ids(vectors: VectorStore, kind: str, rows: int) -> np.ndarray:
    """Every stored id of ``kind`` (``rows``: the collection's row count; a small one is read in one query)."""
    if rows <= vectors.query_limit:
        return np.unique(np.asarray(vectors.all_ids(kind), dtype=np.int64))
    parts = list(vectors.iter_ids(kind))
    return np.unique(np.concatenate(parts)) if parts else np.empty(0, np.int64)


def _stale_entities(graph: GraphStore, vectors: VectorStore, embedder: TextEmbedder, eids: np.ndarray,
                    progress: bool) -> list[int]:
    """Entities whose stored vector is not the embedding of their current text."""
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
    queued: dict[str, list[int]] = {"entities": [], "relations": [], "types": []}
    if state:
        queued = {"entities": list(state[0]["pending_entities"]), "relations": list(state[0]["pending_relations"]),
                  "types": list(state[0]["pending_types"])}
    rep.queued = sum(len(v) for v in queued.values())
    ids = _neo4j_ids(graph)
    fix: dict[str, set[int]] = {k: set() for k in ids}
    gone: dict[str, list[int]] = {k: [] for k in ids}
    existing = set(vectors.existing_kinds())
    for kind, want in ids.items():
        rows = vectors.count(kind) if kind in existing else 0
        have = _milvus_ids(vectors, kind, rows) if kind in existing else np.empty(0, np.int64)
        rep.neo4j[kind] = len(want)
        rep.milvus[kind] = len(have)
        rep.duplicates[kind] = max(0, rows - len(have))
        missing = np.setdiff1d(want, have, assume_unique=True)
        extra = np.setdiff1d(have, want, assume_unique=True)
        rep.missing[kind], rep.extra[kind] = len(missing), len(extra)
        rep.examples[f"missing_{kind}"] = missing[:SHOWN].tolist()
        rep.examples[f"extra_{kind}"] = extra[:SHOWN].tolist()
        fix[kind].update(missing.tolist())
        gone[kind] = extra.tolist()
        present = np.intersect1d(want, have, assume_unique=True)
        if kind == "entities":
            sample = present if deep else np.intersect1d(present, np.asarray(sorted(queued[kind]), np.int64))
            stale = _stale_entities(graph, vectors, embedder, sample, progress) if len(sample) else []
            rep.texts_checked[kind] = len(sample)
        elif kind == "aliases":
            stale = []  # an alias's id is made of its text
            rep.texts_checked[kind] = len(present)
        else:
            names = {r["id"]: r["name"] for r in graph.read_named("check_catalog", kg=graph.kg) if r["kind"] == kind}
            stored = vectors.get_names(kind, present.tolist()) if len(present) else {}
            stale = [i for i in present.tolist() if stored.get(i) != names.get(i)]
            rep.texts_checked[kind] = len(present)
        rep.stale[kind] = len(stale)
        rep.examples[f"stale_{kind}"] = stale[:SHOWN]
        fix[kind].update(stale)
    rep.unused_relations = _unused_relations(graph)
    if repair:
        rep.repaired = True
        for kind in ids:
            if rep.duplicates[kind]:
                rep.deleted += vectors.remove_duplicates(kind)
        if rep.unused_relations:
            dropped = graph.write_tx([(cypher("changes_drop_relations"),
                                       {"kg": graph.kg, "types": rep.unused_relations})])[0]
            gone["relations"].extend(r["rid"] for r in dropped)
        for kind in ids:
            if gone[kind]:
                vectors.delete(kind, gone[kind])
                rep.deleted += len(gone[kind])
        # the stale and missing ones, and what a change set queued, embedded from what Neo4j holds now
        up, de = sync_vectors(graph, vectors, embedder, fix["entities"] | set(queued["entities"]),
                              fix["relations"] | set(queued["relations"]), fix["types"] | set(queued["types"]))
        rep.upserted += up
        rep.deleted += de
        if fix["aliases"]:  # the entities of missing alias vectors: theirs embedded again
            owners = _alias_owners(graph)
            eids = sorted({owners[a] for a in fix["aliases"] if a in owners})
            held = graph.read_named("changes_texts", eids=eids, kg=graph.kg)
            up, de = sync_alias_vectors(vectors, embedder, graph.kg, eids,
                                        {r["eid"]: list(r["aliases"]) for r in held})
            rep.upserted += up
            rep.deleted += de
        if rep.queued:
            ChangeApplier(graph, None, None, progress=False).catch_up_vectors(ApplyReport())
        vectors.ensure_ready()
        graph.invalidate()
    rep.wall_s = time.perf_counter() - t0
    return rep


__all__ = ["CheckReport", "check_stores", "STALE_DISTANCE"]
