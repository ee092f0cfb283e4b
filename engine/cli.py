"""The ``isorag`` command.

Arguments are checked when they are parsed (numbers in range and finite, readable input files, writable outputs,
patterns, shards, KG names), and the environment (``ISORAG_*``, ``NEO4J_*``, ``MILVUS_*``) before a command
starts, so bad input fails before a server or a model starts. Errors are one line on stderr.

Exit statuses:

    0    done
    1    done, but the result is not clean: the stores disagree (``stats``), malformed rows or failed claims
         (``verify``), a server that is not running (``neo4j status``)
    2    refused, one line ``isorag: error: ...`` on stderr: bad arguments, environment or input, a KG that does
         not exist, a store that cannot be reached (an :class:`~engine._errors.IsoragError`, a usage error or an
         operating-system error such as a file that cannot be written)
    70   internal error, a bug in isorag: one line ``isorag: internal error: ...`` (``ISORAG_DEBUG=1`` prints the
         traceback); 70 is sysexits' EX_SOFTWARE
    130  interrupted (Ctrl-C)
    141  stdout was closed early (e.g. piped into ``head``): nothing more to say
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NoReturn, Sequence

from engine._errors import ConfigError, InputError, IsoragError

if TYPE_CHECKING:  # pragma: no cover
    from engine._engine import Engine

DEMO_DIR = Path(__file__).resolve().parent / "data" / "demo"

EXIT_OK, EXIT_NOT_CLEAN, EXIT_ERROR, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_PIPE = 0, 1, 2, 70, 130, 141
EPILOG = """exit status: 0 done; 1 done but not clean (stores disagree, malformed or failed claims, neo4j status: not
running); 2 refused: bad arguments, environment or input, missing KG, unreachable store (one line
'isorag: error: ...' on stderr); 70 internal error (a bug: set ISORAG_DEBUG=1 for the traceback); 130 interrupted;
141 output closed early"""

#: caps on arguments, each with its reason
K_MAX = 16_384  # Milvus' topk
BATCH_MAX = 1_000_000  # triples per Neo4j transaction in a load
WORKERS_MAX = 1024  # threads (verify --concurrency, train-scorer --threads)
SEED_MAX = 2 ** 32 - 1  # numpy's seeds


# -- argument types: each refuses a bad value with a one-line reason at parse time -------------------------------
def _int_type(lo: int, hi: int | None = None) -> Callable[[str], int]:
    if hi is not None:
        what = f"an integer from {lo:,} to {hi:,}"
    else:
        what = "a positive integer" if lo == 1 else f"an integer >= {lo:,}"

    def parse(text: str) -> int:
        try:
            n = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        if n < lo or hi is not None and n > hi:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return n

    parse.__name__ = "integer"
    parse.bounds = (lo, hi, False, True)  # type: ignore[attr-defined]  # (lo, hi, lo_open, integer): for tests
    return parse


def _float_type(lo: float, hi: float | None = None, *, lo_open: bool = False) -> Callable[[str], float]:
    if hi is not None:
        what = f"a number in {'(' if lo_open else '['}{lo:g}, {hi:g}]"
    else:
        what = f"a finite number {'>' if lo_open else '>='} {lo:g}"

    def parse(text: str) -> float:
        try:
            x = float(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        # nan passes no comparison and inf never ends a deadline: both refused
        if not math.isfinite(x) or x < lo or lo_open and x == lo or hi is not None and x > hi:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return x

    parse.__name__ = "number"
    parse.bounds = (lo, hi, lo_open, False)  # type: ignore[attr-defined]
    return parse


def _kg_type(text: str) -> str:
    from engine._config import check_kg_name

    try:
        return check_kg_name(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _readable(p: Path, what: str, *, directory_ok: bool = False) -> None:
    if not p.exists():
        raise argparse.ArgumentTypeError(f"{what} {str(p)!r} does not exist")
    if p.is_dir():
        if directory_ok:
            if not os.access(p, os.R_OK | os.X_OK):
                raise argparse.ArgumentTypeError(f"{what} {str(p)!r}: permission denied")
            return
        raise argparse.ArgumentTypeError(f"{what} {str(p)!r} is a directory, not a file")
    try:
        with open(p, "rb") as f:
            f.read(1)
    except OSError as e:
        raise argparse.ArgumentTypeError(f"{what} {str(p)!r}: {e.strerror or e}") from None


def _in_file(text: str) -> str:
    """A file that exists and can be read."""
    _readable(Path(text).expanduser(), "file")
    return text


def _source(text: str) -> str:
    """A source to load: a readable file, or a directory (``tables``: nodes.csv + edges.csv)."""
    _readable(Path(text).expanduser(), "source", directory_ok=True)
    return text


def _out_file(text: str) -> str:
    """A file that can be written: not a directory, in a directory that exists (or can be made) and is writable."""
    p = Path(text).expanduser()
    if not text.strip():
        raise argparse.ArgumentTypeError("empty path")
    if p.is_dir():
        raise argparse.ArgumentTypeError(f"output {text!r} is a directory, not a file")
    if p.exists():
        if not os.access(p, os.W_OK):
            raise argparse.ArgumentTypeError(f"output {text!r}: permission denied")
        return text
    parent = p.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"output {text!r}: {str(parent)!r} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"output {text!r}: cannot write in {str(parent)!r} (permission denied)")
    return text


def _read_text(p: Path, what: str) -> str:
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise argparse.ArgumentTypeError(f"{what} {str(p)!r}: {e.strerror or e}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise argparse.ArgumentTypeError(
            f"{what} {str(p)}:{line}: not valid UTF-8: byte 0x{raw[e.start]:02x}") from None


def _pattern_type(text: str) -> str:
    """A pattern: its JSON text, a file holding it, or - for stdin; parsed now, so a bad one fails at once."""
    from engine.retrieval.pattern import Pattern
    from engine._errors import PatternError

    if text == "-":
        data = sys.stdin.buffer.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise argparse.ArgumentTypeError(f"pattern on stdin: not valid UTF-8: byte 0x{data[e.start]:02x}") from None
    elif not text.lstrip().startswith(("{", "[")):
        p = Path(text)
        if not os.path.lexists(text):
            raise argparse.ArgumentTypeError(f"{text!r} is neither pattern JSON nor a file")
        if p.is_dir():
            raise argparse.ArgumentTypeError(f"pattern file {text!r} is a directory, not a file")
        text = _read_text(p, "pattern file")
    try:
        Pattern.from_json(text)
    except PatternError as e:
        raise argparse.ArgumentTypeError(f"not a pattern: {e}") from None
    return text


def _text_type(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("empty text")
    return text


def _delimiter_type(text: str) -> str:
    """One character; escapes as in Python (``\\t``, ``\\x1f``, ``\\u00a6``)."""
    value = text
    if "\\" in text:
        try:
            value = text.encode("ascii", "backslashreplace").decode("unicode_escape")
        except UnicodeDecodeError as e:
            raise argparse.ArgumentTypeError(f"bad escape in {text!r}: {e.reason}") from None
    if len(value) != 1 or value in "\r\n":
        raise argparse.ArgumentTypeError(f"must be one character other than a line break, got {text!r}")
    return value


def _column_type(text: str) -> int | str:
    """A column name or a 0-based position."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty column name")
    return int(text) if text.isdigit() else text


def _shard_type(text: str) -> tuple[int, int]:
    from engine.jobs import parse_shard

    try:
        shard = parse_shard(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    assert shard is not None
    return shard


def _shapes_type(text: str) -> list[str]:
    from engine.evaluation.synth import SHAPES

    shapes = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in shapes if x not in SHAPES]
    if bad or not shapes:
        raise argparse.ArgumentTypeError(f"unknown shape(s) {', '.join(bad) or repr(text)}; known: {', '.join(SHAPES)}")
    return shapes


def _key_value_type(text: str) -> tuple[str, Any]:
    key, eq, value = text.partition("=")
    if not eq or not key.strip().isidentifier():
        raise argparse.ArgumentTypeError(f"takes KEY=VALUE, got {text!r}")
    try:
        parsed: Any = json.loads(value)
    except ValueError:
        parsed = value
    if isinstance(parsed, float) and not math.isfinite(parsed):
        raise argparse.ArgumentTypeError(f"{key}: not a finite number: {value!r}")
    return key.strip(), parsed


def _device_type(text: str) -> str:
    if not re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", text.strip().lower()):
        raise argparse.ArgumentTypeError(f"use auto, cpu, mps, cuda or cuda:N, got {text!r}")
    return text.strip().lower()


def _fewshot_type(text: str) -> str:
    """A bundled name, a directory of ``<kind>.jsonl`` files or a prefix ``P`` of ``P_<kind>.jsonl`` files."""
    from engine.answering.prompting import FEWSHOT_DIR

    p = Path(text).expanduser()
    if p.is_dir() or p.name and any(p.parent.glob(f"{p.name}_*.jsonl")):
        return text
    if (FEWSHOT_DIR / f"{text}_pattern.jsonl").is_file() or (FEWSHOT_DIR / f"{text}.jsonl").is_file():
        return text
    known = sorted({f.stem.rsplit("_", 1)[0] for f in FEWSHOT_DIR.glob("*.jsonl")})
    raise argparse.ArgumentTypeError(f"{text!r} is neither a directory, a prefix of *_<kind>.jsonl files, nor a "
                                     f"bundled set ({', '.join(known)})")


class _UsageError(Exception):
    """A bad command line (argparse's errors, made one line)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        sub = self.prog.split(" ", 1)[1] + ": " if " " in self.prog else ""
        raise _UsageError(f"{sub}{message} (see {self.prog} --help)")


def _engine(args: argparse.Namespace, **match: Any) -> Engine:
    """The engine of a command: its configuration is checked here, its stores and model start at first use."""
    from engine._config import EngineConfig
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


def _print_report(report: Any, as_json: bool) -> None:
    """A command's report (load, sync, apply, check): its ``to_dict()`` as JSON, or its ``lines()``."""
    if as_json:
        _print_json(report.to_dict())
    else:
        print("\n".join(report.lines()))


def _table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# -- commands ------------------------------------------------------------------------------------------
def cmd_server(args: argparse.Namespace) -> int:
    if args.server == "neo4j":
        from engine.servers import neo4j as mod
    else:
        from engine.servers import milvus as mod  # type: ignore[no-redef]
    if args.action == "set-password":
        code = mod.cli_set_password()  # type: ignore[attr-defined]
    else:
        code = {"start": mod.cli_start, "stop": mod.cli_stop, "status": mod.cli_status}[args.action]()
    return int(code or 0)


_LOADER_OPTIONS = ("head", "relation", "tail", "delimiter", "header", "nodes", "edges")


def _loader_options(args: argparse.Namespace) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    for name in ("head", "relation", "tail", "delimiter", "nodes", "edges"):
        v = getattr(args, name)
        if v is not None:
            opts[name] = v
    if args.header is not None:
        opts["header"] = args.header == "yes"
    return opts


#: what ``--from-neo4j`` does, per command (for the message refusing a file source's options beside it)
_FROM_NEO4J = {"load": "embeds a graph already in Neo4j", "sync": "re-syncs a graph adopted from Neo4j"}


def _check_source_args(args: argparse.Namespace, command: str) -> None:
    """What argparse cannot say alone for ``load`` and ``sync``: which options go together. Then the source is opened
    and read up to its first record, so a bad option, an unknown format or a file with nothing in it fails before
    any server."""
    given = [f"--{n}" for n in _LOADER_OPTIONS if getattr(args, n) is not None]
    if args.from_neo4j:
        extra = ([args.path] if args.path else []) + given + (["--format"] if args.format else []) \
            + (["--offline-import"] if getattr(args, "offline_import", False) else []) \
            + (["--strict"] if args.strict else [])
        if extra:
            raise ConfigError(f"{command} --from-neo4j {_FROM_NEO4J[command]}: it takes no {', '.join(extra)}")
        if not args.label or not args.key_prop:
            raise ConfigError(f"{command} --from-neo4j needs --label and --key-prop")
        return
    adopt = [o for o, v in (("--label", args.label), ("--key-prop", args.key_prop), ("--name-prop", args.name_prop),
                            ("--aliases-prop", getattr(args, "aliases_prop", None))) if v]
    if adopt:
        raise ConfigError(f"{', '.join(adopt)}: only with --from-neo4j")
    if not args.path and not (args.nodes and args.edges):
        raise ConfigError(f"{command} needs a PATH (or --nodes and --edges, or --from-neo4j)")
    from loaders import open_source
    from loaders.bulk import LoadSummary, _Skips, peek_records

    summary = LoadSummary(path=str(args.path or args.nodes))
    peek_records(open_source(args.path, args.format, strict=args.strict, on_skip=_Skips(summary),
                             **_loader_options(args)), summary)


def cmd_load(args: argparse.Namespace) -> int:
    _check_source_args(args, "load")
    with _engine(args) as eng:
        echo = (lambda m: print(m, file=sys.stderr)) if args.verbose else None
        if args.from_neo4j:
            summary = eng.load_existing(args.label, args.key_prop, args.name_prop, progress=not args.quiet,
                                        batch_size=args.batch_size, aliases=args.aliases_prop)
        else:
            summary = eng.load(args.path, args.format, strict=args.strict, progress=not args.quiet,
                               batch_size=args.batch_size, echo=echo, offline_import=args.offline_import,
                               **_loader_options(args))
        _print_report(summary, args.json)
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    """isorag sync: make a KG equal to a file, or re-sync a graph adopted from Neo4j."""
    _check_source_args(args, "sync")
    with _engine(args) as eng:
        if args.from_neo4j:
            report = eng.resync_existing(args.label, args.key_prop, args.name_prop, dry_run=args.dry_run,
                                         progress=not args.quiet)
        else:
            report = eng.sync(args.path, args.format, dry_run=args.dry_run, strict=args.strict,
                              progress=not args.quiet, batch_size=args.batch_size, **_loader_options(args))
        _print_report(report, args.json)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with _engine(args) as eng:
        st = eng.stats()
    if args.json:
        _print_json(st)
        return 0 if st["agree"] else 1
    n, m = st["neo4j"], st["milvus"]
    print(f"KG {st['kg']!r}")
    print(_table([
        ["entities", f"{n['entities']:,}", f"{m['entities']:,}"],
        ["relations", f"{n['relations']:,}", f"{m['relations']:,}"],
        ["types", f"{n['types']:,}", f"{m['types']:,}"],
        ["triples", f"{n['triples']:,}", "-"],
    ], ["", f"Neo4j {n['uri']}", f"Milvus {m['uri']}"]))
    ver = st.get("version") or {}
    print(f"version {ver.get('seq', 0)}" + (f" (applied {ver['at']})" if ver.get("at") else ""))
    if st.get("queued"):
        print(f"{st['queued']:,} ids queued for Milvus by a change set not finished: run it again, or "
              f"isorag check --kg {st['kg']} --repair")
    for kind, extra in m.get("duplicates", {}).items():
        print(f"{extra:,} duplicate {kind} vector rows (one id stored twice): run the load again to remove them")
    if st.get("writer"):
        print(f"being written now by {st['writer']['info']}")
    if st["agree"]:
        print("stores agree")
    elif not m["exists"]:
        print(f"STORES DISAGREE: the KG is in Neo4j but has no collection in Milvus: run the load again to embed it")
    elif not n["exists"]:
        print(f"STORES DISAGREE: the KG has collections in Milvus but is not in Neo4j: drop it "
              f"(isorag drop --kg {st['kg']} --yes) and load it again")
    else:
        print("STORES DISAGREE: run the load again to complete it")
    return 0 if st["agree"] else 1


def _print_unmatched(result: Any) -> list[str]:
    """Named pattern nodes that are no entity's name, first (the tables below hold stand-ins); the other warnings."""
    from engine.retrieval.results import unmatched_warning

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
    with _engine(args, k_node=args.k_node, k_rel=args.k_rel, k_type=args.k_type,
                 injective="none" if args.homomorphic else args.injective, directed=args.directed, deadline_s=args.deadline) as eng:
        res = eng.retrieve(args.pattern, k=args.k)
    if args.json:
        _print_json(res.to_dict())
    else:
        print_retrieval(res)
    return 0


def cmd_drop(args: argparse.Namespace) -> int:
    if not args.yes:
        raise ConfigError(f"isorag drop deletes KG {args.kg!r} from Neo4j and Milvus: add --yes")
    with _engine(args) as eng:
        eng.drop()
    print(f"dropped KG {args.kg!r}")
    return 0


def print_answer(ans: Any) -> None:
    """An Answer as text: the answer, its evidence as a table per subgraph, the timings."""
    print(f"question: {ans.query}")
    if ans.pattern is not None:
        origin = "LLM" if ans.pattern_text is not None else "given"
        if getattr(ans, "pattern_source", None) == "learned":
            origin = f"learned, probability {ans.pattern_probability:.3f}"
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


_NO_LLM = ("no LLM to write the pattern and no pattern generator for this KG: pass --pattern, train a generator "
           "(isorag train-generator), or configure an LLM with ISORAG_LLM_BASE_URL and ISORAG_LLM_MODEL")


def cmd_ask(args: argparse.Namespace) -> int:
    with _engine(args, k_node=args.k_node, k_rel=args.k_rel, deadline_s=args.deadline) as eng:
        route = args.route or eng.config.route
        if args.pattern is None:
            has_gen = route != "llm" and eng.generator_path() is not None
            if route == "learned" and not has_gen:
                from engine.learned.router import NO_GENERATOR_HELP

                raise ConfigError(NO_GENERATOR_HELP)
            if not has_gen and eng.llm is None:
                raise ConfigError(_NO_LLM)
        eng.require_kg()
        ans = eng.ask(args.question, pattern=args.pattern, k=args.k, raise_errors=False, route=route)
    if args.json:
        _print_json(ans.to_dict())
    elif ans.failed_stage != "pattern":
        print_answer(ans)
    if ans.failed_stage:
        print(f"isorag: error: {_one_line(f'{ans.failed_stage}: {ans.error}')}", file=sys.stderr)
    return EXIT_ERROR if ans.failed_stage else 0


def cmd_verify(args: argparse.Namespace) -> int:
    from engine.jobs import format_summary, run_verify_job

    if Path(args.out).resolve() == Path(args.claims).resolve():
        raise ConfigError(f"--out {args.out} is the claims file: verdicts go to a file of their own")
    with _engine(args, k_node=args.k_node, k_rel=args.k_rel, deadline_s=args.deadline) as eng:
        summary = run_verify_job(eng, args.claims, args.out, concurrency=args.concurrency, shard=args.shard,
                                 fmt=args.format, retry_failed=args.retry_failed, progress=not args.quiet,
                                 k=args.k)
    if args.json:
        _print_json(summary)
    else:
        print(format_summary(summary))
    # malformed rows and failed claims are counted, reported and make the exit status non-zero
    return EXIT_NOT_CLEAN if summary["malformed"] or summary["failed"] else 0


def _read_questions(paths: Sequence[str], limit: int | None, relation_paths: Sequence[str] | None) -> list[Any]:
    from engine.scoring.qa import read_qa

    out = []
    for i, path in enumerate(paths):
        rows = read_qa(path, limit=limit, relation_paths=relation_paths[i] if relation_paths else None)
        if not rows:
            raise InputError(f"{path}: no questions in it")
        out.extend(rows)
    return out


def cmd_train_scorer(args: argparse.Namespace) -> int:
    """Train a triple scorer (DDE+MLP or QR-GAT) on question-answer files and write its checkpoint."""
    from engine.scoring.checkpoint import check_model_config
    from engine.scoring.train import TrainSettings

    if args.relation_paths and len(args.relation_paths) != len(args.qa):
        raise ConfigError("train-scorer: give one --relation-paths file per --qa file")
    config = dict(args.set or [])
    check_model_config(args.model, config)
    from engine.scoring.device import resolve_device

    resolve_device(args.device)  # cuda asked for where there is none: said now, not after the data is ready
    settings = TrainSettings(epochs=args.epochs, patience=args.patience, lr=args.lr, batch_questions=args.batch,
                             recall_k=args.recall_k, seed=args.seed, max_minutes=args.max_minutes,
                             threads=args.threads, device=args.device, pos_weight=args.pos_weight,
                             neg_samples=args.neg_samples, near_share=args.near_share, walk_aux=args.walk_aux,
                             bridge_target=args.bridge_target, min_epochs=args.min_epochs, smooth=args.smooth)
    # the questions are read (and checked) before anything starts
    qa = _read_questions(args.qa, args.limit, args.relation_paths)
    dev = _read_questions(args.dev, None, None) if args.dev else None
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    with _engine(args) as eng:
        res = eng.train_scorer(qa, model=args.model, out=args.out, dev=dev, hops=args.hops,
                               max_edges=args.max_edges, cache=args.cache, settings=settings, model_config=config,
                               progress=not args.quiet, extra_stopwords=args.extra_stopwords)
    if args.json:
        _print_json(res.to_dict())
    else:
        print(f"trained {type(res.model).__name__} on {res.questions:,} questions in {res.train_s:.1f} s "
              f"(data {res.prepare_s:.1f} s); best dev triple recall@{args.recall_k} {res.best_dev_recall:.4f} "
              f"(mean of up to {args.smooth} epochs) at epoch {res.best_epoch} (seed {args.seed})")
        print(f"checkpoint: {res.checkpoint}  (use it with ISORAG_SCORER={res.checkpoint})")
    return 0


def cmd_train_generator(args: argparse.Namespace) -> int:
    """Train the KG's pattern generator (plain-text questions -> patterns, no LLM) and write its file."""
    from engine.learned.train import GeneratorSettings, read_records

    settings = GeneratorSettings(epochs=args.epochs, patience=args.patience, seed=args.seed, precision=args.precision)
    records = [r for path in args.qa for r in read_records(path, limit=args.limit)]  # checked before anything starts
    with _engine(args) as eng:
        res = eng.train_generator(records, out=args.out, settings=settings, progress=not args.quiet)
    if args.json:
        _print_json(res.to_dict())
    else:
        print(f"trained the pattern generator of KG {eng.kg!r} on {res.questions:,} questions ({res.templates} "
              f"templates) in {res.train_s:.1f} s; held out {res.dev_questions:,}: linking {res.linking_acc:.4f}, "
              f"pattern {res.pattern_acc:.4f}; router threshold {res.threshold:.3f}; seed {res.seed}")
        print(f"generator: {res.checkpoint}")
    return 0


def _demo_generator(eng: Engine, quiet: bool) -> None:
    """Train the demo KG's pattern generator on the demo's questions and ``generator_questions.jsonl`` (MetaQA dev
    questions about its films, CC BY 3.0), well under a minute, so that a plain question is answered with no LLM."""
    from engine.learned.train import GeneratorSettings

    print("\n== training the demo's pattern generator on MetaQA questions about its films (plain text, no LLM)",
          flush=True)
    res = eng.train_generator([DEMO_DIR / "questions.jsonl", DEMO_DIR / "generator_questions.jsonl"],
                              settings=GeneratorSettings(), progress=not quiet)
    print(f"generator: {res.checkpoint} ({res.questions} questions, {res.templates} templates, {res.train_s:.1f} s)")


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
            _demo_generator(eng, args.quiet)
            plain = q["question"].replace("[", "").replace("]", "")
            print(f"\n== the same question in plain text, pattern by the learned generator (no LLM): {plain}")
            print_answer(eng.ask(plain, raise_errors=False, route="learned"))
            if eng.llm is not None:
                print(f"\n== the same question, pattern and answer by the LLM ({eng.llm!r})")
                print_answer(eng.ask(q["question"], raise_errors=False, route="llm"))
            else:
                print("\n(no LLM configured: set ISORAG_LLM_BASE_URL and ISORAG_LLM_MODEL to have it write the "
                      "pattern and the answer)")
    return 0


def cmd_synth(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from engine.evaluation.synth import SHAPES, SynthSettings, Synthesizer, write_jsonl

    shapes = args.shapes or list(SHAPES)
    settings = replace(SynthSettings(), max_answers=args.max_answers, drop_redundant=args.drop_redundant,
                       corruptions=args.corruptions)
    with _engine(args) as eng:
        eng.require_kg(vectors=False)  # synth reads the graph only
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
    from engine.evaluation.metrics import evaluate, plot_breakdown, read_items

    items = read_items(args.file, limit=args.limit)
    match = {k: v for k, v in (("k_node", args.k_node), ("k_rel", args.k_rel)) if v is not None}
    if args.directed:
        match["directed"] = True
    with _engine(args) as eng:
        if args.pattern == "llm" and eng.llm is None:
            raise ConfigError("--pattern llm needs an LLM endpoint: set ISORAG_LLM_BASE_URL and ISORAG_LLM_MODEL")
        eng.require_kg()
        res = evaluate(eng, items, k=args.k, use_llm_pattern=args.pattern == "llm", verify=not args.no_verify,
                       progress=not args.quiet, **match)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2, ensure_ascii=False, default=str) + "\n")
    if args.png:
        plot_breakdown(res["summary"], args.png, title=f"isorag eval {Path(args.file).name}")
    out = {"summary": res["summary"], "latency_ms": res["latency_ms"], "failed": res["failed"]}
    _print_json(out)
    return 0


def _check_apply_args(args: argparse.Namespace) -> None:
    """Each file of a change set is opened and read up to its first operation, so a bad file fails before any
    server starts (as load does); then which arguments go together."""
    from engine.changes.ops import read_changes
    from loaders import open_source
    from loaders.bulk import LoadSummary, _Skips, peek_records

    for path in (args.remove, args.add):
        if path is not None:
            summary = LoadSummary(path=str(path))
            peek_records(open_source(path, args.format, strict=args.strict, on_skip=_Skips(summary)), summary)
    if args.changes is not None:
        summary = LoadSummary(path=str(args.changes))
        peek_records(read_changes(args.changes, strict=args.strict, on_skip=_Skips(summary)), summary)
    if (args.changes is None) == (args.add is None and args.remove is None):
        raise ConfigError("apply needs a CHANGES file (JSON Lines) or --add/--remove triple files, not both")
    if args.format and args.changes:
        raise ConfigError("apply --format is for --add/--remove triple files; a CHANGES file is JSON Lines")


def cmd_apply(args: argparse.Namespace) -> int:
    """``isorag apply``: a change set (JSON Lines, or --add/--remove triple files) applied to both stores."""
    _check_apply_args(args)
    with _engine(args) as eng:
        report = eng.apply(args.changes, add=args.add, remove=args.remove, fmt=args.format, strict=args.strict,
                           progress=not args.quiet, batch_size=args.batch_size)
    _print_report(report, args.json)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """``isorag check``: compare the stores in full; ``--repair`` makes them agree. Exit 1 when they differ (and
    were not repaired)."""
    with _engine(args) as eng:
        report = eng.check(repair=args.repair, deep=args.deep, progress=not args.quiet)
    _print_report(report, args.json)
    return 0 if report.ok or report.repaired else 1


def _add_living_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    s = command("apply", help="apply a change set (adds, removes, renames, merges) to both stores")
    s.add_argument("changes", nargs="?", type=_in_file, help="JSON Lines change set ({\"op\": \"add\", ...})")
    s.add_argument("--kg", type=_kg_type, default=None)
    s.add_argument("--add", type=_source, help="triples to add, in any format `isorag load` reads")
    s.add_argument("--remove", type=_source, help="triples to remove, in any format `isorag load` reads")
    s.add_argument("--format", choices=["hrt", "tsv", "csv", "nt", "ttl", "jsonl", "tables"],
                   help="format of the --add/--remove files (default: detected)")
    s.add_argument("--strict", action="store_true", help="stop at the first bad operation")
    s.add_argument("--batch-size", type=_int_type(1, BATCH_MAX), default=None,
                   help="operations per batch, one Neo4j transaction each (default 5000)")
    s.add_argument("--json", action="store_true")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_apply)

    s = command("check", help="compare Neo4j and Milvus in full (counts, ids, texts); --repair fixes Milvus")
    s.add_argument("--kg", type=_kg_type, required=True)
    s.add_argument("--repair", action="store_true", help="make the stores agree")
    s.add_argument("--deep", action="store_true", help="embed every entity's text again and compare its vector")
    s.add_argument("--json", action="store_true")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_check)


def _source_options(s: argparse.ArgumentParser) -> None:
    """The options that say how to read a source file (load, sync)."""
    s.add_argument("--head", type=_column_type); s.add_argument("--relation", type=_column_type)  # noqa: E702
    s.add_argument("--tail", type=_column_type)
    s.add_argument("--delimiter", type=_delimiter_type, help="one character; escapes as in Python (\\t, \\x1f)")
    s.add_argument("--header", choices=["yes", "no"])
    s.add_argument("--nodes", type=_in_file); s.add_argument("--edges", type=_in_file)  # noqa: E702


def build_parser() -> argparse.ArgumentParser:
    positive = _int_type(1)
    natural = _int_type(0)
    k_cand = _int_type(1, K_MAX)
    seconds = _float_type(0, lo_open=True)
    p = _Parser(prog="isorag", description="Knowledge-graph RAG over Neo4j + Milvus", epilog=EPILOG)
    sub = p.add_subparsers(dest="cmd", required=True)

    def command(name: str, **kw: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, epilog=EPILOG, **kw)

    for server in ("neo4j", "milvus"):
        s = command(server, help=f"the embedded local {server} server")
        # set-password: root's password of another Milvus (MILVUS_URI), from MILVUS_ROOT_PASSWORD (compose)
        actions = ["start", "stop", "status"] + (["set-password"] if server == "milvus" else [])
        s.add_argument("action", choices=actions)
        s.set_defaults(func=cmd_server, server=server)

    s = command("load", help="load a KG file into Neo4j and Milvus")
    s.add_argument("path", nargs="?", type=_source)
    s.add_argument("--format", choices=["hrt", "tsv", "csv", "nt", "ttl", "jsonl", "tables"])
    s.add_argument("--kg", type=_kg_type, default=None, help="KG name (default $ISORAG_KG or 'default')")
    s.add_argument("--strict", action="store_true", help="stop at the first malformed line")
    s.add_argument("--batch-size", type=_int_type(1, BATCH_MAX), default=10_000,
                   help=f"triples per batch, one Neo4j transaction each (default 10000, at most {BATCH_MAX:,})")
    _source_options(s)
    s.add_argument("--offline-import", action="store_true",
                   help="first load of a big KG into an empty local Neo4j by neo4j-admin database import "
                        "(the server is stopped meanwhile; see loaders/offline.py)")
    s.add_argument("--from-neo4j", action="store_true", help="embed a graph already in Neo4j")
    s.add_argument("--label", type=_text_type); s.add_argument("--key-prop", type=_text_type)  # noqa: E702
    s.add_argument("--name-prop", type=_text_type)
    s.add_argument("--aliases-prop", type=_text_type,
                   help="with --from-neo4j: the property holding each node's other names (a list of strings)")
    s.add_argument("--json", action="store_true")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.add_argument("-v", "--verbose", action="store_true", help="print the first skipped lines")
    s.set_defaults(func=cmd_load)

    s = command("sync", help="make a KG equal to a file (or re-sync a graph adopted with load --from-neo4j)")
    s.add_argument("path", nargs="?", type=_source)
    s.add_argument("--format", choices=["hrt", "tsv", "csv", "nt", "ttl", "jsonl", "tables"])
    s.add_argument("--kg", type=_kg_type, required=True)
    s.add_argument("--dry-run", action="store_true", help="count what would change, write nothing")
    s.add_argument("--strict", action="store_true", help="stop at the first malformed line (before any write)")
    s.add_argument("--batch-size", type=_int_type(1, BATCH_MAX), default=None,
                   help="operations per batch of the apply, one Neo4j transaction each (default 5000)")
    _source_options(s)
    s.add_argument("--from-neo4j", action="store_true",
                   help="re-sync a graph adopted with load --from-neo4j: its added, changed and deleted nodes and "
                        "relationships (only what isorag owns is written)")
    s.add_argument("--label", type=_text_type); s.add_argument("--key-prop", type=_text_type)  # noqa: E702
    s.add_argument("--name-prop", type=_text_type)
    s.add_argument("--json", action="store_true")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.set_defaults(func=cmd_sync)

    s = command("stats", help="counts from both stores, and whether they agree")
    s.add_argument("--kg", type=_kg_type, default=None)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_stats)

    _add_living_commands(command)

    s = command("match", help="exact top-k subgraphs for a pattern")
    s.add_argument("pattern", type=_pattern_type,
                   help='pattern JSON ({"triples": [[h, r, t], ...]}), a file, or - for stdin')
    s.add_argument("--kg", type=_kg_type, default=None)
    s.add_argument("-k", type=positive, default=None)
    s.add_argument("--k-node", type=k_cand); s.add_argument("--k-rel", type=k_cand)  # noqa: E702
    s.add_argument("--k-type", type=k_cand)
    s.add_argument("--injective", choices=["nodes", "edges", "none"], default=None,
                   help="what must map to distinct KG items: nodes (subgraph isomorphism, the default), "
                        "edges (relationships only, as in Cypher) or none (homomorphism)")
    s.add_argument("--homomorphic", action="store_true", help="same as --injective none")
    s.add_argument("--directed", action="store_true", help="respect edge direction")
    s.add_argument("--deadline", type=seconds, help="seconds")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_match)

    s = command("drop", help="delete a KG from both stores")
    s.add_argument("--kg", type=_kg_type, required=True)
    s.add_argument("--yes", action="store_true")
    s.set_defaults(func=cmd_drop)

    s = command("ask", help="answer a question from the KG, with its evidence")
    s.add_argument("question", type=_text_type)
    s.add_argument("--pattern", type=_pattern_type,
                   help="pattern JSON (a file, or - for stdin); default: the LLM writes it")
    s.add_argument("--kg", type=_kg_type, default=None)
    s.add_argument("-k", type=positive, default=None, help="subgraphs to retrieve (default 3)")
    s.add_argument("--k-node", type=k_cand); s.add_argument("--k-rel", type=k_cand)  # noqa: E702
    s.add_argument("--deadline", type=seconds, help="seconds")
    s.add_argument("--fewshot", type=_fewshot_type,
                   help="few-shot examples: a bundled name or a directory (default demo)")
    s.add_argument("--no-llm", action="store_true", help="do not use the LLM even when one is configured")
    s.add_argument("--route", choices=["auto", "llm", "learned"],
                   help="who writes the pattern: auto (default: the learned generator without an LLM or when sure "
                        "enough, else the LLM), llm, learned")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_ask)

    s = command("verify", help="verify claims from a JSON Lines or CSV file (resumable, shardable)")
    s.add_argument("claims", type=_in_file, help="JSON Lines or CSV: id, claim, optional label, optional pattern")
    s.add_argument("--out", type=_out_file, required=True,
                   help="verdicts, one JSON line per claim (appended; a rerun resumes)")
    s.add_argument("--kg", type=_kg_type, default=None)
    s.add_argument("--format", choices=["jsonl", "csv"], help="default: from the file's suffix")
    s.add_argument("--concurrency", type=_int_type(1, WORKERS_MAX), default=4)
    s.add_argument("--shard", type=_shard_type, help="i/n: only the ids that hash to shard i of n (from 0)")
    s.add_argument("--threshold", type=_float_type(0, 2), help="without an LLM: the largest entity distance a "
                   "claim element may have to its KG match (default 0.5)")
    s.add_argument("-k", type=positive, default=None, help="evidence subgraphs per claim (default 3)")
    s.add_argument("--k-node", type=k_cand); s.add_argument("--k-rel", type=k_cand)  # noqa: E702
    s.add_argument("--deadline", type=seconds, help="seconds per claim")
    s.add_argument("--fewshot", type=_fewshot_type,
                   help="few-shot examples: a bundled name or a directory (default demo)")
    s.add_argument("--no-llm", action="store_true", help="judge by the rule even when an LLM is configured")
    s.add_argument("--retry-failed", action="store_true", help="verify again the claims whose verification failed")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.set_defaults(func=cmd_verify)

    s = command("synth", help="sample ground-truth questions and claims from the loaded KG (SynthKGQA)")
    s.add_argument("--kg", type=_kg_type, default=None)
    s.add_argument("--out", type=_out_file, required=True, help="JSON Lines file to write")
    s.add_argument("--n", type=positive, default=100, help="records (shapes taken in turn)")
    s.add_argument("--shapes", type=_shapes_type,
                   help="comma list of path1,path2,path3,star,conj2,conj3 (default all)")
    s.add_argument("--seed", type=_int_type(0, SEED_MAX), default=0)
    s.add_argument("--max-answers", type=positive, default=10, help="drop samples with more answers")
    s.add_argument("--corruptions", type=natural, default=1, help="REFUTED claims per record")
    s.add_argument("--drop-redundant", action="store_true", help="drop samples whose seeds are redundant")
    s.add_argument("--no-llm", action="store_true", help="no LLM paraphrase even when one is configured")
    s.set_defaults(func=cmd_synth)

    s = command("eval", help="metrics of retrieval, answers and verification on a ground-truth file")
    s.add_argument("file", type=_in_file, help="isorag synth JSON Lines, MetaQA qa_*.txt or PathQuestion PQ-*.txt")
    s.add_argument("--kg", type=_kg_type, default=None)
    s.add_argument("--pattern", choices=["gold", "llm"], default="gold")
    s.add_argument("-k", type=positive, default=3)
    s.add_argument("--k-node", type=k_cand); s.add_argument("--k-rel", type=k_cand)  # noqa: E702
    s.add_argument("--directed", action="store_true", help="match edge directions (synth answers are directed)")
    s.add_argument("--limit", type=positive, help="first N items")
    s.add_argument("--no-verify", action="store_true", help="skip the claims")
    s.add_argument("--no-llm", action="store_true")
    s.add_argument("--json", type=_out_file, help="write the full results here")
    s.add_argument("--png", type=_out_file, help="write the breakdown chart here")
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(func=cmd_eval)

    s = command("train-scorer", help="train a triple scorer (DDE+MLP or QR-GAT) from question-answer pairs")
    s.add_argument("--qa", nargs="+", type=_in_file, required=True,
                   help="MetaQA files ('question [topic]<TAB>a1|a2') or JSON Lines {question, topics, answers, triples?}")
    s.add_argument("--model", choices=["dde_mlp", "qrgat"], default="dde_mlp")
    s.add_argument("--relation-paths", nargs="+", type=_in_file, metavar="FILE",
                   help="per --qa file, its questions' relation paths, one line each (relation names separated "
                        "by commas or spaces; blank: none): training labels are then the triples on walks along "
                        "the path instead of every shortest path topic -> answer")
    s.add_argument("--pos-weight", type=_float_type(0, lo_open=True), default=1.0,
                   help="BCE weight of a positive triple (default 1)")
    s.add_argument("--neg-samples", type=natural, default=0,
                   help="negatives sampled per question and epoch (default 0: every triple every epoch); "
                        "cheaper epochs, an unbiased estimate of the full loss")
    s.add_argument("--near-share", type=_float_type(0, 1), default=0.5,
                   help="share of the sampled negatives drawn from those touching an entity of a positive triple")
    s.add_argument("--walk-aux", type=_float_type(0), default=1.0,
                   help="weight of the relation walk's answer loss (where the question's walk ends against the "
                        "answers; default 1, 0 turns it off); models built with walk=true, the default")
    s.add_argument("--bridge-target", type=_float_type(0, 1), default=0.5,
                   help="BCE target of a labelled triple that touches no answer (a bridge on the way; default 0.5; "
                        "1: plain labels): below 1 the triples reaching an answer rank first")
    s.add_argument("--out", type=_out_file, required=True, help="checkpoint file to write")
    s.add_argument("--kg", type=_kg_type, default=None)
    s.add_argument("--dev", nargs="+", type=_in_file, help="dev questions for early stopping (default: 10%% of --qa)")
    s.add_argument("--hops", type=positive, default=2, help="neighbourhood depth (default 2)")
    s.add_argument("--max-edges", type=positive, default=10_000, help="neighbourhood cap in triples (default 10000)")
    s.add_argument("--cache", type=_out_file, help="prepared-data cache file: reruns and epochs skip Neo4j and Milvus")
    s.add_argument("--limit", type=positive, help="read at most this many questions per file")
    s.add_argument("--epochs", type=positive, default=30)
    s.add_argument("--patience", type=positive, default=5,
                   help="stop after this many epochs without a better (smoothed) dev recall (default 5)")
    s.add_argument("--min-epochs", type=positive, default=10, help="no early stop before this epoch (default 10)")
    s.add_argument("--smooth", type=positive, default=3,
                   help="early stopping and the kept weights judge the mean dev recall of the last N epochs "
                        "(default 3; 1: the raw figure)")
    s.add_argument("--lr", type=_float_type(0, lo_open=True), default=1e-3)
    s.add_argument("--batch", type=positive, default=8, help="questions per optimizer step")
    s.add_argument("--recall-k", type=positive, default=100, help="K of the dev triple recall@K (early stopping)")
    s.add_argument("--seed", type=_int_type(0, SEED_MAX), default=42,
                   help="seed of the weights, batch order and negative samples, kept in the checkpoint: the same "
                        "command and seed give the same checkpoint on CPU (default 42)")
    s.add_argument("--max-minutes", type=seconds, help="stop training after this many minutes (best weights kept; "
                                                       "a wall-clock limit: a run it ends is not reproducible)")
    s.add_argument("--threads", type=_int_type(1, WORKERS_MAX), help="torch threads")
    s.add_argument("--device", type=_device_type, default="auto", help="auto, cpu, cuda, cuda:N")
    s.add_argument("--set", action="append", type=_key_value_type, metavar="KEY=VALUE",
                   help="model hyperparameter, e.g. --set hidden=128 --set heads=4 (repeatable)")
    s.add_argument("--extra-stopwords", nargs="+", type=_text_type, default=[], metavar="WORD",
                   help="the KG's domain words that entity linking skips besides the generic English ones, kept in "
                        "the checkpoint (MetaQA: movie movies film films)")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_train_scorer)

    s = command("train-generator", help="train the KG's pattern generator (plain-text questions -> patterns, "
                                        "no LLM) from question-answer pairs")
    s.add_argument("--qa", nargs="+", type=_in_file, required=True,
                   help="MetaQA files ('question [topic]<TAB>a1|a2') or JSON Lines {question, topics (or seeds), "
                        "answers, pattern?} such as `isorag synth` output; without a pattern, the relation path "
                        "is found in the KG")
    s.add_argument("--out", type=_out_file, help="generator file (default: $ISORAG_HOME/generators/<kg>.pt, "
                                                 "where ask finds it)")
    s.add_argument("--kg", type=_kg_type, default=None)
    s.add_argument("--limit", type=positive, help="read at most this many questions per file")
    s.add_argument("--epochs", type=positive, default=60)
    s.add_argument("--patience", type=positive, default=8)
    s.add_argument("--seed", type=_int_type(0, SEED_MAX), default=42)
    s.add_argument("--precision", type=_float_type(0, 1, lo_open=True), default=0.99,
                   help="the router keeps a learned pattern whose probability is at least the threshold at which "
                        "held-out patterns are right this often (default 0.99)")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_train_generator)

    s = command("demo", help="load the bundled demo KG and answer a demo question")
    s.add_argument("--kg", type=_kg_type, default=None)
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(func=cmd_demo)
    return p


def _one_line(text: str) -> str:
    """A message as one line: driver errors may span several."""
    return re.sub(r"\s*[\r\n]+\s*", " ", str(text)).strip()


def _os_error(e: OSError) -> str:
    where = f": {e.filename}" if e.filename else ""
    return f"{e.strerror or type(e).__name__}{where}" if e.strerror else str(e) or type(e).__name__


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # the model's loading bars would come between a command's error and the user (stderr is for errors)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    debug = os.environ.get("ISORAG_DEBUG", "").strip() not in ("", "0")
    if not debug:
        import logging

        # the driver's multi-line "Transaction failed and will be retried" warnings while a server restarts:
        # the engine retries and reports a failure itself, as one typed line
        logging.getLogger("neo4j").setLevel(logging.ERROR)

    def error(message: str, status: int = EXIT_ERROR, internal: bool = False) -> int:
        if debug:
            import traceback

            traceback.print_exc()
        what = "internal error" if internal else "error"
        print(f"isorag: {what}: {_one_line(message)}", file=sys.stderr, flush=True)
        return status

    try:
        args = build_parser().parse_args(argv)
        from engine._config import check_environment

        check_environment()
        return int(args.func(args) or 0)
    except _UsageError as e:
        return error(str(e))
    except IsoragError as e:
        return error(str(e))
    except KeyboardInterrupt:
        print("isorag: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # stdout was closed (| head): say nothing more, and keep Python from complaining at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_PIPE
    except OSError as e:
        return error(_os_error(e))
    except Exception as e:  # noqa: BLE001 - the last resort: a bug is one line, never a traceback on a user
        return error(f"{type(e).__name__}: {e} (set ISORAG_DEBUG=1 for the traceback)", EXIT_INTERNAL, internal=True)


if __name__ == "__main__":
    sys.exit(main())
