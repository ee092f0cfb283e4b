"""The ``isorag`` command.

Arguments are checked when they are parsed (numbers in range and finite, readable input files, writable outputs,
patterns, shards, KG names), and the environment (``ISORAG_*``, ``NEO4J_*``, ``MILVUS_*``) before a command
starts, so bad input fails before a server or a model starts. Errors are one line on stderr.

Exit statuses:

    0    done
    1    done, but the result is not clean: the stores disagree (``stats``, ``check``), malformed rows or failed
         claims (``verify``), a server that is not running (``neo4j status``, ``milvus status``)
    2    refused, one line ``isorag: error: ...`` on stderr: bad arguments, environment or input, a KG that does
         not exist, a store that cannot be reached, a failed stage of ``ask`` (an
         :class:`~engine._errors.IsoragError`, a usage error or an operating-system error such as a file that
         cannot be written)
    70   internal error, a bug in isorag: one line ``isorag: internal error: ...`` (``ISORAG_DEBUG=1`` prints the
         traceback); 70 is sysexits' EX_SOFTWARE
    130  interrupted (Ctrl-C)
    141  stdout was closed early (e.g. piped into ``head``): nothing more to say

The commands live by concern, each a thin call into the :class:`~engine.Engine`:

* :mod:`engine.cli.servers`: ``neo4j``, ``milvus`` (the embedded local servers);
* :mod:`engine.cli.kgs`: ``load``, ``sync``, ``stats``, ``apply``, ``check``, ``drop``;
* :mod:`engine.cli.queries`: ``match``, ``ask``, ``verify``;
* :mod:`engine.cli.evaluation`: ``synth``, ``eval``;
* :mod:`engine.cli.training`: ``train-scorer``, ``train-generator``;
* :mod:`engine.cli.demo`: ``demo``.

:mod:`engine.cli.arguments` holds the argument types, :mod:`engine.cli.output` what commands print and
:mod:`engine.cli.common` the exit statuses and the engine of a command. A new command is a ``cmd_<name>(args) ->
int`` function (its status by :func:`engine.cli.common.done`) in the module of its concern, registered by that
module's ``add_commands`` and re-exported here.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Sequence

from engine._errors import IsoragError
from engine.cli import demo, evaluation, kgs, queries, servers, training
from engine.cli.arguments import Parser, UsageError
from engine.cli.common import (EXIT_ERROR, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_NOT_CLEAN, EXIT_OK, EXIT_PIPE,
                               Command)
from engine.cli.demo import DEMO_DIR, cmd_demo
from engine.cli.evaluation import cmd_eval, cmd_synth
from engine.cli.kgs import cmd_apply, cmd_check, cmd_drop, cmd_load, cmd_stats, cmd_sync
from engine.cli.output import one_line, print_answer, print_retrieval
from engine.cli.queries import cmd_ask, cmd_match, cmd_verify
from engine.cli.servers import cmd_server
from engine.cli.training import cmd_train_generator, cmd_train_scorer
from engine.service import cli as service  # isorag serve, isorag keys (engine/service/cli.py)
from engine.service.cli import cmd_keys, cmd_serve

# the path types under the names the parser's tests read them by
from engine.cli.arguments import in_file as _in_file  # noqa: F401 - read by name, see above
from engine.cli.arguments import out_file as _out_file  # noqa: F401 - read by name, see above
from engine.cli.arguments import pattern_type as _pattern_type  # noqa: F401 - read by name, see above
from engine.cli.arguments import source_type as _source  # noqa: F401 - read by name, see above

__all__ = ["DEMO_DIR", "EXIT_ERROR", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_NOT_CLEAN", "EXIT_OK", "EXIT_PIPE",
           "EPILOG", "build_parser", "cmd_apply", "cmd_ask", "cmd_check", "cmd_demo", "cmd_drop", "cmd_eval",
           "cmd_keys", "cmd_load", "cmd_match", "cmd_serve", "cmd_server", "cmd_stats", "cmd_sync", "cmd_synth",
           "cmd_train_generator",
           "cmd_train_scorer", "cmd_verify", "main", "print_answer", "print_retrieval"]

EPILOG = """exit status: 0 done; 1 done but not clean (stores disagree, malformed or failed claims, a server not
running); 2 refused: bad arguments, environment or input, missing KG, unreachable store, a failed stage of ask (one
line 'isorag: error: ...' on stderr); 70 internal error (a bug: set ISORAG_DEBUG=1 for the traceback); 130
interrupted; 141 output closed early"""


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="isorag", description="Knowledge-graph RAG over Neo4j + Milvus", epilog=EPILOG)
    sub = p.add_subparsers(dest="cmd", required=True)

    def command(name: str, **kw: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, epilog=EPILOG, **kw)

    for concern in (servers, kgs, queries, evaluation, training, service, demo):
        concern.add_commands(command)
    return p


def _os_error(e: OSError) -> str:
    where = f": {e.filename}" if e.filename else ""
    return f"{e.strerror or type(e).__name__}{where}" if e.strerror else str(e) or type(e).__name__


def _command(args: argparse.Namespace) -> Command:
    """The command to run, looked up by its name in this package, where every command is re-exported: an
    application embedding the CLI (or a test) may replace one here."""
    command: Command = globals().get(args.func.__name__, args.func)
    return command


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
        print(f"isorag: {what}: {one_line(message)}", file=sys.stderr, flush=True)
        return status

    try:
        args = build_parser().parse_args(argv)
        from engine._config import check_environment

        check_environment()
        return _command(args)(args)
    except UsageError as e:
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
