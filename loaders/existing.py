"""Use a graph that is already in Neo4j: adopt its nodes as KG entities in place and embed them into Milvus.

The user names the label and the key (and name) properties. Adoption only adds to the user's graph (docs/security.md):
each node gets isorag's ``:IsoragEntity`` label and ``isorag_*`` properties (``isorag_eid``, ``isorag_kg``,
``isorag_key``, ``isorag_name``, ``isorag_name_key``, ``isorag_types``, ``isorag_adopted``, and
``isorag_aliases`` when an aliases property is named: a list of strings, or one string); its own properties
(``name``, ``key``, an ``eid`` of its own...), labels and relationships are never written. The relationships between
adopted nodes stay as they are and their types become the KG's relation catalog (name = the type). ``drop`` gives
the nodes back as they were (:meth:`engine.stores.graph.GraphStore.drop`).

Before anything is written the label is surveyed: key values held by several nodes (a key names one entity) and
nodes another KG has adopted are refused with a typed error; nodes without a usable key (missing, a list or a map)
are skipped and counted. Re-running adopts only nodes not adopted yet and embeds only what has no vector yet, so it
is resumable like a file load.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from engine._cypher import cypher, label as label_slot, render
from engine._errors import ConfigError, InputError
from engine.stores.graph import GraphStore, entity_id, name_key, relation_id
from engine.stores.texts import entity_text
from loaders.bulk import LoadSummary, embed_aliases, remove_duplicate_vectors

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import TextEmbedder
    from engine.stores.vectors import VectorStore


def _survey(graph: GraphStore, label: str, key: str, summary: LoadSummary) -> None:
    """Refuse a label that cannot be adopted as it is; count the nodes that will be skipped."""
    slot = {"label": label_slot(label)}
    row = graph.read(render("existing_survey", **slot), key=key, kg=graph.kg)[0]
    if row["other_kg"]:
        raise InputError(
            f"{row['other_kg']:,} node(s) of label {label!r} already belong to another KG "
            f"({', '.join(map(repr, row['other_kgs']))}): a node can be adopted by one KG only")
    dup = graph.read(render("existing_duplicate_keys", **slot), key=key)[0]
    if dup["keys"]:
        shown = ", ".join(f"{k!r} ({c} nodes)" for k, c in dup["examples"])
        raise InputError(
            f"{dup['keys']:,} value(s) of key property {key!r} are held by several nodes of label {label!r}, "
            f"e.g. {shown}: a key must name one entity (choose a unique --key-prop); nothing was written")
    if row["no_key"]:
        reason = f"node of label {label} without a usable {key!r} property (missing, a list or a map)"
        summary.lines_skipped += row["no_key"]
        summary.skip_reasons[reason] = row["no_key"]


def embed_existing(graph: GraphStore, vectors: VectorStore, embedder: TextEmbedder, *, label: str, key: str,
                   name: str | None = None, progress: bool = True, batch_size: int = 10_000,
                   aliases: str | None = None) -> LoadSummary:
    """Adopt the nodes of ``label`` into the KG of ``graph`` and embed them, holding the KG's writer lease
    (``aliases``: the property holding each node's other names, embedded like names)."""
    with graph.lock(f"adopt label {label}"):
        return _embed_existing(graph, vectors, embedder, label=label, key=key, name=name, progress=progress,
                               batch_size=batch_size, aliases=aliases)


def _embed_existing(graph: GraphStore, vectors: VectorStore, embedder: TextEmbedder, *, label: str, key: str,
                    name: str | None, progress: bool, batch_size: int, aliases: str | None = None) -> LoadSummary:
    from tqdm import tqdm

    t_start = time.perf_counter()
    graph.ensure_schema()
    labels = graph.read_named("existing_labels")[0]["labels"]
    if label not in labels:
        raise ConfigError(f"label {label!r} is not in the Neo4j database at {graph.uri} (labels: {sorted(labels)})")
    summary = LoadSummary(path=f"neo4j:{label}", kg=graph.kg)
    _survey(graph, label, key, summary)
    vectors.ensure_collections()
    q = render("existing_batch", label=label_slot(label))
    bar = tqdm(desc="adopt+embed (entities)", unit="ent", disable=not progress, file=sys.stderr)
    while True:
        t0 = time.perf_counter()
        rows = graph.read(q, key=key, name=name or key, aliases=aliases, limit=batch_size)
        if not rows:
            break
        adopt = [{"id": r["id"], "eid": entity_id(graph.kg, r["key"]), "key": r["key"], "name": r["name"],
                  "name_key": name_key(r["name"]),
                  "aliases": list(dict.fromkeys(a for a in r["aliases"] if a and a != r["name"]))} for r in rows]
        graph.write(cypher("existing_adopt"), rows=adopt, kg=graph.kg)
        summary.graph_s += time.perf_counter() - t0
        summary.entities_created += len(adopt)
        _embed_missing(vectors, embedder, [(a["eid"], a["name"]) for a in adopt], summary)
        embed_aliases(vectors, embedder, graph.kg, {a["eid"]: a["aliases"] for a in adopt if a["aliases"]}, summary)
        bar.update(len(adopt))
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
    # nodes adopted earlier whose vectors a killed run never wrote
    _embed_unvectored(graph, vectors, embedder, summary, batch_size)
    bar.close()
    vectors.finalize()
    summary.duplicates_removed = remove_duplicate_vectors(graph, vectors)
    summary.relations = len(graph.relation_catalog(refresh=True))
    summary.wall_s = time.perf_counter() - t_start
    return summary


def _embed_missing(vectors: VectorStore, embedder: TextEmbedder, items: list[tuple[int, str]],
                   summary: LoadSummary) -> None:
    have = vectors.existing_ids("entities", [i for i, _ in items])
    miss = [(i, n) for i, n in items if i not in have]
    if miss:
        t0 = time.perf_counter()
        texts = [n for _, n in miss]
        vecs = embedder.encode(texts)
        summary.embed_s += time.perf_counter() - t0
        vectors.upsert("entities", [i for i, _ in miss], vecs, texts=texts)
        summary.embedded_entities += len(miss)


def _embed_unvectored(graph: GraphStore, vectors: VectorStore, embedder: TextEmbedder, summary: LoadSummary,
                      batch: int) -> None:
    """A resumed run: entities adopted before the kill may have no vector yet."""
    if vectors.count("entities") >= graph.stats()["entities"]:
        return
    last = -(1 << 63)
    while True:
        rows = graph.read_named("entities_page", kg=graph.kg, last=last, limit=batch)
        if not rows:
            break
        _embed_missing(vectors, embedder, [(r["eid"], entity_text(r["name"], r["description"])) for r in rows],
                       summary)
        last = rows[-1]["eid"]
