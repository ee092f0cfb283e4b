"""Embedding throughput, query latency and fidelity of the embedding backends on MetaQA entity names.

    python benchmarks/embed.py [--limit 43000] [--backend torch,onnx,onnx-q8] [--threads 1,2] [--repeats 3]
    python benchmarks/embed.py --smoke      # 300 names of the bundled demo KB, onnx, one thread, one repeat

Throughput: names/s embedding ``--limit`` entity names of ``--kb`` (MetaQA's kb.txt; shuffled, fixed
seed), best and median of ``--repeats`` runs per backend and thread count (the machine is shared: the
best is the figure, the median shows the noise). Latency: one query of 3 short strings, median and best
of 50. Fidelity against torch (sentence-transformers): cosine of each ONNX backend's vectors with torch's
on ``--fidelity-n`` real names (min, p01, mean), and top-1 nearest-neighbour agreement of ``--nn-queries``
perturbed names (lowercased, or one character dropped) searched among ``--nn-db`` real names, each
backend searching its own vectors, queries embedded in one batch and one at a time (int8's dynamic
activation scales depend on the batch); an exact tie (names that differ only in case embed identically)
counts as agreement, ``nn_same_index`` does not count it; ``recall`` is how often the top-1 is the name
the query came from. Threads: ``tN`` runs N batches at once (the default), ``tN-intra`` one batch on N
ONNX Runtime intra-op threads.

The last line printed is one JSON object, also written to benchmarks/results/embed.json.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._common import DATA, DEMO, emit, parse_args

import numpy as np

from engine.embeddings import AUTO_CPU_BACKEND, BACKENDS, OnnxEmbedder, load_embedder

KB = Path(os.environ.get("METAQA_KB") or DATA / "metaqa" / "kb.txt")


def entity_names(path: Path) -> list[str]:
    seen: dict[str, None] = {}
    with path.open(encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("|")
            if len(parts) == 3:
                seen.setdefault(parts[0], None)
                seen.setdefault(parts[2], None)
    names = sorted(seen)
    random.Random(0).shuffle(names)
    return names


def perturb(names: list[str], rng: random.Random) -> list[str]:
    out = []
    for n in names:
        if rng.random() < 0.5 and n.lower() != n:
            out.append(n.lower())
        elif len(n) > 1:
            i = rng.randrange(len(n))
            out.append(n[:i] + n[i + 1 :])
        else:
            out.append(n.lower())
    return out


def throughput(configs: dict[str, Any], names: list[str], repeats: int, batch_size: int) -> dict[str, dict]:
    """Round-robin: repeat r runs every configuration once, so each sees about the same background load."""
    walls: dict[str, list[float]] = {k: [] for k in configs}
    cpus: dict[str, list[float]] = {k: [] for k in configs}
    loads: dict[str, list[float]] = {k: [] for k in configs}
    for emb in configs.values():
        emb.encode(names[:200], batch_size=batch_size)  # warm-up: first-call allocations, lazy init
    for r in range(repeats):
        for key, emb in configs.items():
            c0, t0 = time.process_time(), time.perf_counter()
            emb.encode(names, batch_size=batch_size)
            walls[key].append(time.perf_counter() - t0)
            cpus[key].append(time.process_time() - c0)
            loads[key].append(os.getloadavg()[0])
        print(f"repeat {r + 1}/{repeats}: " + ", ".join(f"{k} {len(names) / walls[k][-1]:.0f}" for k in configs)
              + f" names/s (loadavg {os.getloadavg()[0]:.1f})", flush=True)
    out = {}
    for key in configs:
        best = min(walls[key])
        out[key] = {
            "names_per_s": round(len(names) / best, 1),
            "names_per_s_median": round(len(names) / statistics.median(walls[key]), 1),
            "names_per_cpu_s": round(len(names) / min(cpus[key]), 1),
            "seconds_best": round(best, 3),
            "load_avg": round(statistics.mean(loads[key]), 2),
        }
    return out


def latency(emb: Any, n: int = 50) -> dict[str, float]:
    query = ["Blade Runner", "directed_by", "Ridley Scott"]
    emb.encode(query)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        emb.encode(query)
        times.append((time.perf_counter() - t0) * 1000)
    return {"query_ms_median": round(statistics.median(times), 2), "query_ms_best": round(min(times), 2)}


def report(result: dict[str, Any], key: str, r: dict[str, Any]) -> None:
    result["throughput"][key] = r
    print(f"{key:14s}: {r['names_per_s']:7.1f} names/s best (median {r['names_per_s_median']:.1f}, "
          f"{r['names_per_cpu_s']:.1f} per CPU-s), query {r['query_ms_median']:.2f} ms median "
          f"({r['query_ms_best']:.2f} best), load {r.get('load_s', 0):.1f}s, loadavg {r['load_avg']}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=5000, help="names embedded per throughput run")
    ap.add_argument("--backend", default=",".join(BACKENDS), help="comma-separated: torch,onnx,onnx-q8")
    ap.add_argument("--threads", default="1,2", help="comma-separated intra-op thread counts")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--fidelity-n", type=int, default=2000)
    ap.add_argument("--nn-db", type=int, default=20000)
    ap.add_argument("--nn-queries", type=int, default=500)
    ap.add_argument("--no-fidelity", action="store_true")
    ap.add_argument("--no-intra", action="store_true", help="skip the intra-op-threads comparison rows")
    ap.add_argument("--kb", type=Path, default=KB, help="the KB whose entity names are embedded")
    args = parse_args(ap, {"kb": DEMO / "kb.txt", "limit": 300, "backend": "onnx", "threads": "1", "repeats": 1,
                           "fidelity_n": 100, "nn_db": 500, "nn_queries": 20})

    backends = [b.strip() for b in args.backend.split(",") if b.strip()]
    threads = [int(t) for t in args.threads.split(",") if t.strip()]
    names = entity_names(args.kb)
    bench = names[: args.limit]
    print(f"{len(names)} entity names in {args.kb}; throughput on {len(bench)}, batch {args.batch_size}", flush=True)

    result: dict[str, Any] = {
        "benchmark": "embed",
        "model": "all-MiniLM-L6-v2",
        "n_names": len(bench),
        "batch_size": args.batch_size,
        "cpus": len(os.sched_getaffinity(0)),
        "auto_cpu_backend": AUTO_CPU_BACKEND,
        "throughput": {},
        "latency": {},
        "fidelity": {},
    }
    configs: dict[str, Any] = {}
    load_s: dict[str, float] = {}
    for b in backends:
        for t in threads:
            t0 = time.perf_counter()
            emb = configs[f"{b}/t{t}"] = load_embedder(backend=b, threads=t)
            load_s[f"{b}/t{t}"] = round(time.perf_counter() - t0, 2)
            if t > 1 and b.startswith("onnx") and not args.no_intra:
                # The same build on ONNX Runtime's intra-op threads (one batch at a time), for comparison.
                configs[f"{b}/t{t}-intra"] = OnnxEmbedder(
                    emb.build_dir, name=emb.name, slug=emb.slug, backend=b, threads=t, parallel="intra"
                )
    for key, r in throughput(configs, bench, args.repeats, args.batch_size).items():
        r.update(latency(configs[key]), load_s=load_s.get(key, 0.0))
        report(result, key, r)
    for b in backends:
        runs = [v for k, v in result["throughput"].items() if k.startswith(b + "/") and not k.endswith("-intra")]
        if runs:
            best = max(runs, key=lambda v: v["names_per_s"])
            result["latency"][b] = min(v["query_ms_median"] for v in runs)
            result.setdefault("best_names_per_s", {})[b] = best["names_per_s"]

    if not args.no_fidelity:
        rng = random.Random(1)
        db = names[: args.nn_db]
        sources = rng.sample(db, args.nn_queries)
        queries = perturb(sources, rng)
        truth = np.array([db.index(s) for s in sources])
        fid_names = db[: args.fidelity_n]
        vecs: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for b in dict.fromkeys(["torch", *[b for b in backends if b != "torch"]]):
            emb = load_embedder(backend=b, threads=max(threads))
            t0 = time.perf_counter()
            # Queries also one at a time, as a lone query is embedded: dynamic int8 scales depend on the batch.
            vecs[b] = (emb.encode(db), emb.encode(queries), np.stack([emb.encode_one(q) for q in queries]))
            print(f"embedded {len(db)} + {len(queries)} names with {b} in {time.perf_counter() - t0:.1f}s", flush=True)
        ref_db, ref_q, _ = vecs["torch"]
        ref_nn = (ref_q @ ref_db.T).argmax(axis=1)
        # Names that differ only in case embed identically (the tokenizer lowercases): exact ties, where
        # either pick is right. A tie: torch's vectors of the two picks are the same.
        def agree(nn: np.ndarray) -> np.ndarray:
            return (nn == ref_nn) | ((ref_db[nn] * ref_db[ref_nn]).sum(axis=1) > 1 - 1e-6)

        for b, (d, q, q1) in vecs.items():
            nn = (q @ d.T).argmax(axis=1)
            nn1 = (q1 @ d.T).argmax(axis=1)
            lone = (q1 * q).sum(axis=1)
            for i in np.flatnonzero(~agree(nn))[:3]:
                print(f"  {b}: {queries[i]!r} -> {db[nn[i]]!r}, torch: {db[ref_nn[i]]!r}", flush=True)
            cos = (d[: args.fidelity_n] * ref_db[: args.fidelity_n]).sum(axis=1)
            f = {
                "cos_min": round(float(cos.min()), 6),
                "cos_p01": round(float(np.percentile(cos, 1)), 6),
                "cos_mean": round(float(cos.mean()), 6),
                "nn_agreement": round(float(agree(nn).mean()), 4),
                "nn_agreement_lone_queries": round(float(agree(nn1).mean()), 4),
                "nn_same_index": round(float((nn == ref_nn).mean()), 4),
                "nn_recall": round(float((nn == truth).mean()), 4),
                "lone_vs_batch_cos_min": round(float(lone.min()), 6),
                "n_cos": len(fid_names),
                "nn_db": len(db),
                "nn_queries": len(queries),
            }
            result["fidelity"][b] = f
            print(f"fidelity {b:8s}: cos vs torch min {f['cos_min']:.6f} p01 {f['cos_p01']:.6f} mean "
                  f"{f['cos_mean']:.6f}; top-1 NN agreement {f['nn_agreement']:.2%} (same index "
                  f"{f['nn_same_index']:.2%}, lone queries "
                  f"{f['nn_agreement_lone_queries']:.2%}), recall {f['nn_recall']:.2%}; lone vs batched query "
                  f"cos min {f['lone_vs_batch_cos_min']:.6f}",
                  flush=True)
    emit("embed", result)


if __name__ == "__main__":
    main()
