"""MetaQA retrieval benchmark (SimGRAG's setting: k(n) = k(r) = 16, k = 3).

    python benchmarks/metaqa.py --split dev --hops 1,2,3 --pattern gold [--limit N] [--oracle]
    python benchmarks/metaqa.py --pattern learned [--train-from gold|qa|synth] [--limit N] [--split test --data DIR]
                                [--no-router] [--unanswerable FILE] [--smoke]
    python benchmarks/metaqa.py --graph replica,statement,expand [--limit N] [--oracle]
    python benchmarks/metaqa.py --smoke     # 4 demo questions a hop on a few hundred demo triples, every graph
                                            # path and the oracle, KG dropped after

``--pattern learned``: no gold pattern and no LLM. The pattern generator is trained on 80% of dev (``--train-from
gold``: its gold patterns from the question types; ``qa``: the question-answer pairs alone, relation paths found
in the KG; ``synth``: no MetaQA question at all, ``--synth-n`` samples of ``isorag synth`` on the KG, several
wordings each) and answers the other 20% (``--split test``: trained on the whole dev split,
tested on ``qa_test.txt`` with its ``qa_test_qtype.txt`` from ``--data DIR``) as plain text, brackets removed;
the same questions are answered with their gold patterns, and the router is measured with the scripted test LLM
(benchmarks/_learned.py). The last line then has ``hits1``, ``hits1_gold``, ``linking_acc``, ``pattern_acc`` per
hop and ``p50_ms`` per stage (link, generate, embed, vector, graph, total), and ``unanswerable``: the 200 questions
of ``benchmarks/data/metaqa_unanswerable.jsonl``, which the KG cannot answer (written for this benchmark: budgets,
composers, birthplaces...), asked without an LLM (``answered_wrong_share``: how many got an entity as the answer)
and through the router with the scripted LLM (``to_llm_share``, beside ``answerable_to_llm_share``).
``--smoke``: a KG of a few hundred triples cut from the demo KB around 40 demo questions a hop (1 and 2 hops),
20 unanswerable questions, under a minute on a fresh machine.

For each question the gold pattern is built from its question type (qa_*_qtype.txt) and topic entity; the
top-ranked answer entity of ``Engine.retrieve`` is checked against the gold answers (Hits@1), and the top-3
(Hits@3). Matching reads the pattern as MetaQA does (``--injective edges``: distinct relationships, answers
apart from the topic entity; ``nodes`` is the engine's default). Latency per stage (embed, vector, graph, total).
``--misses FILE`` writes every Hits@1 miss for inspection (with ``--pattern learned``, the learned route's: the
beam's templates, what was linked, the gold template). ``--oracle`` also runs the exhaustive Cypher
oracle on the same candidates and reports agreement and speedup. Loads the KB first when the store lacks it.
The last line is one JSON object (also benchmarks/results/metaqa.json).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import _common  # noqa: F401 - sys.path and the environment, on import
from _common import DATA as _DATA
from _common import (DEMO, ROOT, drop_kg, emit, parse_args, peak_rss_mb, percentile, smoke_dir, smoke_metaqa,
                     start_servers)
from _learned import add_synth_arguments, synth_options

DATA = _DATA / "metaqa"
UNANSWERABLE = ROOT / "benchmarks" / "data" / "metaqa_unanswerable.jsonl"


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
    ap.add_argument("--generator", default=None,
                    help="--pattern learned: a generator file trained before (on the same split and seed) instead of "
                         "training one; only the latency of the learned ask against the gold-pattern ask is measured")
    ap.add_argument("--embed-threads", default=None,
                    help="comma list of embedder thread counts (e.g. 1,2) to run the same questions with in one run "
                         "(each question through each in turn): total p50/p95 per setting under threads")
    ap.add_argument("--train-from", choices=["gold", "qa", "synth"], default="gold",
                    help="--pattern learned: gold patterns, question-answer pairs alone, or synth's questions alone")
    add_synth_arguments(ap, 6000)
    ap.add_argument("--synth-shapes", default="path1,path2,path3", help="--train-from synth: isorag synth --shapes")
    ap.add_argument("--unanswerable", default=str(UNANSWERABLE),
                    help="--pattern learned: questions the KG cannot answer (JSON Lines: question, topic, asks); "
                         "'' for none")
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
    ap.add_argument("--graph", default="auto",
                    help="comma list of graph paths to run the same questions through in one run: replica, "
                         "statement, expand, auto (e.g. replica,statement,expand), and <path>+embed for a path whose "
                         "named nodes are embedded even where they are exact entity names (no stored vectors), "
                         "<path>+milvus for one whose named nodes' stored vectors are read from Milvus (no table of "
                         "name vectors), "
                         "<path>@N for the embedder on N threads (replica+embed@1,replica+embed@2); the last line has "
                         "paths: {name: {hits1, p50_ms, p95_ms}} and the ratios of each to expand")
    # a learned smoke run trains on 40 demo questions a hop (1 and 2 hops) on the demo triples around them

    def learned(a: argparse.Namespace) -> bool:
        return bool(a.pattern == "learned")

    args = parse_args(ap, {"data": lambda a: str(smoke_metaqa()),
                           "kb": lambda a: str(smoke_kb(smoke_dir() / "kb.txt") if learned(a)
                                               else smoke_metaqa() / "kb.txt"),
                           "hops": lambda a: "1,2" if learned(a) else a.hops,
                           "kg": lambda a: "bench_smoke_metaqa_learned" if learned(a) else "bench_smoke_metaqa",
                           "limit": 4, "oracle": lambda a: not learned(a),
                           "graph": lambda a: a.graph if learned(a) else "replica,statement,expand"})

    from engine.datasets.metaqa import gold_pattern

    neo, mil = start_servers()
    from engine import Engine, EngineConfig, MatchSettings, MilvusSettings, Neo4jSettings

    cfg = EngineConfig(kg=args.kg, neo4j=Neo4jSettings.from_env(uri=neo), milvus=MilvusSettings(uri=mil),
                       match=MatchSettings(k_node=args.k_node, k_rel=args.k_rel, k=args.k,
                                         injective="none" if args.homomorphic else args.injective))
    eng = Engine(cfg, llm=False if args.pattern == "learned" else None)
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
    if args.pattern == "learned":
        eng.retrieve(gold_pattern("movie_to_director", "Inception"))
        run_learned_mode(eng, args)
        return

    if args.pattern == "llm":
        run_llm_mode(eng, cfg, args, llm)
        return
    paths = [g.strip() for g in args.graph.split(",") if g.strip()]
    warm_up(eng, args, paths)
    run_paths(eng, cfg, args, paths)


def warm_up(eng: Any, args: argparse.Namespace, paths: list[str]) -> None:
    """The model, connections and caches warm, the replica built (and timed), and each question type's statements
    planned once on every path, before anything is measured."""
    from engine.datasets.metaqa import gold_pattern

    t0 = time.perf_counter()
    topic = read_questions(1, args.split, 1, Path(args.data))[0]["topic"]
    first = eng.retrieve(gold_pattern("movie_to_director", topic), graph="replica")
    print(f"replica ready in {time.perf_counter() - t0:.2f} s: {first.stats['replica']}", flush=True)
    rep = eng.retriever.replica_now()
    if rep is not None and eng.retriever.name_vectors:  # the table of name vectors beside it, read before timing
        t1 = time.perf_counter()
        table, state = eng.retriever.name_table(rep, wait=True)
        print(f"name vectors {state.state} in {time.perf_counter() - t1:.2f} s: {state.info(table)}", flush=True)
    seen: set[str] = set()
    for hop in [int(h) for h in args.hops.split(",")]:
        for q in read_questions(hop, args.split, None, Path(args.data)):
            if q["qtype"] not in seen:
                seen.add(q["qtype"])
                for p in paths:
                    eng.retrieve(gold_pattern(q["qtype"], q["topic"]), k=args.k, graph=p.split("@")[0].split("+")[0])


def run_paths(eng: Any, cfg: Any, args: argparse.Namespace, paths: list[str]) -> None:
    """Gold patterns through each graph path in one run: per question, every path in turn (the order rotating, the
    question's node texts embedded anew for each, as a new question would be), so that drift hits all alike."""
    from engine.datasets.metaqa import gold_pattern

    from engine.retrieval.pattern import Pattern

    stages = ("version", "embed", "vector", "graph", "total")
    per: dict[str, dict[str, list[float]]] = {p: {s: [] for s in stages} for p in paths}
    served: dict[str, dict[str, int]] = {p: {} for p in paths}
    queries: dict[str, list[int]] = {p: [] for p in paths}
    hits1: dict[str, dict[str, float]] = {p: {} for p in paths}
    hits3: dict[str, dict[str, float]] = {p: {} for p in paths}
    agree: dict[str, int] = {p: 0 for p in paths}
    same_as_first: dict[str, int] = {p: 0 for p in paths}
    oracle_n, oracle_ms = 0, []
    counts: dict[str, int] = {}
    ceiling: dict[str, float] = {}
    tie_ceiling: dict[str, float] = {}
    misses = open(args.misses, "w", encoding="utf-8") if args.misses else None
    n_total, t_all, turn = 0, 0.0, 0
    for hop in [int(h) for h in args.hops.split(",")]:
        qs = read_questions(hop, args.split, args.limit, Path(args.data))
        h1 = {p: 0 for p in paths}
        h3 = {p: 0 for p in paths}
        for q in qs:
            pattern = Pattern.from_json(gold_pattern(q["qtype"], q["topic"]))
            texts = [n.text for n in pattern.known_nodes if n.text]
            got: dict[str, Any] = {}
            order = paths[turn % len(paths):] + paths[:turn % len(paths)]
            turn += 1
            for p in order:
                eng.retriever.forget_text(*texts)
                spec, _, threads = p.partition("@")
                # "<path>+embed": the named nodes embedded even where they are entities' exact names
                eng.retriever.name_vectors = not spec.endswith("+embed")
                # "<path>+milvus": their stored vectors read from Milvus by id, not from the table beside the replica
                eng.retriever.name_vector_cache_mb = 0 if spec.endswith("+milvus") else cfg.name_vector_cache_mb
                eng.retriever.embedder = embedder_with(eng, threads)  # "<path>@N": the embedder on N threads
                t0 = time.perf_counter()
                res = eng.retrieve(pattern, k=args.k, graph=spec.split("+")[0])
                t_all += time.perf_counter() - t0
                got[p] = res
            gold = {norm(a) for a in q["answers"]}
            for p in paths:
                res = got[p]
                for stage in stages:
                    per[p][stage].append(res.timings.get(stage, 0.0))
                via = res.stats.get("graph_path", "?")
                served[p][via] = served[p].get(via, 0) + 1
                queries[p].append(res.stats.get("queries", 0))
                names = [norm(a.entity.name) for a in res.answers]
                h1[p] += bool(names) and names[0] in gold
                h3[p] += any(n in gold for n in names[:3])
                first = got[paths[0]]
                same_as_first[p] += [(round(x.gsd, 6), sorted((k, e.eid) for k, e in x.mapping.items()))
                                     for x in res.subgraphs] == \
                    [(round(x.gsd, 6), sorted((k, e.eid) for k, e in x.mapping.items())) for x in first.subgraphs]
            res = got[paths[0]]
            names = [norm(a.entity.name) for a in res.answers]
            if misses is not None and not (names and names[0] in gold):
                misses.write(json.dumps({
                    "hop": hop, "qtype": q["qtype"], "question": q["question"], "gold": sorted(gold)[:20],
                    "answers": [[a.entity.name, round(a.gsd, 4)] for a in res.answers[:5]],
                    "gsd": [round(s.gsd, 4) for s in res.subgraphs],
                    "subgraphs": [[list(t.as_tuple()) for t in s.triples] for s in res.subgraphs[:3]],
                }) + "\n")
            if args.oracle:
                from engine.retrieval.oracle import oracle_matches

                cands = eng.retriever.candidates(res.pattern, cfg.match, {})
                t2 = time.perf_counter()
                want = oracle_matches(eng.graph, res.pattern, cands, limit=args.k, injective=cfg.match.injective,
                                      directed=cfg.match.directed)
                oracle_ms.append((time.perf_counter() - t2) * 1000)
                oracle_n += 1
                for p in paths:
                    agree[p] += [round(s.gsd, 6) for s in got[p].subgraphs] == [round(m.gsd, 6) for m in want]
        n = max(len(qs), 1)
        for p in paths:
            hits1[p][str(hop)] = round(h1[p] / n, 4)
            hits3[p][str(hop)] = round(h3[p] / n, 4)
        reach, ties = path_ceilings(args.kb, qs)
        ceiling[str(hop)] = round(reach, 4)
        tie_ceiling[str(hop)] = round(ties, 4)
        counts[str(hop)] = len(qs)
        n_total += len(qs)
        print(f"{hop}-hop: {len(qs)} questions  " + "  ".join(
            f"{p}: Hits@1 {hits1[p][str(hop)]:.4f} Hits@3 {hits3[p][str(hop)]:.4f}" for p in paths)
            + f"  (gold path reaches an answer for {ceiling[str(hop)]:.4f}; a random pick among its answers hits "
              f"{tie_ceiling[str(hop)]:.4f})", flush=True)
    out_paths: dict[str, Any] = {}
    for p in paths:
        p50 = {k: round(percentile(v, 50), 3) for k, v in per[p].items()}
        p95 = {k: round(percentile(v, 95), 3) for k, v in per[p].items()}
        allq = sum(counts.values()) or 1
        out_paths[p] = {"hits1": round(sum(hits1[p][h] * counts[h] for h in counts) / allq, 4),
                        "hits1_by_hop": hits1[p], "hits3_by_hop": hits3[p], "p50_ms": p50, "p95_ms": p95,
                        "served_by": served[p],
                        "statements_per_query": round(sum(queries[p]) / max(len(queries[p]), 1), 3),
                        "same_subgraphs_as_" + paths[0]: round(same_as_first[p] / allq, 4)}
        if args.oracle:
            out_paths[p]["oracle_agreement"] = round(agree[p] / max(oracle_n, 1), 4)
        print(f"{p}: p50 (ms) {p50}\n{p}: p95 (ms) {p95}\n{p}: served by {served[p]}, statements per query "
              f"{out_paths[p]['statements_per_query']}", flush=True)
    ratios: dict[str, Any] = {}
    if "expand" in out_paths:
        base = out_paths["expand"]
        for p in paths:
            if p != "expand":
                ratios[f"{p}/expand"] = {
                    f"{w}_{s}": round(out_paths[p][f"{w}_ms"][s] / max(base[f"{w}_ms"][s], 1e-9), 3)
                    for w in ("p50", "p95") for s in ("graph", "total")}
        print(f"ratios to the expansion path: {ratios}")
    first = out_paths[paths[0]]
    result: dict[str, Any] = {
        "split": args.split, "pattern": args.pattern, "injective": "none" if args.homomorphic else args.injective,
        "k": args.k, "k_node": args.k_node, "k_rel": args.k_rel, "graph": paths,
        "questions": counts, "hits1": first["hits1_by_hop"], "hits3": first["hits3_by_hop"], "path_ceiling": ceiling,
        "tie_ceiling": tie_ceiling, "p50_ms": first["p50_ms"], "p95_ms": first["p95_ms"],
        "qps": round(n_total * len(paths) / t_all, 2) if t_all else None, "peak_rss_mb": round(peak_rss_mb(), 1),
        "replica": eng.retriever.replica_info(eng.retriever.graph_path()), "ratios": ratios, "paths": out_paths,
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }
    if args.oracle:
        result["oracle"] = {"queries": oracle_n, "oracle_p50_ms": round(percentile(oracle_ms, 50), 2),
                            "agreement": {p: out_paths[p]["oracle_agreement"] for p in paths}}
        print(f"oracle: {result['oracle']}")
    if misses is not None:
        misses.close()
    if args.smoke:
        drop_kg(eng)
    eng.close()
    emit("metaqa", result)


def smoke_questions(hop: int) -> list[dict[str, Any]]:
    """40 of the demo's MetaQA questions with ``hop`` hops (the demo KB's films)."""
    rows = [json.loads(line) for line in (DEMO / "generator_questions.jsonl").read_text(encoding="utf-8").splitlines()]
    return [{**r, "hops": hop} for r in rows if r["hops"] == hop][:40]


def smoke_kb(out: Path) -> Path:
    """The demo KB's triples on the gold paths of the smoke questions (a few hundred): a KG loaded in seconds."""
    from engine.datasets.metaqa import relation_path

    triples = [line.split("|") for line in (DEMO / "kb.txt").read_text(encoding="utf-8").splitlines() if line]
    adj: dict[str, list[tuple[str, str, str]]] = {}
    for h, r, t in triples:
        adj.setdefault(h, []).append((h, r, t))
        adj.setdefault(t, []).append((h, r, t))
    keep: set[tuple[str, str, str]] = set()
    for hop in (1, 2):
        for q in smoke_questions(hop):
            front = {q["topic"]}
            for rel in relation_path(q["qtype"]):
                step = [x for e in front for x in adj.get(e, []) if x[1] == rel][:60]
                keep.update(step)
                front = {x[0] if x[2] in front else x[2] for x in step} - front
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in sorted(keep)), encoding="utf-8")
    return out


def run_llm_mode(eng: Any, cfg: Any, args: argparse.Namespace, llm: Any) -> None:
    """Questions as plain text through ``Engine.ask`` (the LLM writes each pattern)."""
    per_stage: dict[str, list[float]] = {"embed": [], "vector": [], "graph": [], "total": []}
    hits1: dict[str, float] = {}
    counts: dict[str, int] = {}
    for hop in [int(h) for h in args.hops.split(",")]:
        qs = read_questions(hop, args.split, args.limit, Path(args.data))
        h1 = 0
        for q in qs:
            res = eng.ask(q["question"].replace("[", "").replace("]", ""), k=args.k).retrieval
            for stage in per_stage:
                per_stage[stage].append(res.timings.get(stage, 0.0))
            names = [norm(a.entity.name) for a in res.answers]
            h1 += bool(names) and names[0] in {norm(a) for a in q["answers"]}
        hits1[str(hop)] = round(h1 / max(len(qs), 1), 4)
        counts[str(hop)] = len(qs)
        print(f"{hop}-hop: {len(qs)} questions  Hits@1 {hits1[str(hop)]:.4f}", flush=True)
    result = {"split": args.split, "pattern": "llm", "k": args.k, "questions": counts, "hits1": hits1,
              "p50_ms": {k: round(percentile(v, 50), 2) for k, v in per_stage.items()},
              "p95_ms": {k: round(percentile(v, 95), 2) for k, v in per_stage.items()},
              "peak_rss_mb": round(peak_rss_mb(), 1)}
    eng.close()
    emit("metaqa_llm", result)


def run_learned_mode(eng: Any, args: argparse.Namespace) -> None:
    from _learned import print_summary, read_unanswerable, run_learned, split, synth_records
    from engine.datasets.metaqa import gold_pattern

    from engine.retrieval.pattern import Pattern

    data = Path(args.data)
    hops = [int(h) for h in args.hops.split(",")]

    def items(split_name: str, limit: int | None) -> list[dict[str, Any]]:
        out = []
        for hop in hops:
            qs = smoke_questions(hop) if args.smoke else read_questions(hop, split_name, limit, data)
            for q in qs:
                out.append({**q, "text": q["question"].replace("[", "").replace("]", ""),
                            "gold": Pattern.from_json(gold_pattern(q["qtype"], q["topic"]))})
        return out

    if args.split == "test" and not args.smoke:
        train, test = items("dev", None), items("test", args.limit)
    else:
        train, test = [], []
        every = items(args.split, args.limit)
        for hop in hops:  # 80/20 within each hop
            a, b = split([q for q in every if q["hops"] == hop], 0.8, args.seed)
            train += a
            test += b
    for q in train + test:
        q["hop"] = q["hops"]
    records = None
    if args.train_from == "synth":
        n = 150 if args.smoke else args.synth_n
        records = synth_records(eng, n, args.synth_shapes.split(","), args.seed, "metaqa", **synth_options(args))
    if args.generator:
        run_learned_latency(eng, args, test, Path(args.generator))
        return
    unanswerable = read_unanswerable(Path(args.unanswerable)) if args.unanswerable else None
    if unanswerable and args.smoke:
        unanswerable = unanswerable[:20]
    result = run_learned(eng, train, test, name=f"metaqa_{args.train_from}", k=args.k, seed=args.seed,
                         router=not args.no_router, train_from=args.train_from, records=records,
                         unanswerable=unanswerable, misses=Path(args.misses) if args.misses else None)
    print_summary(result)
    ratio = added_ratio(result["p50_ms"]["total"], result["gold_ask_p50_ms"])
    print(f"the learned ask's p50 over the gold-pattern ask's: +{ratio:.3f} (target at most +0.2)")
    result = {"split": args.split, "pattern": "learned", "train_from": args.train_from, "injective": args.injective,
              "k": args.k, "smoke": args.smoke, **result, "learned_added_ratio": ratio,
              "peak_rss_mb": round(peak_rss_mb(), 1), "load_avg": [round(x, 2) for x in os.getloadavg()]}
    if args.train_from == "synth":
        result["synth"] = {"n": 150 if args.smoke else args.synth_n, "shapes": args.synth_shapes,
                           **synth_options(args)}
    if args.smoke:
        drop_kg(eng)
    eng.close()
    emit(f"metaqa_learned_{args.train_from}", result)


def embedder_with(eng: Any, threads: str | int | None) -> Any:
    """The engine's embedding model on ``threads`` threads (the engine's own embedder when None or empty)."""
    if threads in (None, ""):
        return eng.embedder
    from engine.embeddings import load_embedder

    return load_embedder(eng.config.embedding_model, device=eng.config.device, threads=int(threads))


def added_ratio(learned_p50: float, gold_p50: float) -> float:
    """What the learned route adds, as a share of the gold-pattern ask: ``(learned_p50 - gold_p50) / gold_p50``."""
    return round((learned_p50 - gold_p50) / max(gold_p50, 1e-9), 3)


def run_learned_latency(eng: Any, args: argparse.Namespace, test: list[dict[str, Any]], generator: Path) -> None:
    """Where the learned route's time goes, with a generator trained before: each test question asked in plain text
    (``route="learned"``) and with its gold pattern given (the same ``Engine.ask``), in turns (which goes first
    alternates), the topic's name forgotten by the text cache before each (a topic not asked about before). Per
    stage p50/p95 of both (the generator's parts too: ``generate_embed``, ``generate_model``,
    ``generate_profiles``), Hits@1 of both, and ``learned_added_ratio``."""
    from engine.linking.text import mask

    eng.config = eng.config.with_(generator=str(generator))
    gen = eng.generator
    assert gen is not None
    for q in test[:3]:  # warm-up: the model, connections, caches, relation names
        eng.ask(q["text"], route="learned", raise_errors=False)
        eng.ask(q["text"], pattern=q["gold"], raise_errors=False)
    learned: dict[str, list[float]] = {}
    gold: dict[str, list[float]] = {}
    threads = [t.strip() for t in (args.embed_threads or "").split(",") if t.strip()]
    by_threads: dict[str, list[float]] = {t: [] for t in threads}
    h_learned = h_gold = 0
    for n, q in enumerate(test):
        answers = {norm(a) for a in q["answers"]}
        got: dict[str, Any] = {}
        for which in (("learned", "gold") if n % 2 == 0 else ("gold", "learned")):
            eng.retriever.forget_text(q["topic"])
            if which == "learned":
                got[which] = eng.ask(q["text"], k=args.k, route="learned", raise_errors=False)
            else:
                got[which] = eng.ask(q["text"], k=args.k, pattern=q["gold"], raise_errors=False)
        masked = [mask(q["text"], [(t.start, t.end) for t in r]) for r in gen.readings(q["text"])] if threads else []
        for t in (threads[n % len(threads):] + threads[:n % len(threads)]) if threads else []:
            # the question's own texts embedded anew under each thread count (its words stay cached, as in service)
            eng.retriever.embedder = embedder_with(eng, t)
            eng.retriever.forget_text(q["topic"], *masked)
            by_threads[t].append(eng.ask(q["text"], k=args.k, route="learned", raise_errors=False).timings["total"])
            eng.retriever.embedder = eng.embedder
        ans, given = got["learned"], got["gold"]
        for name, v in ans.timings.items():
            learned.setdefault(name, []).append(v)
        if ans.proposal is not None:
            for name, v in ans.proposal.timings.items():
                if name.startswith("generate_"):
                    learned.setdefault(name, []).append(v)
        for name, v in given.timings.items():
            gold.setdefault(name, []).append(v)
        h_learned += bool(ans.answers) and norm(ans.answers[0].entity.name) in answers
        h_gold += bool(given.answers) and norm(given.answers[0].entity.name) in answers
    p50 = {k: round(percentile(v, 50), 3) for k, v in learned.items()}
    p95 = {k: round(percentile(v, 95), 3) for k, v in learned.items()}
    g50 = {k: round(percentile(v, 50), 3) for k, v in gold.items()}
    g95 = {k: round(percentile(v, 95), 3) for k, v in gold.items()}
    ratio = added_ratio(p50["total"], g50["total"])
    n = max(len(test), 1)
    threads_ms = {t: {"p50": round(percentile(v, 50), 3), "p95": round(percentile(v, 95), 3)}
                  for t, v in by_threads.items()}
    if threads_ms:
        print(f"learned ask total (ms) by embedder threads: {threads_ms}")
    print(f"learned ask p50 (ms): {p50}\nlearned ask p95 (ms): {p95}\ngold-pattern ask p50 (ms): {g50}\n"
          f"gold-pattern ask p95 (ms): {g95}\nHits@1 learned {h_learned / n:.4f}, gold {h_gold / n:.4f}; the learned "
          f"route adds +{ratio:.3f} of the gold ask's p50 (target at most +0.2)", flush=True)
    result = {"split": args.split, "pattern": "learned", "generator": str(generator), "questions": len(test),
              "hits1": round(h_learned / n, 4), "hits1_gold": round(h_gold / n, 4), "p50_ms": p50, "p95_ms": p95,
              "gold_ask_p50_ms": g50, "gold_ask_p95_ms": g95, "learned_added_ratio": ratio,
              "embed_threads": threads_ms,
              "load_avg": [round(x, 2) for x in os.getloadavg()]}
    if args.smoke:
        drop_kg(eng)
    eng.close()
    emit("metaqa_learned_latency", result)


if __name__ == "__main__":
    main()
