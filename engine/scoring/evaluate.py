"""The triple scorers evaluated on prepared questions: scores per question, dev recall, and the report.

:func:`score_examples` runs a model over a :class:`~engine.scoring.prepared.PreparedSet` one question at a time
(as at query time, timed); :func:`dev_recall` is the early-stopping figure of training; :func:`evaluate_scorer`
the figures of ``benchmarks/scorer.py`` (the per-question metrics are in :mod:`engine.scoring.metrics`).
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Sequence

import numpy as np

from engine.scoring.prepared import PreparedSet, train_pos

__all__ = ["score_examples", "dev_recall", "evaluate_scorer"]


def score_examples(model: Any, data: PreparedSet, examples: Sequence[dict[str, Any]] | None = None,
                   device: Any = "cpu", select: bool = False, walk_ends: list[Any] | None = None,
                   ) -> list[tuple[np.ndarray, float, float]]:
    """``[(logits [E], wall ms, cpu ms)]`` per example, one question per forward pass (as at query time), in
    eval mode. The time covers the scoring step given the fetched neighbourhood and cached features: building
    the graph's tensors, the forward pass, the sigmoid and (``select=True``) the adaptive top-p selection.
    The entity text terms come from the model's entity table over ``data.node_vecs`` (projected once here,
    before the clock starts, as a feature cache is filled once per process). ``walk_ends``: a list that gets
    each example's relation-walk end ``[N]`` (None for a model without a walk)."""
    import torch

    from engine.scoring.select import adaptive_top_p

    model.eval()
    if hasattr(model, "attach_entity_table"):
        model.attach_entity_table(torch.from_numpy(data.node_vecs))
    out = []
    with torch.inference_mode():
        for ex in (data.examples if examples is None else examples):
            t0, c0 = time.perf_counter(), time.process_time()
            g = data.graph(ex, with_labels=False).to(device)
            logits = model(g)
            if select:
                torch.sigmoid(logits)
                adaptive_top_p(logits)
            if logits.is_cuda:
                torch.cuda.synchronize()
            ms = (time.perf_counter() - t0) * 1000.0
            cpu = (time.process_time() - c0) * 1000.0
            out.append((logits.float().cpu().numpy(), ms, cpu))
            if walk_ends is not None:
                end = getattr(model, "walk_end", None)
                walk_ends.append(None if end is None else end.float().cpu().numpy())
    return out


def dev_recall(model: Any, data: PreparedSet, k: int, device: Any = "cpu") -> float:
    from engine.scoring.metrics import triple_recall_at_k

    import torch

    vals = []
    for ex, (logits, _, _) in zip(data.examples, score_examples(model, data, device=device)):
        pos = train_pos(ex)
        if len(pos):
            labels = torch.zeros(logits.shape[0])
            labels[torch.as_tensor(pos, dtype=torch.long)] = 1.0
            vals.append(triple_recall_at_k(torch.from_numpy(logits), labels, k))
    return float(np.mean(vals)) if vals else math.nan


def evaluate_scorer(model: Any, data: PreparedSet, ks: Sequence[int] = (50, 100, 200), device: Any = "cpu",
                    group: Callable[[dict[str, Any]], Any] | None = None) -> dict[str, Any]:
    """Triple recall@K against ``ex["pos"]`` (the shortest-path or ground-truth labels, questions with labels),
    ``path_triple_recall@K`` against the relation-path labels (questions that have them), answer recall@K (over
    *all* given answers: an answer missing from the KG or the neighbourhood counts as missed), Hits@1 of the
    extracted answer and the forward latency per question; per ``group(example)`` (e.g. the hop count) and
    overall."""
    import torch

    from engine.scoring.extract import answer_candidates
    from engine.scoring.metrics import answer_ceiling_at_k
    from engine.scoring.select import top_k as top_k_idx

    rows: dict[Any, dict[str, list[float]]] = {}
    ends: list[Any] = []
    scored = score_examples(model, data, device=device, select=True, walk_ends=ends)
    for ex, (logits, ms, cpu), end in zip(data.examples, scored, ends):
        nb = data.neighbourhoods[ex["nb"]]
        keys = ["all"] + ([group(ex)] if group is not None else [])
        conf = 1.0 / (1.0 + np.exp(-logits))
        order = top_k_idx(torch.from_numpy(logits), max(ks)).numpy()
        vals: dict[str, float] = {"ms": ms, "cpu_ms": cpu, "edges": float(nb.num_edges)}
        answers = set(int(a) for a in ex["answers"].tolist())
        n_gold = max(ex["n_gold"], 1)
        pos = set(int(p) for p in ex["pos"].tolist())
        path_pos = set(int(p) for p in ex["train_pos"].tolist()) if ex.get("train_pos") is not None else set()
        for k in ks:
            top = order[:k]
            covered = set(nb.heads[top].tolist()) | set(nb.tails[top].tolist())
            vals[f"answer_recall@{k}"] = len(answers & covered) / n_gold
            if pos:
                vals[f"triple_recall@{k}"] = len(pos & set(top.tolist())) / len(pos)
            if path_pos:
                vals[f"path_triple_recall@{k}"] = len(path_pos & set(top.tolist())) / len(path_pos)
        vals["answer_ceiling"] = len(answers) / n_gold
        for k in ks:
            # the best any ranking of the fetched triples can do at K (a triple covers at most two answers)
            vals[f"answer_ceiling@{k}"] = answer_ceiling_at_k(nb.heads, nb.tails, answers, k) / n_gold
        # the answer is extracted from the k_max (200) best triples, as the engine's scorer does
        ext = order[:200] if max(ks) >= 200 else top_k_idx(torch.from_numpy(logits), 200).numpy()
        cands = answer_candidates(nb.heads, nb.tails, conf, ext, nb.anchors, prior=end)
        vals["hits1"] = 1.0 if cands and cands[0][0] in answers else 0.0
        for key in keys:
            bucket = rows.setdefault(key, {})
            for name, v in vals.items():
                bucket.setdefault(name, []).append(v)
    out: dict[str, Any] = {}
    for key, bucket in rows.items():
        out[str(key)] = {name: float(np.mean(v)) for name, v in bucket.items()
                         if name not in ("ms", "cpu_ms", "edges")}
        times, cpu_times = bucket["ms"], bucket["cpu_ms"]
        out[str(key)]["questions"] = len(times)
        out[str(key)]["score_p50_ms"] = float(np.percentile(times, 50))
        out[str(key)]["score_p95_ms"] = float(np.percentile(times, 95))
        out[str(key)]["score_cpu_p50_ms"] = float(np.percentile(cpu_times, 50))
        out[str(key)]["score_cpu_p95_ms"] = float(np.percentile(cpu_times, 95))
        big = [m for m, e in zip(times, bucket["edges"]) if e >= 5000]
        out[str(key)]["score_p95_ms_5k_10k_edges"] = float(np.percentile(big, 95)) if big else None
        out[str(key)]["edges_max"] = int(max(bucket["edges"]))
        out[str(key)]["edges_mean"] = float(np.mean(bucket["edges"]))
    return out
