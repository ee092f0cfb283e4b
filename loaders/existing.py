"""Use a graph that is already in Neo4j: adopt its nodes as KG entities in place and embed them into Milvus.

The user names the label and the key (and name) properties. Nodes get the ``:Entity`` label and the engine's
ids (``eid``, ``kg``, ``key``, ``name``); relationships stay as they are, and their types become the KG's
relation catalog (name = the type). Re-running adopts only nodes without an ``eid`` and embeds only what has
no vector yet, so it is resumable like a file load.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from engine._cypher import cypher, escape_identifier, render
from engine._errors import ConfigError
from engine.graph import GraphStore, entity_id, relation_id
from loaders.bulk import LoadSummary


def embed_existing(graph: GraphStore, vectors: Any, embedder: Any, *, label: str, key: str,
                   name: str | None = None, progress: bool = True, batch_size: int = 10_000) -> LoadSummary:
    from tqdm import tqdm

    t_start = time.perf_counter()
    graph.ensure_schema()
    vectors.ensure_collections()
    labels = graph.read_named("existing_labels")[0]["labels"]
    if label not in labels:
        raise ConfigError(f"label {label!r} is not in the Neo4j database at {graph.uri} (labels: {sorted(labels)})")
    summary = LoadSummary(path=f"neo4j:{label}", kg=graph.kg)
    q = render("existing_batch", label=":" + escape_identifier(label))
    bar = tqdm(desc="adopt+embed (entities)", unit="ent", disable=not progress, file=sys.stderr)
    while True:
        t0 = time.perf_counter()
        rows = graph.read(q, key=key, name=name or key, limit=batch_size)
        if not rows:
            break
        adopt = [{"id": r["id"], "eid": entity_id(graph.kg, r["key"]), "key": r["key"], "name": r["name"]}
                 for r in rows]
        graph.write(cypher("existing_adopt"), rows=adopt, kg=graph.kg)
        summary.graph_s += time.perf_counter() - t0
        summary.entities_created += len(adopt)
        _embed_missing(vectors, embedder, [(a["eid"], a["name"]) for a in adopt], summary)
        bar.update(len(adopt))
    # nodes adopted earlier whose vectors a killed run never wrote
    types = [r["type"] for r in graph.read_named("existing_rel_types", kg=graph.kg)]
    if types:
        graph.merge_relation_types([{"rid": relation_id(graph.kg, t), "name": t, "type": t} for t in types])
        ids = [relation_id(graph.kg, t) for t in types]
        have = vectors.existing_ids("relations", ids)
        miss = [(i, t) for i, t in zip(ids, types) if i not in have]
        if miss:
            vecs = embedder.encode([t for _, t in miss])
            vectors.upsert("relations", [i for i, _ in miss], vecs, names=[t for _, t in miss])
            summary.embedded_relations += len(miss)
    _embed_unvectored(graph, vectors, embedder, summary, batch_size)
    bar.close()
    vectors.finalize()
    summary.relations = len(graph.relation_catalog(refresh=True))
    summary.wall_s = time.perf_counter() - t_start
    return summary


def _embed_missing(vectors: Any, embedder: Any, items: list[tuple[int, str]], summary: LoadSummary) -> None:
    have = vectors.existing_ids("entities", [i for i, _ in items])
    miss = [(i, n) for i, n in items if i not in have]
    if miss:
        t0 = time.perf_counter()
        vecs = embedder.encode([n for _, n in miss])
        summary.embed_s += time.perf_counter() - t0
        vectors.upsert("entities", [i for i, _ in miss], vecs)
        summary.embedded_entities += len(miss)


def _embed_unvectored(graph: GraphStore, vectors: Any, embedder: Any, summary: LoadSummary, batch: int) -> None:
    """A resumed run: entities adopted before the kill may have no vector yet."""
    if vectors.count("entities") >= graph.stats()["entities"]:
        return
    last = -1
    while True:
        rows = graph.read(
            "MATCH (n:Entity {kg: $kg}) WHERE n.eid > $last RETURN n.eid AS eid, n.name AS name "
            "ORDER BY n.eid LIMIT $limit", kg=graph.kg, last=last, limit=batch)
        if not rows:
            break
        _embed_missing(vectors, embedder, [(r["eid"], r["name"] or "") for r in rows], summary)
        last = rows[-1]["eid"]
