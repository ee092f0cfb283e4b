"""Fact-verification jobs on claims built from the demo KG: claims/s and accuracy.

    python benchmarks/verify.py [--limit 400] [--concurrency 2] [--seed 0] [--kg demo] [--kb FILE]
    python benchmarks/verify.py --smoke     # 20 claims on a few hundred demo triples, KG dropped after

Claims come from the demo KG's own triples (engine/data/demo/kb.txt), each with its pattern:

* true: a triple of the KG                                            gold SUPPORTED
* swapped tail: (h, r, t') with t' another tail of relation r,
  (h, r, t') not in the KG in either direction                        gold REFUTED
* wrong relation: (h, r', t) with r' another relation of the KG,
  not in the KG in either direction                                   gold REFUTED
* unknown entity: (h, r, t) with t a made-up name                     gold NOT_ENOUGH_INFO

in proportions 40/20/20/20. The job (engine.jobs.run_verify_job, as ``isorag verify``) runs without an LLM
(the rule of engine.answering) on the patterns with the KG's own names (``no_llm``) and on the patterns as a
person would write them, relations in words and names in lower case (``no_llm_written_patterns``); and, when
ISORAG_LLM_* configures an endpoint, with the LLM writing the pattern and the verdict (SimGRAG's prompts;
True/False only, so the binary accuracy is the one to read there).
Loads the demo KG into KG ``demo`` first when the stores lack it (a few minutes here).
The last line is one JSON object (also benchmarks/results/verify.json).
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import _common
from _common import ROOT, drop_kg, emit, parse_args, peak_rss_mb, percentile, smoke_metaqa, start_servers

KB = ROOT / "engine" / "data" / "demo" / "kb.txt"
_SYLLABLES = ["zor", "blax", "quin", "tav", "mel", "dro", "vex", "ith", "olo", "gran", "pue", "kesh", "ulm", "yat"]


def read_kb(path: Path) -> list[tuple[str, str, str]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split("|")
        if len(parts) == 3 and all(parts):
            out.append((parts[0], parts[1], parts[2]))
    return out


def made_up_name(rng: random.Random) -> str:
    def word() -> str:
        return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()

    return f"{word()} {word()}"


def build_claims(kb: list[tuple[str, str, str]], n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    # MetaQA has case variants of one name ("Robert Aldrich" the director, "robert aldrich" the tag) and the
    # embedder is uncased: a corrupted claim must be absent whatever the case, else it is true after all
    facts = {(h.lower(), r, t.lower()) for h, r, t in kb}
    tails: dict[str, list[str]] = defaultdict(list)
    for _, r, t in kb:
        tails[r].append(t)
    relations = sorted(tails)

    def absent(h: str, r: str, t: str) -> bool:
        h, t = h.lower(), t.lower()
        return h != t and (h, r, t) not in facts and (t, r, h) not in facts

    plan = ["true"] * round(n * 0.4) + ["swapped_tail"] * round(n * 0.2) + ["wrong_relation"] * round(n * 0.2)
    plan += ["unknown_entity"] * (n - len(plan))
    rng.shuffle(plan)
    claims = []
    for i, kind in enumerate(plan):
        while True:
            h, r, t = rng.choice(kb)
            if kind == "true":
                triple, gold = (h, r, t), "SUPPORTED"
            elif kind == "swapped_tail":
                t2 = rng.choice(tails[r])
                if not absent(h, r, t2):
                    continue
                triple, gold = (h, r, t2), "REFUTED"
            elif kind == "wrong_relation":
                r2 = rng.choice([x for x in relations if x != r])
                if not absent(h, r2, t):
                    continue
                triple, gold = (h, r2, t), "REFUTED"
            else:
                triple, gold = (h, r, made_up_name(rng)), "NOT_ENOUGH_INFO"
            break
        h, r, t = triple
        claims.append({"id": f"{kind}-{i}", "claim": f"{h} {r.replace('_', ' ')} {t}.", "label": gold,
                       "pattern": {"triples": [list(triple)]}, "kind": kind})
    return claims


def ensure_demo(kg: str, kb: Path = KB) -> dict[str, Any]:
    from engine import Engine, KGNotFoundError

    with Engine(kg=kg, llm=False) as eng:
        try:
            st = eng.stats()
        except KGNotFoundError:  # not loaded yet
            st = {"neo4j": {"triples": 0}, "agree": False}
        if st["neo4j"]["triples"] > 0 and st["agree"]:
            return {"loaded_now": False, "triples": st["neo4j"]["triples"], "entities": st["neo4j"]["entities"]}
        t0 = time.perf_counter()
        eng.load(kb, progress=not _common.SMOKE)
        st = eng.stats()
        return {"loaded_now": True, "load_s": round(time.perf_counter() - t0, 1), "triples": st["neo4j"]["triples"],
                "entities": st["neo4j"]["entities"]}


def as_written(pattern: dict[str, Any]) -> dict[str, Any]:
    """The pattern as a person (or an LLM) would write it: relations in words, names in lower case."""
    return {"triples": [[h.lower(), r.replace("_", " "), t.lower()] for h, r, t in pattern["triples"]]}


def run_job(eng: Any, claims: list[dict[str, Any]], workdir: Path, name: str, concurrency: int,
            patterns: str) -> dict[str, Any]:
    """``patterns``: "exact" (the KG's own names), "written" (:func:`as_written`) or "none" (the LLM's)."""
    from engine.jobs import read_verdicts, run_verify_job

    path = workdir / f"{name}.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for c in claims:
            row = {k: c[k] for k in ("id", "claim", "label")}
            if patterns == "exact":
                row["pattern"] = c["pattern"]
            elif patterns == "written":
                row["pattern"] = as_written(c["pattern"])
            fh.write(json.dumps(row) + "\n")
    out = workdir / f"{name}.verdicts.jsonl"
    summary = run_verify_job(eng, path, out, concurrency=concurrency, progress=False, echo=lambda m: None)
    records, _ = read_verdicts(out)
    kind = {c["id"]: c["kind"] for c in claims}
    by_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    binary = 0
    for rec in records:
        ok = bool(rec.get("correct"))
        by_kind[kind[rec["id"]]][0] += int(ok)
        by_kind[kind[rec["id"]]][1] += 1
        binary += int((rec["label"] == "SUPPORTED") == (rec["gold"] == "SUPPORTED") and not rec.get("failed_stage"))
    total_ms = [rec["timings"].get("total", 0.0) for rec in records]
    return {
        "claims": summary["verdicts"],
        "claims_per_s": summary["claims_per_s"],
        "accuracy": summary["accuracy"],
        "binary_accuracy": round(binary / len(records), 4) if records else None,
        "accuracy_by_kind": {k: round(v[0] / v[1], 4) for k, v in sorted(by_kind.items())},
        "counts": summary["counts"],
        "confusion": summary["confusion"],
        "failed": summary["counts"]["FAILED"],
        "latency_ms": {"p50": round(percentile(total_ms, 50), 1), "p95": round(percentile(total_ms, 95), 1),
                       "max": round(max(total_ms), 1) if total_ms else None},
        "llm_calls": sum(rec.get("usage", {}).get("calls", 0) for rec in records),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=400, help="number of claims (default 400)")
    ap.add_argument("--concurrency", type=int, default=4, help="claims in flight (default 4, as isorag verify)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kg", default="demo")
    ap.add_argument("--kb", type=Path, default=KB, help="the KB the claims are made from (default: the demo KG's)")
    args = parse_args(ap, {"kg": "bench_smoke_verify", "limit": 20, "kb": lambda a: smoke_metaqa() / "kb.txt"})

    start_servers()
    demo = ensure_demo(args.kg, args.kb)
    claims = build_claims(read_kb(args.kb), args.limit, args.seed)

    from engine import Engine
    from engine.llm import make_llm

    result: dict[str, Any] = {"benchmark": "verify", "kg": args.kg, "limit": args.limit, "seed": args.seed,
                              "concurrency": args.concurrency, "demo_kg": demo,
                              "mix": {k: sum(1 for c in claims if c["kind"] == k)
                                      for k in ("true", "swapped_tail", "wrong_relation", "unknown_entity")}}
    with tempfile.TemporaryDirectory(prefix="isorag-verify-") as tmp, Engine(kg=args.kg, llm=False) as eng:
        work = Path(tmp)
        # warm up: the embedder, the collections' first load, the relation catalog
        eng.verify("warm-up", pattern=claims[0]["pattern"])
        result["verify_threshold"] = eng.config.verify.threshold
        result["no_llm"] = run_job(eng, claims, work, "rule", args.concurrency, patterns="exact")
        result["no_llm_written_patterns"] = run_job(eng, claims, work, "rule_written", args.concurrency,
                                                    patterns="written")
        llm = make_llm()
        if llm is not None:
            with Engine(kg=args.kg, llm=llm) as leng:
                result["llm"] = {"model": getattr(getattr(llm, "config", None), "model", repr(llm)),
                                 **run_job(leng, claims, work, "llm", args.concurrency, patterns="none")}
        else:
            result["llm"] = None
        if args.smoke:
            drop_kg(eng)
    result["peak_rss_mb"] = round(peak_rss_mb(), 1)
    emit("verify", result)


if __name__ == "__main__":
    main()
