"""The ``isorag`` command."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from engine._errors import IsoragError

DEMO_DIR = Path(__file__).resolve().parent / "data" / "demo"


def _engine(args: argparse.Namespace, **match: Any) -> Any:
    from engine._config import EngineConfig, MatchSettings
    from engine._engine import Engine

    cfg = EngineConfig.from_env(kg=getattr(args, "kg", None))
    if match:
        from dataclasses import replace

        cfg = cfg.with_(match=replace(cfg.match, **{k: v for k, v in match.items() if v is not None}))
    if getattr(args, "fewshot", None):
        cfg = cfg.with_(fewshot=args.fewshot)
    if getattr(args, "threshold", None) is not None:
        from dataclasses import replace

        cfg = cfg.with_(verify=replace(cfg.verify, threshold=args.threshold))
    return Engine(cfg, llm=False if getattr(args, "no_llm", False) else None)


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def _table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# -- commands ------------------------------------------------------------------------------------------
def cmd_server(args: argparse.Namespace) -> int:
    if args.server == "neo4j":
        from engine import local_neo4j as mod
    else:
        from engine import local_milvus as mod  # type: ignore[no-redef]
    if args.action == "set-password":
        code = mod.cli_set_password()  # type: ignore[attr-defined]
    else:
        code = {"start": mod.cli_start, "stop": mod.cli_stop, "status": mod.cli_status}[args.action]()
    return int(code or 0)


def _loader_options(args: argparse.Namespace) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    for name in ("head", "relation", "tail"):
        v = getattr(args, name)
        if v is not None:
            opts[name] = int(v) if v.isdigit() else v
    if args.delimiter is not None:
        opts["delimiter"] = args.delimiter.encode().decode("unicode_escape")
    if args.header is not None:
        opts["header"] = args.header == "yes"
    if args.nodes:
        opts["nodes"] = args.nodes
    if args.edges:
        opts["edges"] = args.edges
    return opts


def cmd_load(args: argparse.Namespace) -> int:
    with _engine(args) as eng:
        echo = (lambda m: print(m, file=sys.stderr)) if args.verbose else None
        if args.from_neo4j:
            if not args.label or not args.key_prop:
                raise SystemExit("isorag load --from-neo4j needs --label and --key-prop")
            summary = eng.load_existing(args.label, args.key_prop, args.name_prop, progress=not args.quiet,
                                        batch_size=args.batch_size)
        else:
            if not args.path:
                raise SystemExit("isorag load: give a PATH (or --from-neo4j)")
            summary = eng.load(args.path, args.format, strict=args.strict, progress=not args.quiet,
                               batch_size=args.batch_size, echo=echo, offline_import=args.offline_import,
                               **_loader_options(args))
        if args.json:
            _print_json(summary.to_dict())
        else:
            print("\n".join(summary.lines()))
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with _engine(args) as eng:
        st = eng.stats()
    if args.json:
        _print_json(st)
        return 0
    n, m = st["neo4j"], st["milvus"]
    print(f"KG {st['kg']!r}")
    print(_table([
        ["entities", f"{n['entities']:,}", f"{m['entities']:,}"],
        ["relations", f"{n['relations']:,}", f"{m['relations']:,}"],
        ["types", f"{n['types']:,}", f"{m['types']:,}"],
        ["triples", f"{n['triples']:,}", "-"],
    ], ["", f"Neo4j {n['uri']}", f"Milvus {m['uri']}"]))
    for kind, extra in m.get("duplicates", {}).items():
        print(f"{extra:,} duplicate {kind} vector rows (one id stored twice): run the load again to remove them")
    print("stores agree" if st["agree"] else "STORES DISAGREE: run the load again to complete it")
    return 0 if st["agree"] else 1


def _print_unmatched(result: Any) -> list[str]:
    """Named pattern nodes that are no entity's name, first (the tables below hold stand-ins); the other warnings."""
    from engine.retrieval import unmatched_warning

    first = [unmatched_warning(text, closest) for text, closest in getattr(result, "unmatched", {}).items()]
    for w in first:
        print(f"warning: {w}")
    return [w for w in result.warnings if w not in first]


def print_retrieval(res: Any) -> None:
    warnings = _print_unmatched(res)
    if not res.subgraphs:
        print("no subgraph matches the pattern")
    for i, sg in enumerate(res.subgraphs, 1):
        print(f"graph [{i}]  GSD {sg.gsd:.4f}")
        print(_table([[t.head.name, t.relation, t.tail.name] for t in sg.triples], ["head", "relation", "tail"]))
        print()
    if res.answers:
        print("answers: " + ", ".join(f"{a.entity.name} ({a.gsd:.3f})" for a in res.answers))
    t = res.timings
    print("timings (ms): " + "  ".join(f"{k} {v:.1f}" for k, v in t.items()))
    for w in warnings:
        print(f"warning: {w}")


def cmd_match(args: argparse.Namespace) -> int:
    text = args.pattern
    if text == "-":
        text = sys.stdin.read()
    elif os.path.isfile(text):
        text = Path(text).read_text(encoding="utf-8")
    with _engine(args, k_node=args.k_node, k_rel=args.k_rel, k_type=args.k_type,
                 injective="none" if args.homomorphic else args.injective, directed=args.directed, deadline_s=args.deadline) as eng:
        res = eng.retrieve(text, k=args.k)
    if args.json:
        _print_json(res.to_dict())
    else:
        print_retrieval(res)
    return 0


def cmd_drop(args: argparse.Namespace) -> int:
    if not args.yes:
        raise SystemExit(f"isorag drop deletes KG {args.kg!r} from Neo4j and Milvus: add --yes")
    with _engine(args) as eng:
        eng.drop()
    print(f"dropped KG {args.kg!r}")
    return 0


def print_answer(ans: Any) -> None:
    """An Answer as text: the answer, its evidence as a table per subgraph, the timings."""
    print(f"question: {ans.query}")
    if ans.pattern is not None:
        origin = "LLM" if ans.pattern_text is not None else "given"
        print(f"pattern ({origin}): {json.dumps(ans.pattern.to_json(), ensure_ascii=False)}")
    warnings = _print_unmatched(ans)
    if ans.failed_stage:
        print(f"FAILED at stage {ans.failed_stage}: {ans.error}")
    else:
        print(f"answer: {ans.text.strip()}")
    if ans.answers:
        print("answer entities: " + ", ".join(f"{a.entity.name} (GSD {a.gsd:.3f})" for a in ans.answers))
    print()
    if not ans.subgraphs and not ans.failed_stage:
        print("evidence: no subgraph of the KG matches the pattern")
    for i, sg in enumerate(ans.subgraphs, 1):
        print(f"evidence graph [{i}]  GSD {sg.gsd:.4f}")
        print(_table([[t.head.name, t.relation, t.tail.name] for t in sg.triples], ["head", "relation", "tail"]))
        print()
    sc = getattr(ans, "scored", None)
    if sc is not None and sc.triples:
        print(f"scored triples ({sc.model}, {len(sc.triples)} of the {sc.report.edges:,}-triple neighbourhood"
              f"{', linked: ' + ', '.join(x.name for x in sc.linked) if sc.linked else ''}):")
        print(_table([[t.head.name, t.relation, t.tail.name, f"{t.score:.4f}"] for t in sc.triples[:10]],
                     ["head", "relation", "tail", "confidence"]))
        if len(sc.triples) > 10:
            print(f"... and {len(sc.triples) - 10} more")
        print()
    if getattr(ans, "answer_source", None):
        print(f"answer source: {ans.answer_source}")
    print("timings (ms): " + "  ".join(f"{k} {v:.1f}" for k, v in ans.timings.items()))
    if ans.usage.get("calls"):
        u = ans.usage
        print(f"LLM: {u['calls']} call(s), {u['prompt_tokens']} prompt + {u['completion_tokens']} completion tokens, "
              f"{u['retries']} retries")
    for w in warnings:
        print(f"warning: {w}")


def cmd_ask(args: argparse.Namespace) -> int:
    pattern = None
    if args.pattern:
        text = args.pattern
        if text == "-":
            text = sys.stdin.read()
        elif os.path.isfile(text):
            text = Path(text).read_text(encoding="utf-8")
        pattern = text
    with _engine(args, k_node=args.k_node, k_rel=args.k_rel, deadline_s=args.deadline) as eng:
        ans = eng.ask(args.question, pattern=pattern, k=args.k, raise_errors=False)
    if args.json:
        _print_json(ans.to_dict())
    elif ans.failed_stage == "pattern":
        print(f"isorag: error: {ans.error}", file=sys.stderr)
    else:
        print_answer(ans)
    return 2 if ans.failed_stage else 0


def cmd_verify(args: argparse.Namespace) -> int:
    from engine.jobs import format_summary, parse_shard, run_verify_job

    shard = parse_shard(args.shard)
    with _engine(args, k_node=args.k_node, k_rel=args.k_rel, deadline_s=args.deadline) as eng:
        summary = run_verify_job(eng, args.claims, args.out, concurrency=args.concurrency, shard=shard,
                                 fmt=args.format, retry_failed=args.retry_failed, progress=not args.quiet,
                                 k=args.k)
    if args.json:
        _print_json(summary)
    else:
        print(format_summary(summary))
    # malformed rows and failed claims are counted, reported and make the exit status non-zero
    return 1 if summary["malformed"] or summary["failed"] else 0


def cmd_train_scorer(args: argparse.Namespace) -> int:
    """Train a triple scorer (DDE+MLP or QR-GAT) on question-answer files and write its checkpoint."""
    import torch

    from engine.scoring.train import TrainSettings

    if args.threads:
        torch.set_num_threads(args.threads)
    config: dict[str, Any] = {}
    for item in args.set or []:
        key, _, value = item.partition("=")
        if not key or not _:
            raise SystemExit(f"isorag train-scorer: --set takes KEY=VALUE, got {item!r}")
        try:
            config[key] = json.loads(value)
        except json.JSONDecodeError:
            config[key] = value
    settings = TrainSettings(epochs=args.epochs, patience=args.patience, lr=args.lr, batch_questions=args.batch,
                             recall_k=args.recall_k, seed=args.seed, max_minutes=args.max_minutes,
                             threads=args.threads, device=args.device, pos_weight=args.pos_weight,
                             neg_samples=args.neg_samples, near_share=args.near_share, walk_aux=args.walk_aux,
                             bridge_target=args.bridge_target)
    qa: Any = args.qa
    if args.relation_paths:
        from engine.scoring.train import read_qa

        if len(args.relation_paths) != len(args.qa):
            raise SystemExit("isorag train-scorer: give one --relation-paths file per --qa file")
        qa = [r for path, rp in zip(args.qa, args.relation_paths)
              for r in read_qa(path, limit=args.limit, relation_paths=rp)]
    with _engine(args) as eng:
        res = eng.train_scorer(qa, model=args.model, out=args.out, dev=args.dev, hops=args.hops,
                               max_edges=args.max_edges, cache=args.cache, settings=settings, model_config=config,
                               limit=None if args.relation_paths else args.limit, progress=not args.quiet)
    if args.json:
        _print_json(res.to_dict())
    else:
        print(f"trained {type(res.model).__name__} on {res.questions:,} questions in {res.train_s:.1f} s "
              f"(data {res.prepare_s:.1f} s); best dev triple recall@{args.recall_k} {res.best_dev_recall:.4f} "
              f"at epoch {res.best_epoch}")
        print(f"checkpoint: {res.checkpoint}  (use it with ISORAG_SCORER={res.checkpoint})")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Start the local servers, load the bundled demo KG, print its stats and answer a demo question."""
    args.kg = args.kg or "demo"
    with _engine(args) as eng:
        print(f"== loading the demo KG ({DEMO_DIR / 'kb.txt'}) into KG {eng.kg!r}", flush=True)
        summary = eng.load(DEMO_DIR / "kb.txt", progress=not args.quiet)
        print("\n".join(summary.lines()))
    print()
    cmd_stats(argparse.Namespace(kg=args.kg, json=False))
    qfile = DEMO_DIR / "questions.jsonl"
    if qfile.exists():
        q = json.loads(qfile.read_text(encoding="utf-8").splitlines()[-1])
        print(f"\n== question with its pattern given: {q['question']}")
        with _engine(args) as eng:
            ans = eng.ask(q["question"], pattern=q["pattern"], raise_errors=False)
            print_answer(ans)
            print(f"   expected: {', '.join(q['answers'][:5])}")
            if eng.llm is not None:
                print(f"\n== the same question, pattern and answer by the LLM ({eng.llm!r})")
                print_answer(eng.ask(q["question"], raise_errors=False))
            else:
                print("\n(no LLM configured: set ISORAG_LLM_BASE_URL and ISORAG_LLM_MODEL to have it write the "
                      "pattern and the answer)")
    return 0


def cmd_synth(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from engine.synth import SHAPES, SynthSettings, Synthesizer, write_jsonl

    shapes = [x.strip() for x in args.shapes.split(",") if x.strip()] if args.shapes else list(SHAPES)
    settings = replace(SynthSettings(), max_answers=args.max_answers, drop_redundant=args.drop_redundant,
                       corruptions=args.corruptions)
    with _engine(args) as eng:
        llm = None if args.no_llm else eng.llm
        syn = Synthesizer(eng.graph, seed=args.seed, settings=settings, llm=llm)
        records = list(syn.generate(args.n, shapes))
        write_jsonl(records, args.out)
    counts: dict[str, int] = {}
    for r in records:
        counts[r["shape"]] = counts.get(r["shape"], 0) + 1
    print(json.dumps({"out": args.out, "records": len(records), "by_shape": counts, "dropped": syn.dropped}))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from engine.evaluate import evaluate, plot_breakdown, read_items

    items = read_items(args.file, limit=args.limit)
    match = {k: v for k, v in (("k_node", args.k_node), ("k_rel", args.k_rel)) if v is not None}
    if args.directed:
        match["directed"] = True
    with _engine(args) as eng:
        if args.pattern == "llm" and eng.llm is None:
            raise SystemExit("--pattern llm needs an LLM endpoint: set ISORAG_LLM_BASE_URL and ISORAG_LLM_MODEL")
        res = evaluate(eng, items, k=args.k, use_llm_pattern=args.pattern == "llm", verify=not args.no_verify,
                       progress=not args.quiet, **match)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2, ensure_ascii=False, default=str) + "\n")
    if args.png:
        plot_breakdown(res["summary"], args.png, title=f"isorag eval {Path(args.file).name}")
    out = {"summary": res["summary"], "latency_ms": res["latency_ms"], "failed": res["failed"]}
    _print_json(out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="isorag", description="Knowledge-graph RAG over Neo4j + Milvus")
    sub = p.add_subparsers(dest="cmd", required=True)

    for server in ("neo4j", "milvus"):
        s = sub.add_parser(server, help=f"the embedded local {server} server")
        # set-password: root's password of another Milvus (MILVUS_URI), from MILVUS_ROOT_PASSWORD (compose)
        actions = ["start", "stop", "status"] + (["set-password"] if server == "milvus" else [])
        s.add_argument("action", choices=actions)
        s.set_defaults(func=cmd_server, server=server)

    s = sub.add_parser("load", help="load a KG file into Neo4j and Milvus")
    s.add_argument("path", nargs="?")
    s.add_argument("--format", choices=["hrt", "tsv", "csv", "nt", "ttl", "jsonl", "tables"])
    s.add_argument("--kg", default=None, help="KG name (default $ISORAG_KG or 'default')")
    s.add_argument("--strict", action="store_true", help="stop at the first malformed line")
    s.add_argument("--batch-size", type=int, default=10_000)
    s.add_argument("--head"); s.add_argument("--relation"); s.add_argument("--tail")  # noqa: E702
    s.add_argument("--delimiter"); s.add_argument("--header", choices=["yes", "no"])  # noqa: E702
    s.add_argument("--nodes"); s.add_argument("--edges")  # noqa: E702
    s.add_argument("--offline-import", action="store_true",
                   help="first load of a big KG into an empty local Neo4j by neo4j-admin database import "
                        "(the server is stopped meanwhile; see loaders/offline.py)")
    s.add_argument("--from-neo4j", action="store_true", help="embed a graph already in Neo4j")
    s.add_argument("--label"); s.add_argument("--key-prop"); s.add_argument("--name-prop")  # noqa: E702
    s.add_argument("--json", action="store_true")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.add_argument("-v", "--verbose", action="store_true", help="print the first skipped lines")
    s.set_defaults(func=cmd_load)

    s = sub.add_parser("stats", help="counts from both stores, and whether they agree")
    s.add_argument("--kg", default=None)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_stats)

    s = sub.add_parser("match", help="exact top-k subgraphs for a pattern")
    s.add_argument("pattern", help='pattern JSON ({"triples": [[h, r, t], ...]}), a file, or - for stdin')
    s.add_argument("--kg", default=None)
    s.add_argument("-k", type=int, default=None)
    s.add_argument("--k-node", type=int); s.add_argument("--k-rel", type=int)  # noqa: E702
    s.add_argument("--k-type", type=int)
    s.add_argument("--injective", choices=["nodes", "edges", "none"], default=None,
                   help="what must map to distinct KG items: nodes (subgraph isomorphism, the default), "
                        "edges (relationships only, as in Cypher) or none (homomorphism)")
    s.add_argument("--homomorphic", action="store_true", help="same as --injective none")
    s.add_argument("--directed", action="store_true", help="respect edge direction")
    s.add_argument("--deadline", type=float, help="seconds")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_match)

    s = sub.add_parser("drop", help="delete a KG from both stores")
    s.add_argument("--kg", required=True)
    s.add_argument("--yes", action="store_true")
    s.set_defaults(func=cmd_drop)

    s = sub.add_parser("ask", help="answer a question from the KG, with its evidence")
    s.add_argument("question")
    s.add_argument("--pattern", help="pattern JSON (a file, or - for stdin); default: the LLM writes it")
    s.add_argument("--kg", default=None)
    s.add_argument("-k", type=int, default=None, help="subgraphs to retrieve (default 3)")
    s.add_argument("--k-node", type=int); s.add_argument("--k-rel", type=int)  # noqa: E702
    s.add_argument("--deadline", type=float, help="seconds")
    s.add_argument("--fewshot", help="few-shot examples: a bundled name or a directory (default demo)")
    s.add_argument("--no-llm", action="store_true", help="do not use the LLM even when one is configured")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_ask)

    s = sub.add_parser("verify", help="verify claims from a JSON Lines or CSV file (resumable, shardable)")
    s.add_argument("claims", help="JSON Lines or CSV: id, claim, optional label, optional pattern")
    s.add_argument("--out", required=True, help="verdicts, one JSON line per claim (appended; a rerun resumes)")
    s.add_argument("--kg", default=None)
    s.add_argument("--format", choices=["jsonl", "csv"], help="default: from the file's suffix")
    s.add_argument("--concurrency", type=int, default=4)
    s.add_argument("--shard", help="i/n: only the ids that hash to shard i of n (from 0)")
    s.add_argument("--threshold", type=float, help="without an LLM: the largest entity distance a claim "
                   "element may have to its KG match (default 0.5)")
    s.add_argument("-k", type=int, default=None, help="evidence subgraphs per claim (default 3)")
    s.add_argument("--k-node", type=int); s.add_argument("--k-rel", type=int)  # noqa: E702
    s.add_argument("--deadline", type=float, help="seconds per claim")
    s.add_argument("--fewshot", help="few-shot examples: a bundled name or a directory (default demo)")
    s.add_argument("--no-llm", action="store_true", help="judge by the rule even when an LLM is configured")
    s.add_argument("--retry-failed", action="store_true", help="verify again the claims whose verification failed")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.set_defaults(func=cmd_verify)

    s = sub.add_parser("synth", help="sample ground-truth questions and claims from the loaded KG (SynthKGQA)")
    s.add_argument("--kg", default=None)
    s.add_argument("--out", required=True, help="JSON Lines file to write")
    s.add_argument("--n", type=int, default=100, help="records (shapes taken in turn)")
    s.add_argument("--shapes", help="comma list of path1,path2,path3,star,conj2,conj3 (default all)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--max-answers", type=int, default=10, help="drop samples with more answers")
    s.add_argument("--corruptions", type=int, default=1, help="REFUTED claims per record")
    s.add_argument("--drop-redundant", action="store_true", help="drop samples whose seeds are redundant")
    s.add_argument("--no-llm", action="store_true", help="no LLM paraphrase even when one is configured")
    s.set_defaults(func=cmd_synth)

    s = sub.add_parser("eval", help="metrics of retrieval, answers and verification on a ground-truth file")
    s.add_argument("file", help="isorag synth JSON Lines, MetaQA qa_*.txt or PathQuestion PQ-*.txt")
    s.add_argument("--kg", default=None)
    s.add_argument("--pattern", choices=["gold", "llm"], default="gold")
    s.add_argument("-k", type=int, default=3)
    s.add_argument("--k-node", type=int); s.add_argument("--k-rel", type=int)  # noqa: E702
    s.add_argument("--directed", action="store_true", help="match edge directions (synth answers are directed)")
    s.add_argument("--limit", type=int, help="first N items")
    s.add_argument("--no-verify", action="store_true", help="skip the claims")
    s.add_argument("--no-llm", action="store_true")
    s.add_argument("--json", help="write the full results here")
    s.add_argument("--png", help="write the breakdown chart here")
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(func=cmd_eval)

    s = sub.add_parser("train-scorer", help="train a triple scorer (DDE+MLP or QR-GAT) from question-answer pairs")
    s.add_argument("--qa", nargs="+", required=True,
                   help="MetaQA files ('question [topic]<TAB>a1|a2') or JSON Lines {question, topics, answers, triples?}")
    s.add_argument("--model", choices=["dde_mlp", "qrgat"], default="dde_mlp")
    s.add_argument("--relation-paths", nargs="+", metavar="FILE",
                   help="per --qa file, its questions' relation paths, one line each (relation names separated "
                        "by commas or spaces; blank: none): training labels are then the triples on walks along "
                        "the path instead of every shortest path topic -> answer")
    s.add_argument("--pos-weight", type=float, default=1.0, help="BCE weight of a positive triple (default 1)")
    s.add_argument("--neg-samples", type=int, default=0,
                   help="negatives sampled per question and epoch (default 0: every triple every epoch); "
                        "cheaper epochs, an unbiased estimate of the full loss")
    s.add_argument("--near-share", type=float, default=0.5,
                   help="share of the sampled negatives drawn from those touching an entity of a positive triple")
    s.add_argument("--walk-aux", type=float, default=1.0,
                   help="weight of the relation walk's answer loss (where the question's walk ends against the "
                        "answers; default 1, 0 turns it off); models built with walk=true, the default")
    s.add_argument("--bridge-target", type=float, default=0.5,
                   help="BCE target of a labelled triple that touches no answer (a bridge on the way; default 0.5; "
                        "1: plain labels): below 1 the triples reaching an answer rank first")
    s.add_argument("--out", required=True, help="checkpoint file to write")
    s.add_argument("--kg", default=None)
    s.add_argument("--dev", nargs="+", help="dev questions for early stopping (default: 10%% of --qa)")
    s.add_argument("--hops", type=int, default=2, help="neighbourhood depth (default 2)")
    s.add_argument("--max-edges", type=int, default=10_000, help="neighbourhood cap in triples (default 10000)")
    s.add_argument("--cache", help="prepared-data cache file: reruns and epochs skip Neo4j and Milvus")
    s.add_argument("--limit", type=int, help="read at most this many questions per file")
    s.add_argument("--epochs", type=int, default=30)
    s.add_argument("--patience", type=int, default=5)
    s.add_argument("--lr", type=float, default=1e-3)
    s.add_argument("--batch", type=int, default=8, help="questions per optimizer step")
    s.add_argument("--recall-k", type=int, default=100, help="K of the dev triple recall@K (early stopping)")
    s.add_argument("--seed", type=int, default=42)
    s.add_argument("--max-minutes", type=float, help="stop training after this many minutes (best weights kept)")
    s.add_argument("--threads", type=int, help="torch threads")
    s.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    s.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="model hyperparameter, e.g. --set hidden=128 --set heads=4 (repeatable)")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_train_scorer)

    s = sub.add_parser("demo", help="load the bundled demo KG and answer a demo question")
    s.add_argument("--kg", default=None)
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(func=cmd_demo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except IsoragError as e:
        print(f"isorag: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("isorag: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
