"""Evaluation commands: ``synth`` (ground-truth questions and claims sampled from a KG) and ``eval`` (retrieval,
answer and verification metrics on a ground-truth file)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Callable

from engine._errors import ConfigError
from engine.cli.arguments import K_MAX, SEED_MAX, in_file, int_type, kg_type, out_file, shapes_type
from engine.cli.common import done, open_engine
from engine.cli.output import print_json

__all__ = ["add_commands", "cmd_eval", "cmd_synth"]


def cmd_synth(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from engine.evaluation.synth import SHAPES, SynthSettings, Synthesizer, write_jsonl

    shapes = args.shapes or list(SHAPES)
    settings = replace(SynthSettings(), max_answers=args.max_answers, drop_redundant=args.drop_redundant,
                       corruptions=args.corruptions)
    with open_engine(args) as eng:
        eng.require_kg(vectors=False)  # synth reads the graph only
        llm = None if args.no_llm else eng.llm
        syn = Synthesizer(eng.graph, seed=args.seed, settings=settings, llm=llm)
        records = list(syn.generate(args.n, shapes))
        write_jsonl(records, args.out)
    counts: dict[str, int] = {}
    for r in records:
        counts[r["shape"]] = counts.get(r["shape"], 0) + 1
    print(json.dumps({"out": args.out, "records": len(records), "by_shape": counts, "dropped": syn.dropped}))
    return done()


def cmd_eval(args: argparse.Namespace) -> int:
    from engine.evaluation.metrics import evaluate, plot_breakdown, read_items

    items = read_items(args.file, limit=args.limit)
    match = {k: v for k, v in (("k_node", args.k_node), ("k_rel", args.k_rel)) if v is not None}
    if args.directed:
        match["directed"] = True
    with open_engine(args) as eng:
        if args.pattern == "llm" and eng.llm is None:
            raise ConfigError("--pattern llm needs an LLM endpoint: set ISORAG_LLM_BASE_URL and ISORAG_LLM_MODEL")
        eng.require_kg()
        res = evaluate(eng, items, k=args.k, use_llm_pattern=args.pattern == "llm", verify=not args.no_verify,
                       progress=not args.quiet, **match)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2, ensure_ascii=False, default=str) + "\n")
    if args.png:
        plot_breakdown(res["summary"], args.png, title=f"isorag eval {Path(args.file).name}")
    print_json({"summary": res["summary"], "latency_ms": res["latency_ms"], "failed": res["failed"]})
    return done()


def add_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    positive, natural = int_type(1), int_type(0)
    k_cand = int_type(1, K_MAX)

    s = command("synth", help="sample ground-truth questions and claims from the loaded KG (SynthKGQA)")
    s.add_argument("--kg", type=kg_type, default=None, help="the KG (default $ISORAG_KG or 'default')")
    s.add_argument("--out", type=out_file, required=True, help="JSON Lines file to write")
    s.add_argument("--n", type=positive, default=100, help="records (shapes taken in turn)")
    s.add_argument("--shapes", type=shapes_type,
                   help="comma list of path1,path2,path3,star,conj2,conj3 (default all)")
    s.add_argument("--seed", type=int_type(0, SEED_MAX), default=0, help="seed of the sampling (default 0)")
    s.add_argument("--max-answers", type=positive, default=10, help="drop samples with more answers")
    s.add_argument("--corruptions", type=natural, default=1, help="REFUTED claims per record")
    s.add_argument("--drop-redundant", action="store_true", help="drop samples whose seeds are redundant")
    s.add_argument("--no-llm", action="store_true", help="no LLM paraphrase even when one is configured")
    s.set_defaults(func=cmd_synth)

    s = command("eval", help="metrics of retrieval, answers and verification on a ground-truth file")
    s.add_argument("file", type=in_file, help="isorag synth JSON Lines, MetaQA qa_*.txt or PathQuestion PQ-*.txt")
    s.add_argument("--kg", type=kg_type, default=None, help="the KG (default $ISORAG_KG or 'default')")
    s.add_argument("--pattern", choices=["gold", "llm"], default="gold",
                   help="gold: the file's patterns (default); llm: the LLM writes them")
    s.add_argument("-k", type=positive, default=3, help="subgraphs per question (default 3)")
    s.add_argument("--k-node", type=k_cand, help="candidate entities per named pattern node (default 16)")
    s.add_argument("--k-rel", type=k_cand, help="candidate relations per known pattern relation (default 16)")
    s.add_argument("--directed", action="store_true", help="match edge directions (synth answers are directed)")
    s.add_argument("--limit", type=positive, help="first N items")
    s.add_argument("--no-verify", action="store_true", help="skip the claims")
    s.add_argument("--no-llm", action="store_true", help="no LLM even when one is configured")
    s.add_argument("--json", type=out_file, help="write the full results here")
    s.add_argument("--png", type=out_file, help="write the breakdown chart here")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_eval)
