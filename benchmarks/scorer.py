"""Triple scorers on MetaQA: train on the first 80% of dev (1/2/3-hop), evaluate on the last 20%.

    python benchmarks/scorer.py                 # every question (slow here: hours of neighbourhood fetches)
    python benchmarks/scorer.py --limit 400     # per hop file: 320 questions spread over its first 80%,
                                                # 80 over its last 20%
    python benchmarks/scorer.py --split test    # train on all of dev, test on qa_test.txt (where --data has it)
    python benchmarks/scorer.py --smoke         # DDE+MLP, one seed, 2 epochs on 10 demo questions a hop

Every model is trained once per seed (``--seeds``, default 0,1,2; the dev split for early stopping is the same for
all): each figure is reported per seed (``per_seed``) and as mean, std, min and max over them (``over_seeds``).
Early stopping waits for ``--min-epochs`` and judges the mean dev figure of the last ``--smooth`` epochs; the
former rule (the raw figure from epoch 1, ``--patience``) is judged on the same runs' snapshots (``former_rule``).

Both models (DDE+MLP, QR-GAT) train on the same prepared data (neighbourhoods fetched from Neo4j once, cached
in ``--cache``). The neighbourhood of a question is the ``h``-hop neighbourhood of its [topic] entity, ``h`` =
its file's hop count (``--hops N`` for a fixed depth), capped at ``--max-edges`` triples (PPR-style pruning).
Figures on the test questions:

* ``triple_recall`` @K: share of the shortest-path triples (topic <-> answer, every pair's shortest paths in the
  neighbourhood) among the K best scored (questions with such a path), whatever the models were trained on;
* ``path_triple_recall`` @K: the same for the relation-path triples (``--labels path``): the triples on walks
  topic -r1- x -r2- ... -rn- answer along the relation path the question type names (``qa_dev_qtype.txt``,
  :mod:`engine.datasets.metaqa`), plus shortest paths to the answers that walk misses;
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
import copy
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common
from _common import RESULTS, drop_kg, emit, parse_args, peak_rss_mb, smoke_dir, smoke_metaqa, start_servers

DATA = Path(os.environ.get("METAQA_DIR") or _common.DATA / "metaqa")
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


def train_one(name: str, configs: dict, eng, train, dev, train_data, out_dir: Path, args, seed: int) -> tuple:
    """Train model ``name`` with ``seed`` on ``train`` (early stopping on ``dev``) and save its checkpoint in
    ``out_dir``: ``(model, history, best epoch, best dev recall, train seconds, checkpoint path, snapshots)``;
    ``snapshots``: the weights after each epoch (to judge another stopping rule on the same run)."""
    import copy

    from engine.scoring.checkpoint import make_model, save_checkpoint
    from engine.scoring.train import TrainSettings, seed_everything, settings_record, train_model

    settings = TrainSettings(epochs=args.epochs, patience=args.patience, max_minutes=args.max_minutes, lr=args.lr,
                             threads=args.threads, device="cpu", pos_weight=args.pos_weight,
                             batch_questions=args.batch, neg_samples=args.neg_samples,
                             near_share=args.near_share, walk_aux=args.walk_aux, bridge_target=args.bridge_target,
                             seed=seed, min_epochs=args.min_epochs, smooth=args.smooth)
    seed_everything(seed)
    model = make_model(name, eng.embedder.dim, **configs.get(name, {}))
    snapshots: dict[int, dict] = {}
    t1 = time.perf_counter()
    model, history, best_epoch, best = train_model(
        model, train, dev, settings, progress=not args.quiet,
        on_epoch=lambda entry, m: snapshots.__setitem__(entry["epoch"], copy.deepcopy(m.state_dict())))
    train_s = time.perf_counter() - t1
    ckpt = save_checkpoint(out_dir / f"scorer_{name}_seed{seed}.ckpt", model, kg=args.kg,
                           embedding_model=eng.config.embedding_model, embedding_slug=eng.embedder.slug,
                           relation_types=train_data.relation_types, hops=args.hops or 3, max_edges=args.max_edges,
                           info={"benchmark": "scorer", "train_s": round(train_s, 1), "history": history,
                                 "best_epoch": best_epoch, "best_dev": best, "seed": seed,
                                 "settings": settings_record(settings), "split": args.split},
                           extra_stopwords=METAQA_STOPWORDS)
    return model, history, best_epoch, best, train_s, ckpt, snapshots


def raw_rule(history: list, patience: int, key: str) -> tuple[int, int]:
    """``(kept epoch, stop epoch)`` of the former stopping rule on a run's ``history``: the raw dev figure,
    stop after ``patience`` epochs without a better one, from the first epoch on (the rule that gave 3-hop
    answer recall@100 0.967 in one run and 0.946 in another). When the run ended before that rule would have
    stopped, the stop epoch is the run's last."""
    best, kept, bad = -math.inf, 0, 0
    for e in history:
        if e[key] > best:
            best, kept, bad = e[key], e["epoch"], 0
        else:
            bad += 1
            if bad >= patience:
                return kept, e["epoch"]
    return kept, history[-1]["epoch"] if history else 0


def figures(model, test_data, hop_of) -> dict:
    """The test figures of ``model`` (module docstring)."""
    from engine.scoring.evaluate import evaluate_scorer

    ev = evaluate_scorer(model, test_data, KS, group=hop_of)
    per_hop = {h: ev.get(str(h), {}) for h in (1, 2, 3)}

    def table(key: str) -> dict:
        return {f"{h}-hop": {str(k): round(per_hop[h].get(f"{key}@{k}", float("nan")), 4) for k in KS}
                for h in (1, 2, 3)}

    return {
        "answer_recall": table("answer_recall"),
        "triple_recall": table("triple_recall"),
        "path_triple_recall": table("path_triple_recall"),
        "answer_ceiling": {f"{h}-hop": round(per_hop[h].get("answer_ceiling", float("nan")), 4) for h in (1, 2, 3)},
        "answer_ceiling_at_k": table("answer_ceiling"),
        "hits1": round(ev["all"]["hits1"], 4),
        "hits1_per_hop": {f"{h}-hop": round(per_hop[h].get("hits1", float("nan")), 4) for h in (1, 2, 3)},
        "score_p50_ms": round(ev["all"]["score_p50_ms"], 2),
        "score_p95_ms": round(ev["all"]["score_p95_ms"], 2),
        "score_cpu_p50_ms": round(ev["all"]["score_cpu_p50_ms"], 2),
        "score_cpu_p95_ms": round(ev["all"]["score_cpu_p95_ms"], 2),
        "score_p95_ms_5k_10k_edges": ev["all"]["score_p95_ms_5k_10k_edges"],
        "edges_max": ev["all"]["edges_max"],
    }


def over_seeds(runs: list[dict]) -> dict:
    """Mean, standard deviation (population), min and max over seeds of every number in ``runs`` (dicts of
    the same shape), in the same nesting; non-numbers are left out."""
    import numpy as np

    def walk(items: list) -> dict | None:
        first = items[0]
        if isinstance(first, dict):
            out = {k: walk([it[k] for it in items]) for k in first if all(isinstance(it, dict) and k in it
                                                                           for it in items)}
            return {k: v for k, v in out.items() if v is not None} or None
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) and x is not None for x in items):
            a = np.asarray(items, dtype=float)
            if np.isnan(a).all():
                return None
            return {"mean": round(float(np.nanmean(a)), 4), "std": round(float(np.nanstd(a)), 4),
                    "min": round(float(np.nanmin(a)), 4), "max": round(float(np.nanmax(a)), 4)}
        return None

    return walk(runs) or {}


def parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        seeds = []
    if not seeds or any(not 0 <= x < 2 ** 32 for x in seeds) or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"seeds must be distinct integers in [0, 2^32) separated by commas, "
                                         f"got {text!r}")
    return seeds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kg", default="metaqa")
    ap.add_argument("--data", type=Path, default=DATA,
                    help="MetaQA folder: kb.txt and {1,2,3}-hop/qa_dev.txt with qa_dev_qtype.txt (default %(default)s)")
    ap.add_argument("--split", choices=["dev", "test"], default="dev",
                    help="dev: train on the first 80%% of each qa_dev.txt, test on its last 20%%; test: train on "
                         "all of qa_dev.txt, test on qa_test.txt (needs qa_test.txt and qa_test_qtype.txt)")
    ap.add_argument("--limit", type=int, default=None,
                    help="questions per hop file: 80%% of them train, 20%% test (from qa_test.txt with --split test)")
    ap.add_argument("--hops", type=int, default=None, help="neighbourhood depth (default: the file's hop count)")
    ap.add_argument("--max-edges", type=int, default=10_000)
    ap.add_argument("--models", default="dde_mlp,qrgat")
    ap.add_argument("--seeds", type=parse_seeds, default=[0, 1, 2],
                    help="training seeds, comma-separated (default 0,1,2): every figure is reported per seed and "
                         "as mean, std, min and max over them")
    ap.add_argument("--seed", type=int, default=None, help="one seed (the same as --seeds N)")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--patience", type=int, default=4)
    ap.add_argument("--min-epochs", type=int, default=20, help="no early stop before this epoch (default 20)")
    ap.add_argument("--smooth", type=int, default=3,
                    help="early stopping judges the mean dev recall of the last N epochs (default 3; 1: raw)")
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
                    help="evaluate the checkpoints a previous run wrote to --out-dir (scorer_<model>_seed<N>.ckpt) "
                         "instead of training: the same figures, e.g. latency again on a quiet machine; train_s is "
                         "the saved one")
    ap.add_argument("--quiet", action="store_true")
    args = parse_args(ap, {"kg": "bench_smoke_scorer", "data": lambda a: smoke_metaqa(per_hop=10), "models": "dde_mlp",
                           "seeds": [0], "epochs": 2, "min_epochs": 1, "patience": 1, "max_minutes": 0.5,
                           "quiet": True, "cache": lambda a: str(smoke_dir() / "cache.pt"),
                           "out_dir": lambda a: str(smoke_dir())})
    if args.seed is not None:
        args.seeds = parse_seeds(str(args.seed))

    import json

    from engine import IsoragError
    from _metaqa_split import split_files

    try:
        files = split_files(args.data, args.split)  # said before anything starts
    except IsoragError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None

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
    from engine.scoring.prepared import prepare
    from engine.scoring.qa import QARecord, read_qa
    from engine.datasets.metaqa import relation_path
    from engine.scoring.checkpoint import load_checkpoint

    load_start = os.getloadavg()
    neo, mil = start_servers()
    eng = Engine(kg=args.kg, llm=False)
    stats = eng.graph.stats()
    if stats["triples"] == 0:
        print(f"KG {args.kg!r} is empty: loading {args.data / 'kb.txt'}", file=sys.stderr)
        eng.load(args.data / "kb.txt", progress=not args.quiet)

    def records(qa: Path, qtype: Path, hop: int) -> list[QARecord]:
        paths = None
        if args.labels == "path":
            qtypes = qtype.read_text(encoding="utf-8").splitlines()
            paths = [relation_path(t) if t.strip() else None for t in qtypes]
        recs = read_qa(qa, hops=args.hops or hop, relation_paths=paths)
        for r in recs:
            r.source = f"{hop}-hop/{r.source}"
        return recs

    train_recs: list[QARecord] = []
    test_recs: list[QARecord] = []
    n_train = None if args.limit is None else int(round(0.8 * args.limit))
    n_test = None if args.limit is None else args.limit - n_train
    for hop, f in files.items():
        recs = records(f["train"], f["train_qtype"], hop)
        if args.split == "dev":
            cut = int(0.8 * len(recs))
            train_recs += spread(recs[:cut], n_train)
            test_recs += spread(recs[cut:], n_test)
        else:
            train_recs += spread(recs, n_train)
            test_recs += spread(records(f["test"], f["test_qtype"], hop), n_test)
    tag = f"{args.limit or 'all'}_{args.hops or 'auto'}_{args.max_edges}" + ("_test" if args.split == "test" else "")
    cache = Path(args.cache) if args.cache else RESULTS / f"scorer_cache_{tag}.pt"
    progress = not args.quiet
    t0 = time.perf_counter()
    train_data = prepare(eng, train_recs, hops=args.hops or 3, max_edges=args.max_edges, cache=cache, progress=progress)
    test_data = prepare(eng, test_recs, hops=args.hops or 3, max_edges=args.max_edges,
                        cache=Path(str(cache) + ".test"), progress=progress)
    prepare_s = time.perf_counter() - t0
    def hop_of(ex: dict) -> int:
        return int(ex["source"].split("-", 1)[0])

    # dev split for early stopping: 10% of the training questions (at most 300), the same for every seed, so
    # that the seeds differ only in the training's own draws (initial weights, batch order, negatives)
    import random

    idx = list(range(len(train_data.examples)))
    random.Random(42).shuffle(idx)
    n_dev = min(300, len(idx) // 10)
    dev, train = train_data.subset(sorted(idx[:n_dev])), train_data.subset(sorted(idx[n_dev:]))
    fetch = [nb.report.ms for nb in test_data.neighbourhoods.values()]
    result: dict = {
        "kg": args.kg, "data": str(args.data), "split": args.split, "limit": args.limit,
        "hops": args.hops or "question's hop count", "max_edges": args.max_edges, "seeds": args.seeds,
        "train_questions": len(train.examples), "dev_questions": len(dev.examples),
        "test_questions": len(test_data.examples), "prepare_s": round(prepare_s, 1),
        "threads": args.threads, "labels": args.labels, "pos_weight": args.pos_weight, "batch": args.batch,
        "neg_samples": args.neg_samples, "near_share": args.near_share, "walk_aux": args.walk_aux,
        "bridge_target": args.bridge_target, "epochs": args.epochs, "patience": args.patience,
        "min_epochs": args.min_epochs, "smooth": args.smooth, "max_minutes": args.max_minutes,
        "eval_only": args.eval_only,
        "path_labels": {"train": train_data.meta.get("path_labels"), "test": test_data.meta.get("path_labels")},
        "models": {},
    }
    if fetch:
        import numpy as np

        result["fetch_p50_ms"] = round(float(np.percentile(fetch, 50)), 1)
        result["fetch_p95_ms"] = round(float(np.percentile(fetch, 95)), 1)
        result["neighbourhood_truncated"] = sum(nb.report.truncated for nb in test_data.neighbourhoods.values())
    out_dir = Path(args.out_dir) if args.out_dir else RESULTS
    dev_key = "dev_triple_recall@100"
    for name in args.models.split(","):
        per_seed: dict[str, dict] = {}
        former: dict[str, dict] = {}
        for seed in args.seeds:
            snapshots: dict[int, dict] = {}
            if args.eval_only:
                ck = load_checkpoint(out_dir / f"scorer_{name}_seed{seed}.ckpt", kg=args.kg,
                                     embedding_slug=eng.embedder.slug, relation_types=train_data.relation_types)
                model, train_s = ck.model.eval(), float(ck.info.get("train_s", float("nan")))
                history, best_epoch = ck.info.get("history", []), ck.info.get("best_epoch")
                best = ck.info.get("best_dev", math.nan)
                ckpt = Path(ck.path)
            else:
                model, history, best_epoch, best, train_s, ckpt, snapshots = train_one(
                    name, configs, eng, train, dev, train_data, out_dir, args, seed)
            run = {**figures(model, test_data, hop_of), "config": model.config, "train_s": round(train_s, 1),
                   "epochs": len(history), "best_epoch": best_epoch,
                   f"best_dev_{'path_' if args.labels == 'path' else ''}triple_recall@100_smoothed": round(best, 4),
                   "stopped_by_budget": bool(history) and len(history) < args.epochs
                   and history[-1]["elapsed_s"] >= 60 * args.max_minutes * 0.99,
                   "checkpoint": str(ckpt), "load_avg": [round(x, 2) for x in os.getloadavg()]}
            per_seed[str(seed)] = run
            print(f"{name} seed {seed}: {json.dumps(run)}", file=sys.stderr)
            # the former rule (raw dev figure, no minimum) judged on the same run's snapshots
            if snapshots and history and dev_key in history[0]:
                kept, stop = raw_rule(history, args.patience, dev_key)
                ref = copy.deepcopy(model.state_dict())
                model.load_state_dict(snapshots[kept])
                former[str(seed)] = {**figures(model, test_data, hop_of), "best_epoch": kept, "epochs": stop}
                model.load_state_dict(ref)
                print(f"{name} seed {seed}, former rule (kept epoch {kept}, stops at {stop}): "
                      f"3-hop answer recall@100 {former[str(seed)]['answer_recall']['3-hop']['100']}", file=sys.stderr)
        entry = {"per_seed": per_seed, "over_seeds": over_seeds(list(per_seed.values()))}
        if former:
            entry["former_rule"] = {"rule": f"raw dev {dev_key}, patience {args.patience}, from epoch 1",
                                    "per_seed": former, "over_seeds": over_seeds(list(former.values()))}
        result["models"][name] = entry
        a3 = entry["over_seeds"].get("answer_recall", {}).get("3-hop", {}).get("100", {})
        print(f"{name}: 3-hop answer recall@100 over seeds {args.seeds}: {a3}", file=sys.stderr)
    if args.smoke:
        drop_kg(eng)
    result["peak_rss_mb"] = round(peak_rss_mb(), 1)
    # the machine is shared (2 cores): wall times depend on what else runs
    result["load_avg_start"] = [round(x, 2) for x in load_start]
    result["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    emit("scorer", result)


if __name__ == "__main__":
    main()
