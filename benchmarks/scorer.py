"""Triple scorers on MetaQA: train on the first 80% of dev (1/2/3-hop), evaluate on the last 20%.

    python benchmarks/scorer.py                 # every question (slow here: hours of neighbourhood fetches)
    python benchmarks/scorer.py --limit 400     # per hop file: 320 questions spread over its first 80%,
                                                # 80 over its last 20%

Both models (DDE+MLP, QR-GAT) train on the same prepared data (neighbourhoods fetched from Neo4j once, cached
in ``--cache``). The neighbourhood of a question is the ``h``-hop neighbourhood of its [topic] entity, ``h`` =
its file's hop count (``--hops N`` for a fixed depth), capped at ``--max-edges`` triples (PPR-style pruning).
Figures on the test questions:

* ``triple_recall`` @K: share of the shortest-path triples (topic <-> answer, every pair's shortest paths in the
  neighbourhood) among the K best scored (questions with such a path), whatever the models were trained on;
* ``path_triple_recall`` @K: the same for the relation-path triples (``--labels path``): the triples on walks
  topic -r1- x -r2- ... -rn- answer along the relation path the question type names (``qa_dev_qtype.txt``,
  :mod:`metaqa_qtypes`), plus shortest paths to the answers that walk misses;
* ``answer_recall`` @K: share of *all* gold answers among the entities of the K best triples (an answer the KG
  lacks or the capped neighbourhood left out counts as missed; ``answer_ceiling`` is the share in the
  neighbourhood at all, ``answer_ceiling_at_k`` the best any ranking of the fetched triples can do at K: a
  triple covers at most two answers, so a question with more than K answers cannot be fully covered by K);
* ``hits1``: the first answer extracted from the adaptive top-p triples (no LLM) is a gold answer;
* ``score_p50_ms`` / ``score_p95_ms``: wall time of the scoring step per question on CPU (graph tensors from
  cached features, forward, sigmoid, adaptive top-p), one thread; ``score_cpu_*`` the same in CPU time (the
  machine is shared: wall time swings with other jobs' load, recorded as ``load_avg*``). Entity text terms
  come from the model's entity table, projected once per process over the prepared entity vectors;
* training labels (``--labels``): ``path`` (default) the relation-path triples above, ``shortest`` the
  shortest-path triples (generic weak supervision, SubgraphRAG's); early stopping uses the same labels on dev;
* ``train_s``: wall time of training (data preparation excluded, reported as ``prepare_s``).

The last line of output is one JSON object; ``benchmarks/results/scorer.json`` gets the same.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import RESULTS, emit, peak_rss_mb, start_servers  # noqa: E402

DATA = Path(os.environ.get("METAQA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data" / "metaqa"))
KS = (50, 100, 200)
#: MetaQA's domain words: every question names them and no entity is one, so entity linking skips them besides
#: the engine's generic stopwords (engine.scoring.service); recorded in the checkpoints written here
METAQA_STOPWORDS = ("movie", "movies", "film", "films")
# The models' settings are train-scorer's defaults (engine.scoring.train.DEFAULT_MODEL_CONFIG, where each
# choice is explained); --set MODEL.KEY=VALUE overrides one for a run (e.g. dde_mlp.walk=false, the model
# without the relation walk).


def spread(items: list, n: int | None) -> list:
    """``n`` items evenly spread over ``items`` (all when n is None or larger)."""
    if n is None or n >= len(items):
        return items
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]


def train_one(name: str, configs: dict, eng, train, dev, train_data, out_dir: Path, args) -> tuple:
    """Train model ``name`` on ``train`` (early stopping on ``dev``) and save its checkpoint in ``out_dir``:
    ``(model, history, best epoch, best dev recall, train seconds, checkpoint path)``."""
    from engine.scoring.checkpoint import make_model, save_checkpoint
    from engine.scoring.train import TrainSettings, train_model

    model = make_model(name, eng.embedder.dim, **configs.get(name, {}))
    settings = TrainSettings(epochs=args.epochs, patience=args.patience, max_minutes=args.max_minutes, lr=args.lr,
                             threads=args.threads, device="cpu", pos_weight=args.pos_weight,
                             batch_questions=args.batch, neg_samples=args.neg_samples,
                             near_share=args.near_share, walk_aux=args.walk_aux, bridge_target=args.bridge_target)
    t1 = time.perf_counter()
    model, history, best_epoch, best = train_model(model, train, dev, settings, progress=not args.quiet)
    train_s = time.perf_counter() - t1
    ckpt = save_checkpoint(out_dir / f"scorer_{name}.ckpt", model, kg=args.kg,
                           embedding_model=eng.config.embedding_model, embedding_slug=eng.embedder.slug,
                           relation_types=train_data.relation_types, hops=args.hops or 3, max_edges=args.max_edges,
                           info={"benchmark": "scorer", "train_s": round(train_s, 1), "history": history,
                                 "best_epoch": best_epoch, "best_dev": best},
                           extra_stopwords=METAQA_STOPWORDS)
    return model, history, best_epoch, best, train_s, ckpt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kg", default="metaqa")
    ap.add_argument("--limit", type=int, default=None, help="questions per hop file (80%% train, 20%% test)")
    ap.add_argument("--hops", type=int, default=None, help="neighbourhood depth (default: the file's hop count)")
    ap.add_argument("--max-edges", type=int, default=10_000)
    ap.add_argument("--models", default="dde_mlp,qrgat")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--patience", type=int, default=4)
    ap.add_argument("--max-minutes", type=float, default=12.0, help="training budget per model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--cache", default=None, help="prepared-data cache (default benchmarks/results/scorer_cache_*.pt)")
    ap.add_argument("--out-dir", default=None, help="checkpoints (default benchmarks/results/)")
    ap.add_argument("--labels", choices=["path", "shortest"], default="path",
                    help="training labels: relation-path triples from the question type, or shortest paths")
    ap.add_argument("--pos-weight", type=float, default=1.0, help="BCE weight of positive triples")
    ap.add_argument("--batch", type=int, default=8, help="questions per optimizer step")
    ap.add_argument("--neg-samples", type=int, default=0,
                    help="negatives sampled per question and epoch (0: every triple every epoch)")
    ap.add_argument("--near-share", type=float, default=0.5,
                    help="share of the sampled negatives drawn from those touching an entity of a positive triple")
    ap.add_argument("--walk-aux", type=float, default=1.0,
                    help="weight of the relation walk's answer loss (models with walk=true; 0: off)")
    ap.add_argument("--bridge-target", type=float, default=0.5,
                    help="BCE target of a labelled triple touching no answer (default 0.5; 1: plain labels)")
    ap.add_argument("--set", action="append", default=[], metavar="MODEL.KEY=VALUE",
                    help="override a model setting, e.g. qrgat.dde_gated=true (value read as JSON)")
    ap.add_argument("--eval-only", action="store_true",
                    help="evaluate the checkpoints a previous run wrote to --out-dir (scorer_<model>.ckpt) instead of "
                         "training: the same figures, e.g. latency again on a quiet machine; train_s is the saved one")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()

    import json

    import torch

    from engine.scoring.train import DEFAULT_MODEL_CONFIG

    configs = {name: dict(cfg) for name, cfg in DEFAULT_MODEL_CONFIG.items()}
    for item in args.set:
        key, _, value = item.partition("=")
        name, _, field_ = key.partition(".")
        if not _ or not field_:
            ap.error(f"--set takes MODEL.KEY=VALUE, got {item!r}")
        try:
            configs.setdefault(name, {})[field_] = json.loads(value)
        except json.JSONDecodeError:
            configs.setdefault(name, {})[field_] = value
    torch.set_num_threads(args.threads)
    from engine import Engine
    from engine.scoring.evaluate import evaluate_scorer
    from engine.scoring.prepared import prepare
    from engine.scoring.qa import QARecord, read_qa
    from engine.scoring.train import seed_everything
    from metaqa_qtypes import relation_path
    from engine.scoring.checkpoint import load_checkpoint

    load_start = os.getloadavg()
    neo, mil = start_servers()
    eng = Engine(kg=args.kg, llm=False)
    stats = eng.graph.stats()
    if stats["triples"] == 0:
        print(f"KG {args.kg!r} is empty: loading {DATA / 'kb.txt'}", file=sys.stderr)
        eng.load(DATA / "kb.txt", progress=not args.quiet)
    train_recs: list[QARecord] = []
    test_recs: list[QARecord] = []
    for hop in (1, 2, 3):
        paths = None
        if args.labels == "path":
            qtypes = (DATA / f"{hop}-hop" / "qa_dev_qtype.txt").read_text(encoding="utf-8").splitlines()
            paths = [relation_path(t) if t.strip() else None for t in qtypes]
        recs = read_qa(DATA / f"{hop}-hop" / "qa_dev.txt", hops=args.hops or hop, relation_paths=paths)
        for r in recs:
            r.source = f"{hop}-hop/{r.source}"
        cut = int(0.8 * len(recs))
        n_train = None if args.limit is None else int(round(0.8 * args.limit))
        n_test = None if args.limit is None else args.limit - n_train
        train_recs += spread(recs[:cut], n_train)
        test_recs += spread(recs[cut:], n_test)
    tag = f"{args.limit or 'all'}_{args.hops or 'auto'}_{args.max_edges}"
    cache = Path(args.cache) if args.cache else RESULTS / f"scorer_cache_{tag}.pt"
    progress = not args.quiet
    t0 = time.perf_counter()
    train_data = prepare(eng, train_recs, hops=args.hops or 3, max_edges=args.max_edges, cache=cache, progress=progress)
    test_data = prepare(eng, test_recs, hops=args.hops or 3, max_edges=args.max_edges,
                        cache=Path(str(cache) + ".test"), progress=progress)
    prepare_s = time.perf_counter() - t0
    hop_of = lambda ex: int(ex["source"].split("-", 1)[0])  # noqa: E731

    # dev split for early stopping: 10% of the training questions (at most 300)
    import random

    idx = list(range(len(train_data.examples)))
    random.Random(42).shuffle(idx)
    n_dev = min(300, len(idx) // 10)
    dev, train = train_data.subset(sorted(idx[:n_dev])), train_data.subset(sorted(idx[n_dev:]))
    fetch = [nb.report.ms for nb in test_data.neighbourhoods.values()]
    result: dict = {
        "kg": args.kg, "limit": args.limit, "hops": args.hops or "question's hop count", "max_edges": args.max_edges,
        "train_questions": len(train.examples), "dev_questions": len(dev.examples),
        "test_questions": len(test_data.examples), "prepare_s": round(prepare_s, 1),
        "threads": args.threads, "labels": args.labels, "pos_weight": args.pos_weight, "batch": args.batch,
        "neg_samples": args.neg_samples, "near_share": args.near_share, "walk_aux": args.walk_aux,
        "bridge_target": args.bridge_target, "eval_only": args.eval_only,
        "path_labels": {"train": train_data.meta.get("path_labels"), "test": test_data.meta.get("path_labels")},
        "models": {},
    }
    if fetch:
        import numpy as np

        result["fetch_p50_ms"] = round(float(np.percentile(fetch, 50)), 1)
        result["fetch_p95_ms"] = round(float(np.percentile(fetch, 95)), 1)
        result["neighbourhood_truncated"] = sum(nb.report.truncated for nb in test_data.neighbourhoods.values())
    out_dir = Path(args.out_dir) if args.out_dir else RESULTS
    for name in args.models.split(","):
        seed_everything(42)
        if args.eval_only:
            ck = load_checkpoint(out_dir / f"scorer_{name}.ckpt", kg=args.kg, embedding_slug=eng.embedder.slug,
                                 relation_types=train_data.relation_types)
            model, train_s = ck.model.eval(), float(ck.info.get("train_s", float("nan")))
            history, best_epoch, best = ck.info.get("history", []), ck.info.get("best_epoch"), ck.info.get("best_dev", math.nan)
            ckpt = Path(ck.path)
        else:
            model, history, best_epoch, best, train_s, ckpt = train_one(name, configs, eng, train, dev, train_data,
                                                                       out_dir, args)
        ev = evaluate_scorer(model, test_data, KS, group=hop_of)
        per_hop = {h: ev.get(str(h), {}) for h in (1, 2, 3)}
        result["models"][name] = {
            "config": model.config,
            "answer_recall": {f"{h}-hop": {str(k): round(per_hop[h].get(f"answer_recall@{k}", float("nan")), 4)
                                           for k in KS} for h in (1, 2, 3)},
            "triple_recall": {f"{h}-hop": {str(k): round(per_hop[h].get(f"triple_recall@{k}", float("nan")), 4)
                                           for k in KS} for h in (1, 2, 3)},
            "path_triple_recall": {f"{h}-hop": {str(k): round(per_hop[h].get(f"path_triple_recall@{k}", float("nan")), 4)
                                                for k in KS} for h in (1, 2, 3)},
            "answer_ceiling": {f"{h}-hop": round(per_hop[h].get("answer_ceiling", float("nan")), 4) for h in (1, 2, 3)},
            "answer_ceiling_at_k": {f"{h}-hop": {str(k): round(per_hop[h].get(f"answer_ceiling@{k}", float("nan")), 4)
                                                 for k in KS} for h in (1, 2, 3)},
            "hits1": round(ev["all"]["hits1"], 4),
            "hits1_per_hop": {f"{h}-hop": round(per_hop[h].get("hits1", float("nan")), 4) for h in (1, 2, 3)},
            "score_p50_ms": round(ev["all"]["score_p50_ms"], 2),
            "score_p95_ms": round(ev["all"]["score_p95_ms"], 2),
            "score_cpu_p50_ms": round(ev["all"]["score_cpu_p50_ms"], 2),
            "score_cpu_p95_ms": round(ev["all"]["score_cpu_p95_ms"], 2),
            "score_p95_ms_5k_10k_edges": ev["all"]["score_p95_ms_5k_10k_edges"],
            "edges_max": ev["all"]["edges_max"],
            "train_s": round(train_s, 1),
            "epochs": len(history),
            "best_epoch": best_epoch,
            f"best_dev_{'path_' if args.labels == 'path' else ''}triple_recall@100": round(best, 4),
            "checkpoint": str(ckpt),
        }
        result["models"][name]["load_avg"] = [round(x, 2) for x in os.getloadavg()]
        print(f"{name}: {result['models'][name]}", file=sys.stderr)
    result["peak_rss_mb"] = round(peak_rss_mb(), 1)
    # the machine is shared (2 cores): wall times depend on what else runs
    result["load_avg_start"] = [round(x, 2) for x in load_start]
    result["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    emit("scorer", result)


if __name__ == "__main__":
    main()
