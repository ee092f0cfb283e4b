"""Query commands: ``match`` (exact top-k subgraphs of a pattern), ``ask`` (an answer with its evidence) and
``verify`` (verdicts for a file of claims)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

from engine._errors import ConfigError
from engine.cli.arguments import K_MAX, WORKERS_MAX, fewshot_type, float_type, in_file, int_type, kg_type, \
    out_file, pattern_type, shard_type, text_type
from engine.cli.common import EXIT_ERROR, done, open_engine
from engine.cli.output import one_line, print_answer, print_json, print_retrieval

__all__ = ["add_commands", "cmd_ask", "cmd_match", "cmd_verify"]


def cmd_match(args: argparse.Namespace) -> int:
    with open_engine(args, k_node=args.k_node, k_rel=args.k_rel, k_type=args.k_type,
                     injective="none" if args.homomorphic else args.injective, directed=args.directed,
                     deadline_s=args.deadline) as eng:
        res = eng.retrieve(args.pattern, k=args.k)
    if args.json:
        print_json(res.to_dict())
    else:
        print_retrieval(res)
    return done()


def cmd_ask(args: argparse.Namespace) -> int:
    """The answer, or with ``--json`` the whole Answer; a failed stage is one error line and status 2. Who writes
    the pattern is the pipeline's choice (``Engine.pattern_route``), asked first so that a question nobody can
    turn into a pattern is refused before any server starts."""
    with open_engine(args, k_node=args.k_node, k_rel=args.k_rel, deadline_s=args.deadline) as eng:
        if args.pattern is None:
            eng.pattern_route(args.route)
        eng.require_kg()
        ans = eng.ask(args.question, pattern=args.pattern, k=args.k, raise_errors=False, route=args.route)
    if args.json:
        print_json(ans.to_dict())
    elif ans.failed_stage != "pattern":
        print_answer(ans)
    if ans.failed_stage:
        print(f"isorag: error: {one_line(f'{ans.failed_stage}: {ans.error}')}", file=sys.stderr)
        return EXIT_ERROR
    return done()


def cmd_verify(args: argparse.Namespace) -> int:
    """Verdicts appended to ``--out``; malformed rows and failed claims are counted, reported and not clean."""
    from engine.jobs import format_summary, run_verify_job

    if Path(args.out).resolve() == Path(args.claims).resolve():
        raise ConfigError(f"--out {args.out} is the claims file: verdicts go to a file of their own")
    with open_engine(args, k_node=args.k_node, k_rel=args.k_rel, deadline_s=args.deadline) as eng:
        summary = run_verify_job(eng, args.claims, args.out, concurrency=args.concurrency, shard=args.shard,
                                 fmt=args.format, retry_failed=args.retry_failed, progress=not args.quiet,
                                 k=args.k)
    if args.json:
        print_json(summary)
    else:
        print(format_summary(summary))
    return done(not summary["malformed"] and not summary["failed"])


def add_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    positive = int_type(1)
    k_cand = int_type(1, K_MAX)
    seconds = float_type(0, lo_open=True)

    s = command("match", help="exact top-k subgraphs for a pattern")
    s.add_argument("pattern", type=pattern_type,
                   help='pattern JSON ({"triples": [[h, r, t], ...]}), a file, or - for stdin')
    s.add_argument("--kg", type=kg_type, default=None, help="the KG (default $ISORAG_KG or 'default')")
    s.add_argument("-k", type=positive, default=None, help="subgraphs to return (default 3)")
    s.add_argument("--k-node", type=k_cand, help="candidate entities per named pattern node (default 16)")
    s.add_argument("--k-rel", type=k_cand, help="candidate relations per known pattern relation (default 16)")
    s.add_argument("--k-type", type=k_cand, help="candidate types per typed unknown node (default 16)")
    s.add_argument("--injective", choices=["nodes", "edges", "none"], default=None,
                   help="what must map to distinct KG items: nodes (subgraph isomorphism, the default), "
                        "edges (relationships only, as in Cypher) or none (homomorphism)")
    s.add_argument("--homomorphic", action="store_true", help="same as --injective none")
    s.add_argument("--directed", action="store_true", help="respect edge direction")
    s.add_argument("--deadline", type=seconds, help="seconds the search may take (then the best found so far, "
                                                    "marked not exact)")
    s.add_argument("--json", action="store_true", help="print the RetrievalResult as JSON")
    s.set_defaults(func=cmd_match)

    s = command("ask", help="answer a question from the KG, with its evidence")
    s.add_argument("question", type=text_type, help="the question, in plain text")
    s.add_argument("--pattern", type=pattern_type,
                   help="pattern JSON (a file, or - for stdin); default: the LLM writes it")
    s.add_argument("--kg", type=kg_type, default=None, help="the KG (default $ISORAG_KG or 'default')")
    s.add_argument("-k", type=positive, default=None, help="subgraphs to retrieve (default 3)")
    s.add_argument("--k-node", type=k_cand, help="candidate entities per named pattern node (default 16)")
    s.add_argument("--k-rel", type=k_cand, help="candidate relations per known pattern relation (default 16)")
    s.add_argument("--deadline", type=seconds, help="seconds the retrieval may take")
    s.add_argument("--fewshot", type=fewshot_type,
                   help="few-shot examples: a bundled name or a directory (default demo)")
    s.add_argument("--no-llm", action="store_true", help="do not use the LLM even when one is configured")
    s.add_argument("--route", choices=["auto", "llm", "learned"],
                   help="who writes the pattern: auto (default: the learned generator without an LLM or when sure "
                        "enough, else the LLM), llm, learned")
    s.add_argument("--json", action="store_true", help="print the Answer as JSON")
    s.set_defaults(func=cmd_ask)

    s = command("verify", help="verify claims from a JSON Lines or CSV file (resumable, shardable)")
    s.add_argument("claims", type=in_file, help="JSON Lines or CSV: id, claim, optional label, optional pattern")
    s.add_argument("--out", type=out_file, required=True,
                   help="verdicts, one JSON line per claim (appended; a rerun resumes)")
    s.add_argument("--kg", type=kg_type, default=None, help="the KG (default $ISORAG_KG or 'default')")
    s.add_argument("--format", choices=["jsonl", "csv"], help="default: from the file's suffix")
    s.add_argument("--concurrency", type=int_type(1, WORKERS_MAX), default=4, help="claims in flight (default 4)")
    s.add_argument("--shard", type=shard_type, help="i/n: only the ids that hash to shard i of n (from 0)")
    s.add_argument("--threshold", type=float_type(0, 2), help="without an LLM: the largest entity distance a "
                   "claim element may have to its KG match (default 0.5)")
    s.add_argument("-k", type=positive, default=None, help="evidence subgraphs per claim (default 3)")
    s.add_argument("--k-node", type=k_cand, help="candidate entities per named pattern node (default 16)")
    s.add_argument("--k-rel", type=k_cand, help="candidate relations per known pattern relation (default 16)")
    s.add_argument("--deadline", type=seconds, help="seconds per claim")
    s.add_argument("--fewshot", type=fewshot_type,
                   help="few-shot examples: a bundled name or a directory (default demo)")
    s.add_argument("--no-llm", action="store_true", help="judge by the rule even when an LLM is configured")
    s.add_argument("--retry-failed", action="store_true", help="verify again the claims whose verification failed")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.set_defaults(func=cmd_verify)
