"""Integration tests of the embedded local Milvus (engine.servers.milvus): a real server, no mocks.

The default server (default home and port) is started if needed and left running: other tests and
people use it.  Stop/start is tested on a private server: its own home and free port.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from engine._errors import LocalServerError, StoreUnavailableError
from engine.servers.milvus import VERSION, LocalMilvus, ensure_local_milvus

from helpers import ROOT


def _free_port() -> int:
    for port in range(19700, 19900, 10):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_default_server_start_status_reuse() -> None:
    server = LocalMilvus()
    uri = server.start()
    assert uri == server.uri == f"http://127.0.0.1:{server.port}"
    st = server.status()
    assert st["running"] and st["ok"] and st["version"] == VERSION == "2.3.5"
    assert st["uri"] == uri and st["home"] == str(server.home) and isinstance(st["pid"], int)
    t0 = time.monotonic()
    assert ensure_local_milvus() == uri  # reused, not restarted
    assert time.monotonic() - t0 < 5
    assert LocalMilvus().status()["pid"] == st["pid"]


def test_default_server_config() -> None:
    server = LocalMilvus()
    server.start()
    conf = (server.home / "configs" / "milvus.yaml").read_text()
    assert "ttl: 10 " in conf or "ttl: 10\n" in conf  # common.session.ttl
    assert (server.home / "server.lock").exists()


@pytest.fixture
def private_server(tmp_path: Path):
    server = LocalMilvus(home=tmp_path / "milvus", port=_free_port())
    try:
        yield server
    finally:
        try:
            server.stop(timeout=30)
        except LocalServerError:
            pass


def test_private_server_outlives_its_starter_and_restarts(private_server: LocalMilvus) -> None:
    server = private_server
    assert server.status()["running"] is False
    assert server.stop() is False  # nothing to stop

    # started by another Python process that exits at once: the server must outlive it
    code = (
        "from pathlib import Path; from engine.servers.milvus import LocalMilvus; "
        f"print(LocalMilvus(home=Path({str(server.home)!r}), port={server.port}).start())"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith(server.uri)
    st = server.status()
    assert st["running"] and st["ok"], st

    # a second object on the same home reuses the same process
    again = LocalMilvus(home=server.home, port=server.port)
    assert again.start() == server.uri
    assert again.status()["pid"] == st["pid"]

    # another port on the same home: refused (one server per data directory)
    with pytest.raises(LocalServerError):
        LocalMilvus(home=server.home, port=server.port + 1).start(timeout=10)

    # data survives a stop/start; the first search after the restart does not stall
    from engine.stores.vectors import VectorStore

    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 16)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    vs = VectorStore(server.uri, kg="restart", dim=16)
    vs.upsert("entities", range(200), x)
    vs.finalize("entities")
    vs.close()

    assert server.stop() is True
    assert server.status()["running"] is False
    with pytest.raises(StoreUnavailableError):
        VectorStore(server.uri, timeout=1)

    t0 = time.monotonic()
    server.start()
    assert time.monotonic() - t0 < 90
    vs = VectorStore(server.uri, kg="restart", dim=16)
    try:
        t0 = time.monotonic()
        hit = vs.search("entities", x[42], 1)[0][0]
        first_search = time.monotonic() - t0
        assert hit[0] == 42
        assert first_search < 15, f"first search after restart took {first_search:.1f} s"
        assert vs.count("entities") == 200
    finally:
        vs.drop()
        vs.close()


def test_port_in_use_is_reported(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        server = LocalMilvus(home=tmp_path / "busy", port=port)
        t0 = time.monotonic()
        with pytest.raises(LocalServerError, match=str(port)):
            server.start(timeout=30)
        assert time.monotonic() - t0 < 10
        assert server.status()["running"] is False


def test_cli_lines(capsys: pytest.CaptureFixture[str]) -> None:
    from engine.servers.milvus import cli_start, cli_status

    cli_start()
    cli_status()
    out = capsys.readouterr().out
    assert "127.0.0.1" in out and "running" in out
