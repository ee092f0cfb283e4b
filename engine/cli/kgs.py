"""KG commands: ``load``, ``sync``, ``stats``, ``drop``, ``apply`` and ``check``."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from engine._errors import ConfigError
from engine.cli.arguments import BATCH_MAX, column_type, delimiter_type, in_file, int_type, kg_type, source_type, \
    text_type
from engine.cli.common import done, open_engine
from engine.cli.output import print_json, print_report, table

__all__ = ["add_commands", "cmd_apply", "cmd_check", "cmd_drop", "cmd_load", "cmd_stats", "cmd_sync"]

FORMATS = ["hrt", "tsv", "csv", "nt", "ttl", "jsonl", "tables"]
_LOADER_OPTIONS = ("head", "relation", "tail", "delimiter", "header", "nodes", "edges")
#: what ``--from-neo4j`` does, per command (for the message refusing a file source's options beside it)
_FROM_NEO4J = {"load": "embeds a graph already in Neo4j", "sync": "re-syncs a graph adopted from Neo4j"}


def _loader_options(args: argparse.Namespace) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    for name in ("head", "relation", "tail", "delimiter", "nodes", "edges"):
        v = getattr(args, name)
        if v is not None:
            opts[name] = v
    if args.header is not None:
        opts["header"] = args.header == "yes"
    return opts


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
                            ("--aliases-prop", getattr(args, "aliases_prop", None)))
             if v]
    if adopt:
        raise ConfigError(f"{', '.join(adopt)}: only with --from-neo4j")
    if not args.path and not (args.nodes and args.edges):
        raise ConfigError(f"{command} needs a PATH (or --nodes and --edges, or --from-neo4j)")
    from loaders import open_source
    from loaders.bulk import LoadSummary, peek_records, skip_log

    summary = LoadSummary(path=str(args.path or args.nodes))
    peek_records(open_source(args.path, args.format, strict=args.strict, on_skip=skip_log(summary),
                             **_loader_options(args)), summary)


def cmd_load(args: argparse.Namespace) -> int:
    _check_source_args(args, "load")
    with open_engine(args) as eng:
        echo = (lambda m: print(m, file=sys.stderr)) if args.verbose else None
        if args.from_neo4j:
            summary = eng.load_existing(args.label, args.key_prop, args.name_prop, progress=not args.quiet,
                                        batch_size=args.batch_size, aliases=args.aliases_prop)
        else:
            summary = eng.load(args.path, args.format, strict=args.strict, progress=not args.quiet,
                               batch_size=args.batch_size, echo=echo, offline_import=args.offline_import,
                               **_loader_options(args))
        print_report(summary, args.json)
    return done()


def cmd_sync(args: argparse.Namespace) -> int:
    """isorag sync: make a KG equal to a file, or re-sync a graph adopted from Neo4j."""
    _check_source_args(args, "sync")
    with open_engine(args) as eng:
        if args.from_neo4j:
            report = eng.resync_existing(args.label, args.key_prop, args.name_prop, dry_run=args.dry_run,
                                         progress=not args.quiet)
        else:
            report = eng.sync(args.path, args.format, dry_run=args.dry_run, strict=args.strict,
                              progress=not args.quiet, batch_size=args.batch_size, **_loader_options(args))
        print_report(report, args.json)
    return done()


def print_stats(st: dict[str, Any]) -> None:
    """:meth:`Engine.stats <engine._engine.Engine.stats>` as text: counts per store, version, what to do."""
    n, m = st["neo4j"], st["milvus"]
    print(f"KG {st['kg']!r}")
    print(table([
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
        print("STORES DISAGREE: the KG is in Neo4j but has no collection in Milvus: run the load again to embed it")
    elif not n["exists"]:
        print(f"STORES DISAGREE: the KG has collections in Milvus but is not in Neo4j: drop it "
              f"(isorag drop --kg {st['kg']} --yes) and load it again")
    else:
        print("STORES DISAGREE: run the load again to complete it")


def cmd_stats(args: argparse.Namespace) -> int:
    """Counts from both stores; not clean when they disagree."""
    with open_engine(args) as eng:
        st = eng.stats()
    if args.json:
        print_json(st)
    else:
        print_stats(st)
    return done(st["agree"])


def cmd_drop(args: argparse.Namespace) -> int:
    if not args.yes:
        raise ConfigError(f"isorag drop deletes KG {args.kg!r} from Neo4j and Milvus: add --yes")
    with open_engine(args) as eng:
        eng.drop()
    print(f"dropped KG {args.kg!r}")
    return done()


def _check_apply_args(args: argparse.Namespace) -> None:
    """Each file of a change set is opened and read up to its first operation, so a bad file fails before any
    server starts (as load does); then which arguments go together."""
    from engine.changes.ops import read_changes
    from loaders import open_source
    from loaders.bulk import LoadSummary, peek_records, skip_log

    for path in (args.remove, args.add):
        if path is not None:
            summary = LoadSummary(path=str(path))
            peek_records(open_source(path, args.format, strict=args.strict, on_skip=skip_log(summary)), summary)
    if args.changes is not None:
        summary = LoadSummary(path=str(args.changes))
        peek_records(read_changes(args.changes, strict=args.strict, on_skip=skip_log(summary)), summary)
    if (args.changes is None) == (args.add is None and args.remove is None):
        raise ConfigError("apply needs a CHANGES file (JSON Lines) or --add/--remove triple files, not both")
    if args.format and args.changes:
        raise ConfigError("apply --format is for --add/--remove triple files; a CHANGES file is JSON Lines")


def cmd_apply(args: argparse.Namespace) -> int:
    """``isorag apply``: a change set (JSON Lines, or --add/--remove triple files) applied to both stores."""
    _check_apply_args(args)
    with open_engine(args) as eng:
        report = eng.apply(args.changes, add=args.add, remove=args.remove, fmt=args.format, strict=args.strict,
                           progress=not args.quiet, batch_size=args.batch_size)
    print_report(report, args.json)
    return done()


def cmd_check(args: argparse.Namespace) -> int:
    """``isorag check``: compare the stores in full; ``--repair`` makes them agree. Not clean when they differ (and
    were not repaired)."""
    with open_engine(args) as eng:
        report = eng.check(repair=args.repair, deep=args.deep, progress=not args.quiet)
    print_report(report, args.json)
    return done(report.ok or report.repaired)


def _source_options(s: argparse.ArgumentParser) -> None:
    """The options that say how to read a source file (load, sync)."""
    s.add_argument("--head", type=column_type, help="csv/tsv: the head's column, a name or a 0-based position")
    s.add_argument("--relation", type=column_type, help="csv/tsv: the relation's column")
    s.add_argument("--tail", type=column_type, help="csv/tsv: the tail's column")
    s.add_argument("--delimiter", type=delimiter_type, help="one character; escapes as in Python (\\t, \\x1f)")
    s.add_argument("--header", choices=["yes", "no"], help="csv/tsv: whether the first line names the columns "
                                                           "(default: detected)")
    s.add_argument("--nodes", type=in_file, help="tables: the nodes file (id, name, types...)")
    s.add_argument("--edges", type=in_file, help="tables: the edges file (source, relation, target)")


def _adoption_options(s: argparse.ArgumentParser) -> None:
    """The options that name an existing graph in Neo4j (load --from-neo4j, sync --from-neo4j)."""
    s.add_argument("--label", type=text_type, help="--from-neo4j: the label of the graph's nodes")
    s.add_argument("--key-prop", type=text_type, help="--from-neo4j: the property that identifies a node")
    s.add_argument("--name-prop", type=text_type, help="--from-neo4j: the property embedded as its name "
                                                       "(default: the key)")


def _output_options(s: argparse.ArgumentParser) -> None:
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s.add_argument("--quiet", action="store_true", help="no progress bars")


def add_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    s = command("load", help="load a KG file into Neo4j and Milvus")
    s.add_argument("path", nargs="?", type=source_type, help="the source file (a folder for tables)")
    s.add_argument("--format", choices=FORMATS, help="the source's format (default: detected from the file)")
    s.add_argument("--kg", type=kg_type, default=None, help="KG name (default $ISORAG_KG or 'default')")
    s.add_argument("--strict", action="store_true", help="stop at the first malformed line")
    s.add_argument("--batch-size", type=int_type(1, BATCH_MAX), default=10_000,
                   help=f"triples per batch, one Neo4j transaction each (default 10000, at most {BATCH_MAX:,})")
    _source_options(s)
    s.add_argument("--offline-import", action="store_true",
                   help="first load of a big KG into an empty local Neo4j by neo4j-admin database import "
                        "(the server is stopped meanwhile; see docs/loading.md)")
    s.add_argument("--from-neo4j", action="store_true", help="embed a graph already in Neo4j")
    _adoption_options(s)
    s.add_argument("--aliases-prop", type=text_type,
                   help="with --from-neo4j: the property holding each node's other names (a list of strings)")
    _output_options(s)
    s.add_argument("-v", "--verbose", action="store_true", help="print the first skipped lines")
    s.set_defaults(func=cmd_load)

    s = command("sync", help="make a KG equal to a file (or re-sync a graph adopted with load --from-neo4j)")
    s.add_argument("path", nargs="?", type=source_type, help="the source file the KG is to equal")
    s.add_argument("--format", choices=FORMATS, help="the source's format (default: detected from the file)")
    s.add_argument("--kg", type=kg_type, required=True, help="the KG to change")
    s.add_argument("--dry-run", action="store_true", help="count what would change, write nothing")
    s.add_argument("--strict", action="store_true", help="stop at the first malformed line (before any write)")
    s.add_argument("--batch-size", type=int_type(1, BATCH_MAX), default=None,
                   help="operations per batch of the apply, one Neo4j transaction each (default 5000)")
    _source_options(s)
    s.add_argument("--from-neo4j", action="store_true",
                   help="re-sync a graph adopted with load --from-neo4j: its added, changed and deleted nodes and "
                        "relationships (only what isorag owns is written)")
    _adoption_options(s)
    _output_options(s)
    s.set_defaults(func=cmd_sync)

    s = command("stats", help="counts from both stores, and whether they agree")
    s.add_argument("--kg", type=kg_type, default=None, help="the KG (default $ISORAG_KG or 'default')")
    s.add_argument("--json", action="store_true", help="print the counts as JSON")
    s.set_defaults(func=cmd_stats)

    s = command("apply", help="apply a change set (adds, removes, renames, merges) to both stores")
    s.add_argument("changes", nargs="?", type=in_file, help="JSON Lines change set ({\"op\": \"add\", ...})")
    s.add_argument("--kg", type=kg_type, default=None, help="the KG (default $ISORAG_KG or 'default')")
    s.add_argument("--add", type=source_type, help="triples to add, in any format `isorag load` reads")
    s.add_argument("--remove", type=source_type, help="triples to remove, in any format `isorag load` reads")
    s.add_argument("--format", choices=FORMATS, help="format of the --add/--remove files (default: detected)")
    s.add_argument("--strict", action="store_true", help="stop at the first bad operation")
    s.add_argument("--batch-size", type=int_type(1, BATCH_MAX), default=None,
                   help="operations per batch, one Neo4j transaction each (default 5000)")
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_apply)

    s = command("check", help="compare Neo4j and Milvus in full (counts, ids, texts); --repair fixes Milvus")
    s.add_argument("--kg", type=kg_type, required=True, help="the KG to check")
    s.add_argument("--repair", action="store_true", help="make the stores agree")
    s.add_argument("--deep", action="store_true", help="embed every entity's text again and compare its vector")
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_check)

    s = command("drop", help="delete a KG from both stores")
    s.add_argument("--kg", type=kg_type, required=True, help="the KG to delete")
    s.add_argument("--yes", action="store_true", help="yes, delete it (refused without)")
    s.set_defaults(func=cmd_drop)
