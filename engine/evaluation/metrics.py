"""Evaluation of retrieval, answering and verification against ground truth.

Inputs: a ``isorag synth`` JSON Lines file (gold pattern, answers, ground-truth triples, claims), MetaQA
``qa_*.txt`` (``question with [topic]<TAB>a1|a2``; gold patterns from the question types file beside it,
``qa_*_qtype.txt``, when present, else the LLM) or PathQuestion
(``question<TAB>answer(alias/...)<TAB>e#r#e#...#<end>#answer``; the gold pattern is the path).

Metrics per item, averaged overall and per shape and per number of hops:

* ``hits1_lenient`` -- SimGRAG's Hits@1: some gold answer is a case-insensitive substring of the output (the
  LLM's text; without an LLM, the top answer's name);
* ``hits1_strict`` -- the top answer equals a gold answer (case and whitespace folded);
* ``hit`` -- some gold answer is among the predicted answers (those of the top-k subgraphs);
* ``macro_f1`` -- F1 of predicted vs gold answer sets, averaged over items;
* ``gt_recall`` / ``gt_precision`` / ``gt_f1`` -- the retrieved subgraphs' triples against the ground-truth
  triples (the full answer subgraph where the file has it, as the SynthKGQA paper recommends:
  :mod:`engine.evaluation.synth`), direction-agnostic;
* ``answer_recall`` -- the share of gold answers among the entities of the retrieved triples;
* ``verify_accuracy`` -- verdicts on the true and corrupted claims against their labels.
"""

from __future__ import annotations

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
    """GT-triple precision, recall, F1, direction-agnostic (as SynthKGQA scores retrieved subgraphs)."""
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
#: what an error names a file's format by
_FORMAT_NAMES = {"jsonl": "isorag synth JSON Lines", "pathquestion": "PathQuestion", "metaqa": "MetaQA"}


def read_items(path: str | Path, limit: int | None = None) -> list[dict[str, Any]]:
    """Items ``{id, question, answers, pattern?, triples?, shape, hops, claims?}`` from any supported format (read
    by :mod:`engine.datasets.questions`).

    A file that cannot be read, is not UTF-8, is empty or has a line that is not an item of its format is an
    InputError (``file:line: reason`` for a bad line)."""
    from engine.datasets.questions import detect_format, question_rows

    path = Path(path)
    fmt = detect_format(path, by_suffix=False)  # a ground-truth file says what it is by its content
    name = _FORMAT_NAMES[fmt]
    parse = {"jsonl": _synth_item, "pathquestion": _pq_item, "metaqa": _metaqa_reader(path)}[fmt]
    items: list[dict[str, Any]] = []
    rows = question_rows(path, fmt=fmt, limit=limit or None)
    while True:
        try:
            lineno, row = next(rows)
        except StopIteration:
            break
        except MalformedInputError as e:
            if e.reason.startswith("not valid UTF-8"):
                raise
            raise MalformedInputError(path, e.line, f"not a {name} item ({e.reason})") from e
        try:
            items.append(parse(lineno - 1, row, len(items)))
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
            raise MalformedInputError(path, lineno, f"not a {name} item ({type(e).__name__}: {e})") from e
    if not items:
        raise InputError(f"{path}: no items in it")
    return items


def _synth_item(i: int, r: Any, n: int) -> dict[str, Any]:
    claims = [{"claim": r["claim"], "pattern": r.get("claim_pattern"), "label": r.get("label", "SUPPORTED")}] \
        if r.get("claim") else []
    claims += [{"claim": c["claim"], "pattern": c.get("pattern"), "label": c.get("label", "REFUTED")}
               for c in r.get("corrupted", [])]
    return {"id": r.get("id", str(n)), "question": r.get("paraphrased_question") or r["question"],
            "answers": r.get("answers") or [r.get("answer")], "pattern": r.get("pattern"),
            "triples": r.get("full_triples") or r.get("triples") or [],
            "shape": r.get("shape", "?"), "hops": r.get("hops", "?"), "claims": claims}


def _pq_item(i: int, row: Any, n: int) -> dict[str, Any]:
    from engine.datasets.questions import pathquestion_path

    q, answers, walk = row
    topic, relations, entities = pathquestion_path(walk)
    nodes = [topic, *entities]
    triples = [[nodes[j], relations[j], nodes[j + 1]] for j in range(min(len(relations), len(nodes) - 1))]
    labels = [nodes[0]] + [f"UNKNOWN {j}" for j in range(1, len(triples) + 1)]
    pattern = [[labels[j], triples[j][1], labels[j + 1]] for j in range(len(triples))]
    return {"id": str(i), "question": q, "answers": answers, "pattern": {"triples": pattern},
            "triples": triples, "shape": f"path{len(triples)}", "hops": len(triples), "claims": []}


def _metaqa_reader(path: Path) -> Any:
    hop_m = re.search(r"(\d)-hop", str(path))
    hop = int(hop_m.group(1)) if hop_m else "?"
    qtypes: list[str] | None = None
    qt = path.with_name(path.stem + "_qtype.txt")
    if qt.exists():
        qtypes = qt.read_text(encoding="utf-8").splitlines()

    def parse(i: int, row: Any, n: int) -> dict[str, Any]:
        from engine.datasets.metaqa import gold_pattern
        from engine.datasets.questions import topic_of

        q, answers = row
        topic = topic_of(q)
        pattern = gold_pattern(qtypes[i].strip(), topic) if qtypes and topic else None
        return {"id": str(i), "question": q.replace("[", "").replace("]", ""), "answers": answers,
                "pattern": pattern, "triples": [], "shape": qtypes[i].strip() if qtypes else f"{hop}-hop",
                "hops": hop, "claims": []}

    return parse


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
