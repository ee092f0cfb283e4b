"""Evaluation of retrieval, answering and verification against ground truth (DIGEST §6.7).

Inputs: a ``isorag synth`` JSON Lines file (gold pattern, answers, ground-truth triples, claims), MetaQA
``qa_*.txt`` (``question with [topic]<TAB>a1|a2``; gold patterns from the sibling ``qa_*_qtype.txt`` through
the question types file beside it, ``qa_*_qtype.txt``, when present, else the LLM) or PathQuestion (``question<TAB>answer(alias/...)
<TAB>e#r#e#...#<end>#answer``; the gold pattern is the path).

Metrics per item, averaged overall and per shape and per number of hops:

* ``hits1_lenient`` -- SimGRAG's Hits@1: some gold answer is a case-insensitive substring of the output (the
  LLM's text; without an LLM, the top answer's name);
* ``hits1_strict`` -- the top answer equals a gold answer (case and whitespace folded);
* ``hit`` -- some gold answer is among the predicted answers (those of the top-k subgraphs);
* ``macro_f1`` -- F1 of predicted vs gold answer sets, averaged over items;
* ``gt_recall`` / ``gt_precision`` / ``gt_f1`` -- the retrieved subgraphs' triples against the ground-truth
  triples (the full answer subgraph where the file has it, as paper 003 recommends), direction-agnostic;
* ``answer_recall`` -- the share of gold answers among the entities of the retrieved triples;
* ``verify_accuracy`` -- verdicts on the true and corrupted claims against their labels.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Protocol, Sequence

from engine._errors import InputError, MalformedInputError

if TYPE_CHECKING:  # pragma: no cover
    from engine.answering.results import Answer, Verdict
    from engine.llm import LLM
    from engine.retrieval.pattern import PatternLike


class Answerer(Protocol):
    """What an evaluation run calls of an :class:`~engine.Engine` (a higher layer: not imported)."""

    @property
    def llm(self) -> LLM | None: ...

    def ask(self, query: str, *, pattern: PatternLike | None = ..., k: int | None = ..., raise_errors: bool = ...,
            **match: Any) -> Answer: ...

    def verify(self, claim: str, *, pattern: PatternLike | None = ..., k: int | None = ..., raise_errors: bool = ...,
               **match: Any) -> Verdict: ...

METRICS = ("hits1_lenient", "hits1_strict", "hit", "macro_f1", "gt_recall", "gt_precision", "gt_f1",
           "answer_recall", "verify_accuracy")


# -- metric functions (pure) -------------------------------------------------------------------------------
def norm(s: str) -> str:
    return " ".join(str(s).lower().split())


def hits1_lenient(output: str, gold: Iterable[str]) -> float:
    out = norm(output)
    return float(bool(out) and any(norm(g) and norm(g) in out for g in gold))


def hits1_strict(predicted: Sequence[str], gold: Iterable[str]) -> float:
    return float(bool(predicted) and norm(predicted[0]) in {norm(g) for g in gold})


def hit(predicted: Iterable[str], gold: Iterable[str]) -> float:
    return float(bool({norm(p) for p in predicted} & {norm(g) for g in gold}))


def prf(predicted: Iterable[Any], gold: Iterable[Any]) -> tuple[float, float, float]:
    """Precision, recall, F1 of two sets (an empty prediction has precision 0; empty gold, recall 0)."""
    p, g = set(predicted), set(gold)
    tp = len(p & g)
    prec = tp / len(p) if p else 0.0
    rec = tp / len(g) if g else 0.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return prec, rec, f1


def answer_f1(predicted: Iterable[str], gold: Iterable[str]) -> float:
    return prf({norm(p) for p in predicted}, {norm(g) for g in gold})[2]


def undirected(triple: Sequence[str]) -> tuple[str, str, str]:
    h, r, t = (norm(x) for x in triple)
    return (min(h, t), r, max(h, t))


def triple_prf(retrieved: Iterable[Sequence[str]], gt: Iterable[Sequence[str]]) -> tuple[float, float, float]:
    """GT-triple precision, recall, F1, direction-agnostic (paper 003)."""
    return prf({undirected(t) for t in retrieved}, {undirected(t) for t in gt})


def answer_recall(retrieved: Iterable[Sequence[str]], gold: Iterable[str]) -> float:
    ents = {norm(x) for t in retrieved for x in (t[0], t[2])}
    g = {norm(x) for x in gold}
    return len(g & ents) / len(g) if g else 0.0


def mean(xs: Sequence[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def aggregate(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean of each metric overall, by shape and by hops (``None`` where no item has it)."""
    def agg(group: Sequence[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"n": len(group)}
        for m in METRICS:
            vals = [it["metrics"][m] for it in group if it["metrics"].get(m) is not None]
            out[m] = mean(vals)
        return out

    by_shape: dict[str, list[dict[str, Any]]] = {}
    by_hops: dict[str, list[dict[str, Any]]] = {}
    for it in items:
        by_shape.setdefault(str(it.get("shape")), []).append(it)
        by_hops.setdefault(str(it.get("hops")), []).append(it)
    return {"overall": agg(items),
            "by_shape": {k: agg(v) for k, v in sorted(by_shape.items())},
            "by_hops": {k: agg(v) for k, v in sorted(by_hops.items())}}


# -- readers ----------------------------------------------------------------------------------------------
def _pq_answers(field: str) -> list[str]:
    m = re.match(r"^([^(]*)\((.*)\)\s*$", field.strip())
    if not m:
        return [field.strip().replace("_", " ")]
    names = [m.group(1)] + [a for a in m.group(2).split("/") if a]
    return list(dict.fromkeys(n.strip() for n in names if n.strip()))


def read_items(path: str | Path, limit: int | None = None) -> list[dict[str, Any]]:
    """Items ``{id, question, answers, pattern?, triples?, shape, hops, claims?}`` from any supported format.

    A file that cannot be read, is not UTF-8, is empty or has a line that is not an item of its format is an
    InputError (``file:line: reason`` for a bad line)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from e
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MalformedInputError(path, raw.count(b"\n", 0, e.start) + 1,
                                  f"not valid UTF-8: byte 0x{raw[e.start]:02x}") from None
    lines = text.splitlines()
    first = next((ln for ln in lines if ln.strip()), "")
    if not first:
        raise InputError(f"{path}: no items in it")
    if first.lstrip().startswith("{"):
        fmt, parse = "isorag synth JSON Lines", _synth_item
    elif first.count("\t") >= 2 and "#" in first.split("\t")[2]:
        fmt, parse = "PathQuestion", _pq_item
    else:
        fmt, parse = "MetaQA", _metaqa_reader(path)
    items: list[dict[str, Any]] = []
    for i, ln in enumerate(lines):
        if limit and len(items) >= limit:
            break
        if not ln.strip():
            continue
        try:
            items.append(parse(i, ln, len(items)))
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
            raise MalformedInputError(path, i + 1, f"not a {fmt} item ({type(e).__name__}: {e})") from e
    return items


def _synth_item(i: int, ln: str, n: int) -> dict[str, Any]:
    r = json.loads(ln)
    claims = [{"claim": r["claim"], "pattern": r.get("claim_pattern"), "label": r.get("label", "SUPPORTED")}] \
        if r.get("claim") else []
    claims += [{"claim": c["claim"], "pattern": c.get("pattern"), "label": c.get("label", "REFUTED")}
               for c in r.get("corrupted", [])]
    return {"id": r.get("id", str(n)), "question": r.get("paraphrased_question") or r["question"],
            "answers": r.get("answers") or [r.get("answer")], "pattern": r.get("pattern"),
            "triples": r.get("full_triples") or r.get("triples") or [],
            "shape": r.get("shape", "?"), "hops": r.get("hops", "?"), "claims": claims}


def _pq_item(i: int, ln: str, n: int) -> dict[str, Any]:
    q, ans, path_s = ln.split("\t")[:3]
    parts = [p for p in path_s.split("#")]
    if "<end>" in parts:
        parts = parts[: parts.index("<end>")]
    triples = [[parts[j], parts[j + 1], parts[j + 2]] for j in range(0, len(parts) - 2, 2)]
    n_hops = len(triples)
    label = {0: parts[0]}
    for j in range(1, n_hops + 1):
        label[j] = f"UNKNOWN {j}"
    pattern = [[label[j], triples[j][1], label[j + 1]] for j in range(n_hops)]
    return {"id": str(i), "question": q, "answers": _pq_answers(ans), "pattern": {"triples": pattern},
            "triples": triples, "shape": f"path{n_hops}", "hops": n_hops, "claims": []}


def _metaqa_reader(path: Path) -> Any:
    hop_m = re.search(r"(\d)-hop", str(path))
    hop = int(hop_m.group(1)) if hop_m else "?"
    qtypes: list[str] | None = None
    qt = path.with_name(path.stem + "_qtype.txt")
    gold_pattern = _metaqa_gold()
    if qt.exists() and gold_pattern is not None:
        qtypes = qt.read_text(encoding="utf-8").splitlines()

    def parse(i: int, ln: str, n: int) -> dict[str, Any]:
        q, ans = ln.split("\t")[:2]
        m = re.search(r"\[([^\]]+)\]", q)
        pattern = gold_pattern(qtypes[i].strip(), m.group(1)) if qtypes and m and gold_pattern else None
        return {"id": str(i), "question": q.replace("[", "").replace("]", ""), "answers": ans.split("|"),
                "pattern": pattern, "triples": [], "shape": qtypes[i].strip() if qtypes else f"{hop}-hop",
                "hops": hop, "claims": []}

    return parse


def _metaqa_gold() -> Any:
    """The gold pattern of a MetaQA question type (:func:`engine.datasets.metaqa.gold_pattern`)."""
    from engine.datasets.metaqa import gold_pattern

    return gold_pattern


# -- the run ----------------------------------------------------------------------------------------------
def evaluate_item(engine: Answerer, item: dict[str, Any], *, k: int = 3, use_llm_pattern: bool = False,
                  verify: bool = True, **match: Any) -> dict[str, Any]:
    pattern = None if use_llm_pattern else item.get("pattern")
    t0 = time.perf_counter()
    ans = engine.ask(item["question"], pattern=pattern, k=k, raise_errors=False, **match)
    wall = (time.perf_counter() - t0) * 1000
    predicted = [a.entity.name for a in ans.answers]
    retrieved = [t.as_tuple() for sg in ans.subgraphs for t in sg.triples]
    gold = [g for g in item["answers"] if g]
    out_text = ans.text if getattr(ans, "pattern_text", None) is not None or engine.llm is not None else ""
    output = out_text or (predicted[0] if predicted else "")
    m: dict[str, Any] = {
        "hits1_lenient": hits1_lenient(output, gold),
        "hits1_strict": hits1_strict(predicted, gold),
        "hit": hit(predicted, gold),
        "macro_f1": answer_f1(predicted, gold),
        "answer_recall": answer_recall(retrieved, gold),
    }
    if item.get("triples"):
        p, r, f = triple_prf(retrieved, item["triples"])
        m.update(gt_precision=p, gt_recall=r, gt_f1=f)
    verdicts = []
    if verify and item.get("claims"):
        ok = 0
        for c in item["claims"]:
            v = engine.verify(c["claim"], pattern=None if use_llm_pattern else c.get("pattern"), k=k,
                              raise_errors=False, **match)
            ok += v.label == c["label"]
            verdicts.append({"claim": c["claim"], "label": c["label"], "verdict": v.label})
        m["verify_accuracy"] = ok / len(item["claims"])
    return {"id": item["id"], "shape": item["shape"], "hops": item["hops"], "metrics": m, "predicted": predicted[:10],
            "gold": gold, "failed_stage": ans.failed_stage, "error": ans.error, "timings": ans.timings,
            "wall_ms": round(wall, 2), "verdicts": verdicts}


def evaluate(engine: Answerer, items: Sequence[dict[str, Any]], *, k: int = 3, use_llm_pattern: bool = False,
             verify: bool = True, progress: bool = False, **match: Any) -> dict[str, Any]:
    """Run every item; returns ``{"summary": aggregate(...), "items": [...], "latency_ms": {...}}``."""
    from tqdm import tqdm

    import sys

    results = []
    for it in tqdm(items, desc="eval", disable=not progress, file=sys.stderr):
        results.append(evaluate_item(engine, it, k=k, use_llm_pattern=use_llm_pattern, verify=verify, **match))
    walls = sorted(r["wall_ms"] for r in results)
    lat = {"p50": walls[len(walls) // 2] if walls else None,
           "p95": walls[min(len(walls) - 1, int(0.95 * (len(walls) - 1) + 0.5))] if walls else None}
    return {"summary": aggregate(results), "latency_ms": lat, "failed": sum(bool(r["failed_stage"]) for r in results),
            "items": results}


def plot_breakdown(summary: dict[str, Any], path: str | Path, title: str = "isorag eval") -> Path:
    """A PNG with grouped bars: each metric per shape (top) and per number of hops (bottom)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [m for m in METRICS if summary["overall"].get(m) is not None]
    fig, axes = plt.subplots(2, 1, figsize=(max(8, 1.2 * len(metrics) * 1.6), 8))
    colors = plt.get_cmap("tab10")
    for ax, key, label in ((axes[0], "by_shape", "shape"), (axes[1], "by_hops", "hops")):
        groups = list(summary[key])
        width = 0.8 / max(len(groups), 1)
        for gi, g in enumerate(groups):
            vals = [summary[key][g].get(m) or 0.0 for m in metrics]
            xs = [i + (gi - (len(groups) - 1) / 2) * width for i in range(len(metrics))]
            name = f"{g} hops" if key == "by_hops" else g
            ax.bar(xs, vals, width, label=f"{name} (n={summary[key][g]['n']})", color=colors(gi % 10))
        ax.set_xticks(range(len(metrics)))
        ax.set_xticklabels([m.replace("_", "\n") for m in metrics], fontsize=9)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("score")
        ax.set_title(f"by {label}")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, ncol=min(len(groups), 6), loc="upper center", bbox_to_anchor=(0.5, -0.18))
    fig.suptitle(f"{title} (overall n={summary['overall']['n']})")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["METRICS", "read_items", "evaluate", "evaluate_item", "aggregate", "plot_breakdown", "hits1_lenient",
           "hits1_strict", "hit", "prf", "answer_f1", "triple_prf", "answer_recall"]
