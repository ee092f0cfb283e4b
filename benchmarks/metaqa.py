"""MetaQA retrieval benchmark (SimGRAG's setting: k(n) = k(r) = 16, k = 3).

    python benchmarks/metaqa.py --split dev --hops 1,2,3 --pattern gold [--limit N] [--oracle]
    python benchmarks/metaqa.py --pattern learned [--limit N] [--split test --data DIR] [--no-router]
    python benchmarks/metaqa.py --smoke     # 4 demo questions a hop on a few hundred demo triples, KG dropped after

``--pattern learned``: no gold pattern and no LLM. The pattern generator is trained on 80% of dev (its gold
patterns from the question types) and answers the other 20% (``--split test``: trained on the whole dev split,
tested on ``qa_test.txt`` with its ``qa_test_qtype.txt`` from ``--data DIR``) as plain text, brackets removed;
the same questions are answered with their gold patterns, and the router is measured with the scripted test LLM
(benchmarks/_learned.py). The last line then has ``hits1``, ``hits1_gold``, ``linking_acc``, ``pattern_acc`` per
hop and ``p50_ms`` per stage (link, generate, embed, vector, graph, total).

For each question the gold pattern is built from its question type (qa_*_qtype.txt) and topic entity; the
top-ranked answer entity of ``Engine.retrieve`` is checked against the gold answers (Hits@1), and the top-3
(Hits@3). Matching reads the pattern as MetaQA does (``--injective edges``: distinct relationships, answers
apart from the topic entity; ``nodes`` is the engine's default). Latency per stage (embed, vector, graph, total).
``--misses FILE`` writes every Hits@1 miss for inspection. ``--oracle`` also runs the exhaustive Cypher
oracle on the same candidates and reports agreement and speedup. Loads the KB first when the store lacks it.
The last line is one JSON object (also benchmarks/results/metaqa.json).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import _common  # noqa: F401 - sys.path and the environment, on import
from _common import DATA as _DATA
from _common import drop_kg, emit, parse_args, peak_rss_mb, percentile, smoke_metaqa, start_servers

DATA = _DATA / "metaqa"


def read_questions(hop: int, split: str, limit: int | None, data: Path = DATA) -> list[dict[str, Any]]:
    from engine.datasets.metaqa import read_questions as read_metaqa

    folder = data / f"{hop}-hop"
    return read_metaqa(folder / f"qa_{split}.txt", qtypes=folder / f"qa_{split}_qtype.txt", limit=limit, hops=hop)


def norm(s: str) -> str:
    return " ".join(s.lower().split())


def path_ceilings(kb: str, questions: list[dict[str, Any]]) -> tuple[float, float]:
    """Two ceilings from following each question's gold relation path on this KB (MetaQA's convention,
    relations direction-agnostic):

    * reach: the share of questions where the path reaches a gold answer -- what any method that follows the
      question's path can reach (the reconstructed KB lacks triples some questions need: "Fight Club" has no
      directed_by);
    * ties: the expected Hits@1 when the top answer is drawn at random among the path's answers, all of which
      an exact match ranks at GSD 0 -- what any ranking by GSD can expect (the KB also has triples MetaQA's
      answers do not know of, e.g. five films "directed_by Alan Cumming" for a gold answer of one).
    """
    from engine.datasets.metaqa import follow_path

    adj: dict[tuple[str, str], set[str]] = {}
    with open(kb, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("|")
            if len(parts) != 3:
                continue
            h, r, t = parts
            adj.setdefault((h, r), set()).add(t)
            adj.setdefault((t, r), set()).add(h)
    reach, ties = 0, 0.0
    for q in questions:
        reached = {norm(a) for a in follow_path(lambda e, r: adj.get((e, r), ()), q["topic"], q["qtype"])}
        good = reached & {norm(a) for a in q["answers"]}
        reach += bool(good)
        ties += len(good) / len(reached) if reached else 0.0
    n = max(len(questions), 1)
    return reach / n, ties / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", default="dev")
    ap.add_argument("--hops", default="1,2,3")
    ap.add_argument("--pattern", choices=["gold", "llm", "learned"], default="gold")
    ap.add_argument("--data", default=str(DATA), help="MetaQA folder ({1,2,3}-hop/qa_<split>.txt and its qtypes)")
    ap.add_argument("--seed", type=int, default=42, help="--pattern learned: the split's and the training's seed")
    ap.add_argument("--no-router", action="store_true", help="--pattern learned: skip the router measurement")
    ap.add_argument("--limit", type=int, default=None, help="first N questions per hop")
    ap.add_argument("--kg", default="metaqa")
    ap.add_argument("--kb", default=str(DATA / "kb.txt"))
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--k-node", type=int, default=16)
    ap.add_argument("--k-rel", type=int, default=16)
    ap.add_argument("--injective", choices=["nodes", "edges", "none"], default="edges",
                    help="what must be distinct: edges (default here: MetaQA's answers are relationship walks, so an "
                         "answer may be an intermediate entity, e.g. the writer who also directed), nodes (the "
                         "engine's default, subgraph isomorphism), none (homomorphism)")
    ap.add_argument("--homomorphic", action="store_true",
                    help="allow one KG node for two pattern nodes (MetaQA's answers may repeat an intermediate)")
    ap.add_argument("--oracle", action="store_true", help="also run the exhaustive oracle (agreement, speedup)")
    ap.add_argument("--misses", default=None,
                    help="write every Hits@1 miss (question, gold, answers) to this JSON Lines file")
    args = parse_args(ap, {"data": lambda a: str(smoke_metaqa()), "kb": lambda a: str(smoke_metaqa() / "kb.txt"),
                           "kg": "bench_smoke_metaqa", "limit": 4})

    from engine.datasets.metaqa import gold_pattern

    neo, mil = start_servers()
    from engine import EngineConfig, MatchSettings, MilvusSettings, Neo4jSettings
    from engine import Engine

    cfg = EngineConfig(kg=args.kg, neo4j=Neo4jSettings.from_env(uri=neo), milvus=MilvusSettings(uri=mil),
                       match=MatchSettings(k_node=args.k_node, k_rel=args.k_rel, k=args.k,
                                         injective="none" if args.homomorphic else args.injective))
    eng = Engine(cfg)
    st = eng.graph.stats()
    if st["entities"] == 0 or not eng.stats()["agree"]:
        print(f"loading {args.kb} into KG {args.kg!r} ...", flush=True)
        eng.load(args.kb)
    llm = None
    if args.pattern == "llm":
        from engine.llm import make_llm

        llm = make_llm()
        if llm is None:
            raise SystemExit("--pattern llm needs an LLM endpoint: set ISORAG_LLM_BASE_URL and ISORAG_LLM_MODEL")
    # warm-up: model, connections, caches
    eng.retrieve(gold_pattern("movie_to_director", "Inception"))
    if args.pattern == "learned":
        run_learned_mode(eng, args)
        return

    hits1: dict[str, float] = {}
    hits3: dict[str, float] = {}
    per_stage: dict[str, list[float]] = {"embed": [], "vector": [], "graph": [], "total": []}
    oracle_agree, oracle_n, oracle_ms, matcher_ms = 0, 0, [], []
    n_total, t_all = 0, 0.0
    counts: dict[str, int] = {}
    ceiling: dict[str, float] = {}
    tie_ceiling: dict[str, float] = {}
    misses = open(args.misses, "w", encoding="utf-8") if args.misses else None
    for hop in [int(h) for h in args.hops.split(",")]:
        qs = read_questions(hop, args.split, args.limit, Path(args.data))
        h1 = h3 = 0
        for q in qs:
            pattern = gold_pattern(q["qtype"], q["topic"])
            t0 = time.perf_counter()
            if llm is not None:
                res = eng.ask(q["question"].replace("[", "").replace("]", ""), k=args.k).retrieval
            else:
                res = eng.retrieve(pattern, k=args.k)
            t_all += time.perf_counter() - t0
            for stage in per_stage:
                per_stage[stage].append(res.timings.get(stage, 0.0))
            gold = {norm(a) for a in q["answers"]}
            names = [norm(a.entity.name) for a in res.answers]
            h1 += bool(names) and names[0] in gold
            if misses is not None and not (names and names[0] in gold):
                misses.write(json.dumps({
                    "hop": hop, "qtype": q["qtype"], "question": q["question"], "gold": sorted(gold)[:20],
                    "answers": [[a.entity.name, round(a.gsd, 4)] for a in res.answers[:5]],
                    "gsd": [round(s.gsd, 4) for s in res.subgraphs],
                    "subgraphs": [[list(t.as_tuple()) for t in s.triples] for s in res.subgraphs[:3]],
                }) + "\n")
            h3 += any(n in gold for n in names[:3])
            if args.oracle:
                from engine.retrieval.matcher import Matcher
                from engine.retrieval.oracle import oracle_matches

                pat = res.pattern
                cands = eng.retriever.candidates(pat, cfg.match, {})
                t1 = time.perf_counter()
                got, _ = Matcher(eng.graph, cfg.match).top_k(pat, cands, args.k)
                t2 = time.perf_counter()
                want = oracle_matches(eng.graph, pat, cands, limit=args.k, injective=cfg.match.injective,
                                      directed=cfg.match.directed)
                t3 = time.perf_counter()
                matcher_ms.append((t2 - t1) * 1000)
                oracle_ms.append((t3 - t2) * 1000)
                oracle_n += 1
                oracle_agree += [round(m.gsd, 6) for m in got] == [round(m.gsd, 6) for m in want]
        n = max(len(qs), 1)
        hits1[str(hop)] = round(h1 / n, 4)
        hits3[str(hop)] = round(h3 / n, 4)
        reach, ties = path_ceilings(args.kb, qs)
        ceiling[str(hop)] = round(reach, 4)
        tie_ceiling[str(hop)] = round(ties, 4)
        counts[str(hop)] = len(qs)
        n_total += len(qs)
        print(f"{hop}-hop: {len(qs)} questions  Hits@1 {h1 / n:.4f}  Hits@3 {h3 / n:.4f}  "
              f"(on this KB the gold path reaches an answer for {ceiling[str(hop)]:.4f}; a random pick among "
              f"its answers hits {tie_ceiling[str(hop)]:.4f})", flush=True)
    p50 = {k: round(percentile(v, 50), 2) for k, v in per_stage.items()}
    p95 = {k: round(percentile(v, 95), 2) for k, v in per_stage.items()}
    print(f"latency p50 (ms): {p50}\nlatency p95 (ms): {p95}")
    result: dict[str, Any] = {
        "split": args.split, "pattern": args.pattern, "injective": "none" if args.homomorphic else args.injective,
        "k": args.k, "k_node": args.k_node, "k_rel": args.k_rel, "questions": counts, "hits1": hits1, "hits3": hits3,
        "path_ceiling": ceiling, "tie_ceiling": tie_ceiling, "p50_ms": p50, "p95_ms": p95,
        "qps": round(n_total / t_all, 2) if t_all else None, "peak_rss_mb": round(peak_rss_mb(), 1),
    }
    if args.oracle:
        result["oracle"] = {
            "queries": oracle_n, "agreement": round(oracle_agree / max(oracle_n, 1), 4),
            "matcher_p50_ms": round(percentile(matcher_ms, 50), 2),
            "oracle_p50_ms": round(percentile(oracle_ms, 50), 2),
            "speedup_p50": round(percentile(oracle_ms, 50) / max(percentile(matcher_ms, 50), 1e-9), 2),
        }
        print(f"oracle: {result['oracle']}")
    if misses is not None:
        misses.close()
    if args.smoke:
        drop_kg(eng)
    eng.close()
    emit("metaqa", result)


def run_learned_mode(eng: Any, args: argparse.Namespace) -> None:
    from _learned import print_summary, run_learned, split
    from engine.datasets.metaqa import gold_pattern

    from engine.retrieval.pattern import Pattern

    data = Path(args.data)
    hops = [int(h) for h in args.hops.split(",")]

    def items(split_name: str, limit: int | None) -> list[dict[str, Any]]:
        out = []
        for hop in hops:
            for q in read_questions(hop, split_name, limit, data):
                out.append({**q, "text": q["question"].replace("[", "").replace("]", ""),
                            "gold": Pattern.from_json(gold_pattern(q["qtype"], q["topic"]))})
        return out

    if args.split == "test":
        train, test = items("dev", None), items("test", args.limit)
    else:
        train, test = [], []
        for hop in hops:  # 80/20 within each hop
            per = [q for q in items(args.split, args.limit) if q["hops"] == hop]
            a, b = split(per, 0.8, args.seed)
            train += a
            test += b
    for q in train + test:
        q["hop"] = q["hops"]
    result = run_learned(eng, train, test, name="metaqa", k=args.k, seed=args.seed, router=not args.no_router)
    print_summary(result)
    result = {"split": args.split, "pattern": "learned", "injective": args.injective, "k": args.k, **result,
              "peak_rss_mb": round(peak_rss_mb(), 1)}
    if args.smoke:
        drop_kg(eng)
    eng.close()
    emit("metaqa_learned", result)


if __name__ == "__main__":
    main()
