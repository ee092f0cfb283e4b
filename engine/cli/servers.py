"""``isorag neo4j`` and ``isorag milvus``: the embedded local servers (start, stop, status; Milvus: set-password)."""

from __future__ import annotations

import argparse
from typing import Callable

from engine.cli.common import done

__all__ = ["add_commands", "cmd_server"]


def cmd_server(args: argparse.Namespace) -> int:
    """Run a server's action; ``status`` of a server that is not running (or does not answer) is not clean."""
    if args.server == "neo4j":
        from engine.servers import neo4j

        actions: dict[str, Callable[[], int]] = {"start": neo4j.cli_start, "stop": neo4j.cli_stop,
                                                 "status": neo4j.cli_status}
    else:
        from engine.servers import milvus

        actions = {"start": milvus.cli_start, "stop": milvus.cli_stop, "status": milvus.cli_status,
                   "set-password": milvus.cli_set_password}
    return done(actions[args.action]() == 0)


def add_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    for server in ("neo4j", "milvus"):
        s = command(server, help=f"the embedded local {server} server")
        # set-password: root's password of another Milvus (MILVUS_URI), from MILVUS_ROOT_PASSWORD (compose)
        actions = ["start", "stop", "status"] + (["set-password"] if server == "milvus" else [])
        s.add_argument("action", choices=actions,
                       help="start (or reuse) the server, stop it, or say whether it runs and answers"
                            + ("; set-password: root's password of the Milvus at $MILVUS_URI, from "
                               "$MILVUS_ROOT_PASSWORD" if server == "milvus" else ""))
        s.set_defaults(func=cmd_server, server=server)
