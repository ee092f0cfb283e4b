"""PathQuestion benchmark (PQ-2H, PQ-3H; Zhou et al., COLING 2018): learned patterns against gold paths.

    python benchmarks/pathquestion.py [--hops 2,3] [--limit N] [--injective none] [--no-router] [--data DIR]
                                      [--train-from gold|qa|synth] [--synth-n N] [--kg-prefix P] [--misses FILE]
    python benchmarks/pathquestion.py --smoke    # a made-up world of 24 people, 2H and 3H, KGs dropped after

Each file's KB is loaded into its own KG (``learned_pq2``, ``learned_pq3``; ``--drop`` removes them at the end).
Its questions are split 80/20 (seeded): the pattern generator is trained on the 80% (``--train-from gold``: with the
gold paths as patterns, ``e0#r1#e1#r2#...#<end>#answer``: ``(e0, r1, UNKNOWN 1), (UNKNOWN 1, r2, UNKNOWN 2), ...``;
``qa``: the question-answer pairs alone) or on no PathQuestion question at all (``synth``: ``--synth-n`` samples of
``isorag synth`` on the KG, several wordings each, as a KG with no questions of its own is set up) and answers the
20% in plain text with no LLM; the same questions are answered with their gold patterns (benchmarks/_learned.py).
``--smoke``: a made-up world (24 people, 2H and 3H), 300 synth samples, no router: under a minute.
Matching defaults to ``--injective none``: the gold paths revisit their topic in 6.1% / 24.2% of the questions
(see docs/benchmarks.md), which distinct-node matching cannot follow. SimGRAG with Llama-3-70B reports Hits@1 88.7 (2H)
and 78.6 (3H). The last line is one JSON object (also benchmarks/results/pathquestion.json).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import _common  # noqa: F401 - sys.path and the environment, on import
from _common import DATA as _DATA
from _common import drop_kg, emit, parse_args, peak_rss_mb, smoke_pathquestion, start_servers
from _learned import add_synth_arguments, synth_options

DATA = _DATA / "pathquestion"


def read_pq(path: Path, limit: int | None) -> list[dict[str, Any]]:
    from engine.datasets.questions import pathquestion_path, question_rows
    from engine.retrieval.pattern import Pattern

    out = []
    for _, row in question_rows(path, fmt="pathquestion", limit=limit):
        question, answers, walk = row[0], row[1], row[2]  # type: ignore[misc]  # a PathQuestion row has three
        topic, relations, _ = pathquestion_path(walk)
        nodes = [topic] + [f"UNKNOWN {i}" for i in range(1, len(relations) + 1)]
        gold = Pattern.from_triples([(a, r, b) for a, r, b in zip(nodes, relations, nodes[1:])])
        out.append({"question": question, "text": question, "topic": topic, "answers": answers, "gold": gold,
                    "hop": f"{len(relations)}H"})
    return out


def misses_file(path: Path | None, hop: str) -> Path | None:
    """Where one file's misses go (``--misses``): ``{hop}`` in the name replaced, else ``.<hop>H`` before the
    suffix."""
    if path is None:
        return None
    if "{hop}" in path.name:
        return path.with_name(path.name.replace("{hop}", hop))
    return path.with_name(f"{path.stem}.{hop}H{path.suffix}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hops", default="2,3")
    ap.add_argument("--limit", type=int, default=None, help="first N questions per file")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--injective", choices=["nodes", "edges", "none"], default="none")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--no-router", action="store_true")
    ap.add_argument("--drop", action="store_true", help="drop the benchmark's KGs at the end")
    ap.add_argument("--kg-prefix", default="learned_pq")
    ap.add_argument("--train-from", choices=["gold", "qa", "synth"], default="gold")
    add_synth_arguments(ap, 4000)
    ap.add_argument("--misses", type=Path, default=None,
                    help="write every Hits@1 miss of the learned route to FILE (JSON Lines; '{hop}' in the name "
                         "is each file's hop, else the hop is appended)")
    ap.add_argument("--data", type=Path, default=DATA, help="folder of {2,3}H-kb.txt and PQ-{2,3}H.txt")
    args = parse_args(ap, {"kg_prefix": "bench_smoke_pq", "drop": True, "synth_n": 300, "no_router": True,
                           "data": lambda a: smoke_pathquestion()})

    from _learned import print_summary, run_learned, split, synth_records

    neo, mil = start_servers()
    from engine import EngineConfig, MatchSettings, MilvusSettings, Neo4jSettings
    from engine import Engine

    merged: dict[str, Any] = {}
    for hop in [h.strip() for h in args.hops.split(",")]:
        kg = f"{args.kg_prefix}{hop}"
        cfg = EngineConfig(kg=kg, neo4j=Neo4jSettings.from_env(uri=neo), milvus=MilvusSettings(uri=mil),
                           match=MatchSettings(k=args.k, injective=args.injective))
        eng = Engine(cfg, llm=False)
        kb = args.data / f"{hop}H-kb.txt"
        if eng.graph.stats()["entities"] == 0:
            print(f"loading {kb} into KG {kg!r} ...", flush=True)
            eng.load(kb, progress=False)
        items = read_pq(args.data / f"PQ-{hop}H.txt", args.limit)
        train, test = split(items, 0.8, args.seed)
        records = None
        if args.train_from == "synth":
            shapes = ["path1", "path2"] + (["path3"] if hop == "3" else [])
            records = synth_records(eng, args.synth_n, shapes, args.seed, kg, **synth_options(args))
        result = run_learned(eng, train, test, name=kg, k=args.k, seed=args.seed, router=not args.no_router,
                             train_from=args.train_from, records=records, misses=misses_file(args.misses, hop))
        print_summary(result)
        for key, value in result.items():
            if isinstance(value, dict) and key not in ("p50_ms", "p95_ms", "gold_p50_ms"):
                merged.setdefault(key, {}).update(value if key in ("questions", "hits1", "hits3", "hits1_gold",
                                                                  "hits3_gold", "linking_acc", "pattern_acc",
                                                                  "hits1_gap") else {f"{hop}H": value})
            else:
                merged.setdefault(key, {})[f"{hop}H"] = value
        if args.drop:
            drop_kg(eng)
        eng.close()
    emit("pathquestion", {"pattern": "learned", "train_from": args.train_from, "smoke": args.smoke,
                          "injective": args.injective, "k": args.k, **merged,
                          **({"synth": {"n": args.synth_n, **synth_options(args)}}
                             if args.train_from == "synth" else {}),
                          "simgrag_llama3_70b_hits1": {"2H": 0.887, "3H": 0.786},
                          "peak_rss_mb": round(peak_rss_mb(), 1)})


if __name__ == "__main__":
    main()
