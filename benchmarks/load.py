"""Load a KB into Neo4j and Milvus and measure it.

    python benchmarks/load.py --kb ../shared/data/metaqa/kb.txt [--limit N] [--kg NAME] [--keep]

Prints triples/s into Neo4j, entities/s embedded into Milvus, the whole load's wall time and peak memory;
the last line is one JSON object (also written to benchmarks/results/load.json).
"""

from __future__ import annotations

import argparse
import itertools
import time

import _common  # noqa: F401  (sys.path, env)
from _common import emit, peak_rss_mb, server_rss_mb, start_servers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kb", default="../shared/data/metaqa/kb.txt")
    ap.add_argument("--format", default=None)
    ap.add_argument("--limit", type=int, default=None, help="first N lines only")
    ap.add_argument("--kg", default="bench_load")
    ap.add_argument("--batch-size", type=int, default=10_000)
    ap.add_argument("--keep", action="store_true", help="keep the KG afterwards (default: drop it)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()

    neo, mil = start_servers()
    from engine._config import EngineConfig, MilvusSettings, Neo4jSettings
    from engine._engine import Engine
    from loaders import detect_format, open_source
    from loaders.bulk import BulkLoader, LoadSummary, _Skips

    eng = Engine(EngineConfig(kg=args.kg, neo4j=Neo4jSettings.from_env(uri=neo), milvus=MilvusSettings(uri=mil)))
    t_model = time.perf_counter()
    emb = eng.embedder
    emb.encode(["warm up"])
    model_s = time.perf_counter() - t_model
    eng.drop()  # a fresh KG: the figures are for a first load
    loader = BulkLoader(eng.graph, eng.vectors, emb, batch_size=args.batch_size, progress=not args.quiet)
    summary = LoadSummary(path=args.kb, kg=args.kg)
    fmt = args.format or detect_format(args.kb)
    records = open_source(args.kb, fmt, on_skip=_Skips(summary))
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
    }
    if not args.keep:
        eng.drop()
    eng.close()
    emit("load", result)


if __name__ == "__main__":
    main()
