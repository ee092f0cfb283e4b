"""Load a KB into Neo4j and Milvus and measure it.

    python benchmarks/load.py --kb ../shared/data/metaqa/kb.txt [--limit N] [--kg NAME] [--keep]
                              [--graph-only] [--recall N]
    python benchmarks/load.py --smoke       # a few hundred triples of the bundled demo, --graph-only --recall 20

Prints triples/s into Neo4j, entities/s embedded into Milvus, the whole load's wall time and peak memory;
the last line is one JSON object (also written to benchmarks/results/load.json). The graph stage runs
beside the embeddings, so ``graph_triples_per_s`` is measured while the embedder competes for the CPU;
``--graph-only`` loads the graph alone (no Milvus, no embedding) into ``<kg>_graph`` first and reports
``graph_only_triples_per_s``. ``--recall N`` searches N perturbed entity names (lowercased or a character
dropped) at k = 16, 64, 1024 and reports the recall of Milvus' index against exact search (ties counted).
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import time
from typing import Any

import _common  # noqa: F401 - sys.path and the environment, on import
from _common import DATA, drop_kg, emit, parse_args, peak_rss_mb, server_rss_mb, smoke_metaqa, start_servers


def graph_only_run(args: argparse.Namespace, neo: str) -> dict[str, Any]:
    """The graph stage alone (parse + Neo4j writes, no embedding) into KG <kg>_graph, dropped after."""
    from engine import Neo4jSettings
    from engine.stores.graph import GraphStore
    from loaders import detect_format, open_source
    from loaders.bulk import BulkLoader, LoadSummary, skip_log

    g = GraphStore(Neo4jSettings.from_env(uri=neo), args.kg + "_graph")
    g.drop()
    g.ensure_schema()
    loader = BulkLoader(g, None, None, batch_size=args.batch_size, progress=False)
    summary = LoadSummary(path=args.kb, kg=g.kg)
    records = open_source(args.kb, args.format or detect_format(args.kb), on_skip=skip_log(summary))
    if args.limit:
        records = itertools.islice(records, args.limit)
    t0 = time.perf_counter()
    loader.load_records(records, summary)
    wall = time.perf_counter() - t0
    g.drop()
    print(f"graph only: {summary.triples:,} triples in {wall:.1f} s", flush=True)
    return {"graph_only_s": round(wall, 2), "graph_only_triples_per_s": round(summary.triples / wall, 1),
            "graph_only_load_avg": [round(x, 2) for x in os.getloadavg()]}


def measure_recall(eng: Any, emb: Any, n: int) -> dict[str, Any]:
    """Recall of Milvus' entity index against exact search, for perturbed entity names (ties counted)."""
    import numpy as np

    rows = eng.graph.read_named("entities_page", kg=eng.kg, last=-1, limit=1 << 62)
    eids = np.array([r["eid"] for r in rows], dtype=np.int64)
    stored = eng.vectors.get_vectors("entities", eids)
    mat = np.stack([stored[int(e)] for e in eids])
    rng = random.Random(0)
    queries = []
    for r in rng.sample(rows, min(n, len(rows))):
        name = r["name"] or ""
        if rng.random() < 0.5 and name.lower() != name:
            queries.append(name.lower())
        elif len(name) > 1:
            i = rng.randrange(len(name))
            queries.append(name[:i] + name[i + 1:])
        else:
            queries.append(name + " x")
    q = emb.encode(queries)
    d2 = (q * q).sum(1)[:, None] + (mat * mat).sum(1)[None, :] - 2.0 * q @ mat.T
    row_of = {int(e): i for i, e in enumerate(eids)}
    out: dict[str, Any] = {}
    for k in (16, 64, 1024):
        k_eff = min(k, len(eids))
        kth = np.partition(d2, k_eff - 1, axis=1)[:, k_eff - 1] + 1e-5
        hits = eng.vectors.search("entities", q, k_eff)
        rec = [min(k_eff, sum(1 for h, _ in hs if d2[i, row_of[int(h)]] <= kth[i])) / k_eff
               for i, hs in enumerate(hits)]
        out[f"k{k}"] = {"mean": round(float(np.mean(rec)), 4), "min": round(float(np.min(rec)), 3)}
    out["queries"] = len(queries)
    out["index"] = eng.vectors.index
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kb", default=str(DATA / "metaqa" / "kb.txt"))
    ap.add_argument("--format", default=None)
    ap.add_argument("--limit", type=int, default=None, help="first N lines only")
    ap.add_argument("--kg", default="bench_load")
    ap.add_argument("--batch-size", type=int, default=10_000)
    ap.add_argument("--keep", action="store_true", help="keep the KG afterwards (default: drop it)")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--graph-only", action="store_true", help="also time the graph stage alone")
    ap.add_argument("--recall", type=int, default=0, help="measure the index's recall with N queries")
    args = parse_args(ap, {"kb": lambda a: str(smoke_metaqa() / "kb.txt"), "kg": "bench_smoke_load",
                           "graph_only": True, "recall": 20, "quiet": True})

    neo, mil = start_servers()
    from engine import EngineConfig, MilvusSettings, Neo4jSettings
    from engine import Engine
    from loaders import detect_format, open_source
    from loaders.bulk import BulkLoader, LoadSummary, skip_log

    graph_only = graph_only_run(args, neo) if args.graph_only else {}
    eng = Engine(EngineConfig(kg=args.kg, neo4j=Neo4jSettings.from_env(uri=neo), milvus=MilvusSettings(uri=mil)))
    t_model = time.perf_counter()
    emb = eng.embedder
    emb.encode(["warm up"])
    model_s = time.perf_counter() - t_model
    drop_kg(eng)  # a fresh KG: the figures are for a first load
    loader = BulkLoader(eng.graph, eng.vectors, emb, batch_size=args.batch_size, progress=not args.quiet)
    summary = LoadSummary(path=args.kb, kg=args.kg)
    fmt = args.format or detect_format(args.kb)
    records = open_source(args.kb, fmt, on_skip=skip_log(summary))
    if args.limit:
        records = itertools.islice(records, args.limit)
    t0 = time.perf_counter()
    loader.load_records(records, summary)
    wall = time.perf_counter() - t0
    # a second load of the same data must add nothing
    stats = eng.stats()
    print("\n".join(summary.lines()))
    print(f"stores agree: {stats['agree']}  neo4j {stats['neo4j']}  milvus {stats['milvus']}")
    result = {
        "kb": args.kb,
        "limit": args.limit,
        "wall_s": round(wall, 2),
        "model_load_s": round(model_s, 2),
        "triples": summary.triples,
        "entities": stats["neo4j"]["entities"],
        "relations": stats["neo4j"]["relations"],
        "relationships_created": summary.relationships_created,
        "graph_s": round(summary.graph_s, 2),
        "embed_s": round(summary.embed_s, 2),
        "vector_s": round(summary.vector_s, 2),
        "graph_triples_per_s": round(summary.triples / summary.graph_s, 1) if summary.graph_s else None,
        "embed_entities_per_s": round(summary.embedded_entities / summary.embed_s, 1) if summary.embed_s else None,
        "embedded_entities": summary.embedded_entities,
        "lines_skipped": summary.lines_skipped,
        "stores_agree": stats["agree"],
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "server_rss_mb": {k: round(v, 1) for k, v in server_rss_mb().items()},
        "embedder": getattr(emb, "slug", None),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        **graph_only,
    }
    if args.recall:
        result["recall"] = measure_recall(eng, emb, args.recall)
    if not args.keep:
        drop_kg(eng)
    eng.close()
    emit("load", result)


if __name__ == "__main__":
    main()
