"""Forward latency of the triple scorers on CPU (or CUDA) for one question graph; prints JSON.

    python benchmarks/scorer_forward.py --triples 10000 --nodes 5000 --dim 384 --threads 2
    python benchmarks/scorer_forward.py --smoke     # 500 triples over 200 nodes, one thread, 3 repeats

The graph is synthetic (random triples over ``--nodes`` entities, 10% nameless, ``--relations`` relation
types, 2 topic entities); latency depends only on its sizes. Each configuration is timed in eval mode
under ``torch.inference_mode`` after warm-up, and the median and p90 of ``--repeats`` runs are reported,
for the scorer alone and for the whole scoring step (forward + sigmoid + adaptive top-p selection).
``cpu_median_ms`` is the process CPU time of a run (all threads): on a machine shared with other work,
wall time swings with the load, and the 1-thread CPU time is the best estimate of the unloaded latency.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: F401 - sys.path and the environment, on import
from _common import emit, parse_args
from engine.scoring import DDEMLP, QRGAT, QuestionGraph, adaptive_top_p, make_model, resolve_device
from engine.scoring.train import DEFAULT_MODEL_CONFIG


def synthetic_graph(num_triples: int, num_nodes: int, num_relations: int, dim: int, seed: int = 0) -> QuestionGraph:
    gen = torch.Generator().manual_seed(seed)
    emb = torch.nn.functional.normalize(torch.randn(num_nodes, dim, generator=gen), dim=1)
    rel = torch.nn.functional.normalize(torch.randn(num_relations, dim, generator=gen), dim=1)
    q = torch.nn.functional.normalize(torch.randn(dim, generator=gen), dim=0)
    return QuestionGraph(
        num_nodes=num_nodes,
        edge_index=torch.randint(0, num_nodes, (2, num_triples), generator=gen),
        edge_rel=torch.randint(0, num_relations, (num_triples,), generator=gen),
        node_emb=emb,
        has_text=torch.rand(num_nodes, generator=gen) > 0.1,
        rel_emb=rel,
        q_emb=q,
        topic=torch.tensor([0, 1]),
    )


def time_it(fn, repeats: int, warmup: int, sync) -> dict[str, float]:
    for _ in range(warmup):
        fn()
    sync()
    times, cpu = [], []
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1000.0)
        cpu.append((time.process_time() - c0) * 1000.0)
    times.sort()
    return {"median_ms": round(statistics.median(times), 2), "p90_ms": round(times[int(0.9 * (len(times) - 1))], 2),
            "min_ms": round(times[0], 2), "cpu_median_ms": round(statistics.median(cpu), 2)}


MODELS = {
    # what train-scorer and benchmarks/scorer.py build (engine.scoring.train.DEFAULT_MODEL_CONFIG)
    "DDEMLP(train-scorer default: hidden=128, gated DDE, relation walk)":
        lambda d: make_model("dde_mlp", d, **DEFAULT_MODEL_CONFIG["dde_mlp"]),
    "QRGAT(train-scorer default: hidden=64, L=2, H=4, gated DDE, relation walk)":
        lambda d: make_model("qrgat", d, **DEFAULT_MODEL_CONFIG["qrgat"]),
    "DDEMLP(default: hidden=d, 1 hidden layer)": lambda d: DDEMLP(d),
    "QRGAT(default: hidden=256, L=2, H=4)": lambda d: QRGAT(d),
    "QRGAT(hidden=128, L=2, H=4)": lambda d: QRGAT(d, hidden=128),
    "QRGAT(hidden=64, L=2, H=4)": lambda d: QRGAT(d, hidden=64),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--triples", type=int, default=10_000)
    ap.add_argument("--nodes", type=int, nargs="+", default=[2_500, 5_000, 10_000])
    ap.add_argument("--relations", type=int, default=300)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--models", nargs="*", default=None, help="substrings of model names to run (default: all)")
    args = parse_args(ap, {"triples": 500, "nodes": [200], "threads": [1], "repeats": 3, "warmup": 1})

    device = resolve_device(args.device)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    results = []
    for threads in args.threads if device.type == "cpu" else [torch.get_num_threads()]:
        torch.set_num_threads(threads)
        for n in args.nodes:
            graph = synthetic_graph(args.triples, n, args.relations, args.dim).to(device)
            for name, make in MODELS.items():
                if args.models and not any(s in name for s in args.models):
                    continue
                torch.manual_seed(0)
                model = make(args.dim).to(device).eval()

                def forward(model=model, graph=graph):
                    with torch.inference_mode():
                        return model(graph)

                def step(model=model, graph=graph):
                    with torch.inference_mode():
                        logits = model(graph)
                        chosen = adaptive_top_p(logits, p=0.9, k_min=50, k_max=200)
                        return torch.sigmoid(logits.index_select(0, chosen))

                results.append({
                    "model": name, "threads": threads, "triples": args.triples, "nodes": n,
                    "params": sum(p.numel() for p in model.parameters()),
                    "forward": time_it(forward, args.repeats, args.warmup, sync),
                    "scoring_step": time_it(step, args.repeats, args.warmup, sync),
                })
    emit("scorer_forward", {
        "benchmark": "scorer_forward", "device": str(device), "dim": args.dim, "relations": args.relations,
        "torch": torch.__version__, "cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
        "results": results,
    })


if __name__ == "__main__":
    main()
