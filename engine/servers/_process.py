"""Process helpers the two local servers share: messages, ports, log tails, pids (loopback only: docs/security.md)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

HOST = "127.0.0.1"
_TAIL_BYTES = 65536


def say(msg: str) -> None:
    """A progress line of a local server on stderr."""
    print(f"isorag: {msg}", file=sys.stderr, flush=True)


def port_open(port: int, timeout: float = 1.0) -> bool:
    """Whether something accepts connections on ``127.0.0.1:port``."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def tail(path: Path, lines: int = 40, start: int = 0) -> str:
    """The last ``lines`` lines of a log written since byte ``start`` (at most its last 64 KiB), for messages."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(start, size - _TAIL_BYTES))
            data = fh.read()
    except OSError:
        return f"(no log at {path})"
    text = data.decode("utf-8", "replace").rstrip().splitlines()
    return "\n".join(text[-lines:]) or "(empty log)"


def pid_alive(pid: int | None) -> bool:
    """True if ``pid`` is a live (non-zombie) process."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        state = stat.rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return True
