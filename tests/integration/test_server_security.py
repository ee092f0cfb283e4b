"""Who can reach the local servers (docs/security.md): real servers, no mocks.

Neo4j: the shared local server's listening sockets. Milvus: private servers (own homes and ports), since
these tests stop, restart and re-configure them: every port is on loopback as the host sees it, the server's
own listeners are inside a network namespace with nothing but ``lo``, and its client port wants root's secret.
"""

from __future__ import annotations

import fcntl
import http.client
import ipaddress
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import psutil
import pytest

import engine.servers.milvus as lm
from engine._errors import LocalServerError
from engine.servers.milvus import DEFAULT_ROOT_PASSWORD, LISTENERS, LocalMilvus, _probe, _server_pid

from helpers import ROOT

pytestmark = pytest.mark.long  # minutes of work: `make test` deals this file out first (tests/conftest.py)


LOOPBACK = ("127.0.0.1", "::1", "::ffff:127.0.0.1")


def _free_port(start: int) -> int:
    for port in range(start, start + 400, 7):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port from {start}")


def _other_addresses() -> list[str]:
    """This machine's IPv4 addresses other than loopback (eth0...)."""
    out = []
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family == socket.AF_INET and not ipaddress.ip_address(a.address).is_loopback:
                out.append(a.address)
    return out


def _host_listeners(pids: set[int]) -> list[tuple[str, int, int]]:
    """(address, port, pid) of the TCP listeners of ``pids`` that this (the host's) network namespace has."""
    return [(c.laddr.ip, c.laddr.port, c.pid) for c in psutil.net_connections("tcp")
            if c.status == psutil.CONN_LISTEN and c.pid in pids]


def _netns_listeners(pid: int) -> set[tuple[str, int]]:
    """(address, port) of the TCP listeners of ``pid``, read from its own network namespace's /proc tables."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table, width in (("tcp", 4), ("tcp6", 16)):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            f = line.split()
            if f[3] != "0A" or f[9] not in inodes:  # 0A: LISTEN
                continue
            hexaddr, hexport = f[1].split(":")
            raw = bytes.fromhex(hexaddr)
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, width, 4))  # little-endian words
            found.add((str(ipaddress.ip_address(raw)), int(hexport, 16)))
    return found


def _interfaces(pid: int) -> set[str]:
    lines = Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]
    return {line.split(":")[0].strip() for line in lines}


def _refused(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return False
    except OSError:
        return True


def _rest_served(host: str, port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/v1/vector/collections", timeout=3) as resp:
            return resp.status < 500
    except urllib.error.HTTPError as e:
        return e.code < 404
    except (OSError, ValueError, http.client.HTTPException):
        return False  # refused, reset, or gRPC's HTTP/2 frames instead of a REST answer: not served


def _start(server: LocalMilvus, *, earlier: bool = False) -> None:
    """Start ``server``; ``earlier``: as isorag did before issue 13 (no namespace, no authentication, REST on)."""
    saved = dict(lm._EXTRA_CONFIG)
    old_env = os.environ.get("ISORAG_MILVUS_ISOLATION")
    authentication = server.authentication
    if earlier:
        server.authentication = False  # no root password written, authorization off
        lm._EXTRA_CONFIG["proxy.http.enabled"] = "true"
    os.environ["ISORAG_MILVUS_ISOLATION"] = "none" if earlier else "netns"
    try:
        server.start(timeout=150)
    finally:
        server.authentication = authentication
        lm._EXTRA_CONFIG.clear()
        lm._EXTRA_CONFIG.update(saved)
        if old_env is None:
            os.environ.pop("ISORAG_MILVUS_ISOLATION", None)
        else:
            os.environ["ISORAG_MILVUS_ISOLATION"] = old_env


def _stop(server: LocalMilvus) -> None:
    try:
        server.stop(timeout=30)
    except LocalServerError:
        pass


# ------------------------------------------------------------------------------------------------ Neo4j
def test_neo4j_listens_on_loopback_only(neo4j_uri: str) -> None:
    if os.environ.get("NEO4J_URI"):
        pytest.skip("NEO4J_URI names another server: the local one's sockets are not this test's to read")
    port = int(neo4j_uri.rsplit(":", 1)[1])
    owners = {c.pid for c in psutil.net_connections("tcp")
              if c.status == psutil.CONN_LISTEN and c.laddr.port == port and c.pid}
    assert owners, f"no process listens on the local Neo4j's port {port}"
    pids = set(owners)
    for pid in owners:
        pids |= {p.pid for p in psutil.Process(pid).children(recursive=True)}
    listeners = _host_listeners(pids)
    assert any(p == port for _, p, _ in listeners)
    exposed = [(a, p) for a, p, _ in listeners if a not in LOOPBACK]
    assert not exposed, f"the local Neo4j listens beyond loopback: {exposed}"


# ------------------------------------------------------------------------------------------------ Milvus
@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalMilvus]:
    """A private server as isorag starts it by default (namespace, authentication), in ``<home>/milvus``."""
    home = tmp_path_factory.mktemp("iso") / "milvus"
    server = LocalMilvus(home=home, port=_free_port(19801))
    _start(server)
    yield server
    _stop(server)


def test_milvus_host_sees_only_the_relayed_loopback_port(secured: LocalMilvus) -> None:
    st = secured.status()
    assert st["running"] and st["ok"] and st["auth"] and st["isolation"] == "netns", st
    relay, milvus = st["pid"], st["server_pid"]
    assert relay != milvus and psutil.Process(milvus).name() == "milvus"
    listeners = _host_listeners({relay, milvus})
    assert listeners == [("127.0.0.1", secured.port, relay)], listeners
    # the server itself is in a network namespace of its own, which has no interface but lo
    assert os.readlink(f"/proc/{milvus}/ns/net") != os.readlink("/proc/self/ns/net")
    assert _interfaces(milvus) == {"lo"}


def test_milvus_listeners_are_the_documented_ones(secured: LocalMilvus) -> None:
    ports = json.loads((secured.home / "server.json").read_text())["ports"]
    assert set(ports) == set(LISTENERS)
    inside = _netns_listeners(_server_pid(secured.status()["pid"]))
    by_port = {p: a for a, p in inside}
    assert set(by_port) == set(ports.values()), (inside, ports)
    for name, port in ports.items():
        expect = ("127.0.0.1",) if name.startswith("etcd") else ("::", "0.0.0.0")
        assert by_port[port] in expect, (name, port, by_port[port])


def test_milvus_wants_the_secret(secured: LocalMilvus) -> None:
    uri = secured.uri
    assert _probe(uri, "") == "refused"
    assert _probe(uri, "root:not-the-password") == "refused"
    assert _probe(uri, f"root:{DEFAULT_ROOT_PASSWORD}") == "refused"
    assert _probe(uri, secured.token) == "ok"
    assert not _rest_served("127.0.0.1", secured.port)
    mode = secured.secret_path.stat().st_mode & 0o777
    assert mode == 0o600, oct(mode)
    assert secured.token == f"root:{secured.secret_path.read_text().strip()}"


def test_milvus_unreachable_through_other_addresses(secured: LocalMilvus) -> None:
    addresses = _other_addresses()
    if not addresses:
        pytest.skip("this machine has no address but loopback")
    ports = json.loads((secured.home / "server.json").read_text())["ports"]
    for host in addresses:
        for name, port in ports.items():
            assert _refused(host, port), f"{name} port {port} answers on {host}"
        assert _probe(f"http://{host}:{secured.port}", secured.token, timeout=2) == "down"
        assert not _rest_served(host, secured.port)


def test_engine_connections_find_the_secret(secured: LocalMilvus) -> None:
    """Another process: the default server of its ISORAG_HOME, with MILVUS_URI unset or naming it, no token."""
    code = (
        "import types\n"
        "from engine import Engine\n"
        "from engine.servers.milvus import cli_status\n"
        "from engine.stores.vectors import VectorStore\n"
        "vs = VectorStore('http://localhost:{port}', kg='sec_probe', dim=4)\n"
        "vs.ensure_collections(); print('explicit', vs.count('entities')); vs.drop(); vs.close()\n"
        "eng = Engine(kg='sec_probe', llm=False, embedder=types.SimpleNamespace(slug='probe', dim=4))\n"
        "print('engine', eng.vectors.count('entities')); eng.vectors.drop(); eng.close()\n"
        "cli_status()\n"
    ).replace("{port}", str(secured.port))
    env = {k: v for k, v in os.environ.items() if k not in ("MILVUS_URI", "MILVUS_TOKEN")}
    env.update(ISORAG_HOME=str(secured.home.parent), ISORAG_MILVUS_PORT=str(secured.port),
               PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "explicit 0" in out.stdout and "engine 0" in out.stdout
    assert f"authentication: on (root's password in {secured.secret_path}, mode 0600)" in out.stdout
    assert f"network: only http://127.0.0.1:{secured.port}" in out.stdout
    # MILVUS_URI naming this server, no token: the secret; a token given: that token
    code = ("import types\nfrom engine import Engine\n"
            "eng = Engine(kg='sec_probe', llm=False, embedder=types.SimpleNamespace(slug='probe', dim=4))\n"
            "print('count', eng.vectors.count('entities')); eng.vectors.drop()\n")
    env.update(MILVUS_URI=f"http://127.0.0.1:{secured.port}")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "count 0" in out.stdout, out.stderr[-3000:]
    env.update(MILVUS_TOKEN="root:wrong-password")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "StoreUnavailableError" in out.stderr
    assert "wrong-password" not in out.stderr


def test_crash_before_the_password_change_is_repaired(tmp_path: Path) -> None:
    """The secret is on disk but root still has the default password: the start changes it."""
    server = LocalMilvus(home=tmp_path / "milvus", port=_free_port(19851))
    server.home.mkdir(parents=True)
    lm._write_private(server.secret_path, "written-before-a-crash\n")
    try:
        _start(server)
        assert _probe(server.uri, "root:written-before-a-crash") == "ok"
        assert _probe(server.uri, f"root:{DEFAULT_ROOT_PASSWORD}") == "refused"
        server.stop()
        # a secret that is neither root's password nor the default: a clear error, not a hang
        lm._write_private(server.secret_path, "some-other-secret\n")
        with pytest.raises(LocalServerError, match="accepts neither"):
            _start(server)
        assert server.status()["running"] is False
    finally:
        _stop(server)


def test_earlier_isorag_data_directory_is_upgraded(tmp_path: Path) -> None:
    """A server as isorag started it before issue 13 (no namespace, no authentication), then the next start."""
    server = LocalMilvus(home=tmp_path / "milvus", port=_free_port(19881))
    try:
        _start(server, earlier=True)
        assert not server.secret_path.exists()
        assert _probe(server.uri, "") == "ok"  # what issue 13 found: open to anyone,
        for host in _other_addresses():  # from other machines too, REST included
            assert _probe(f"http://{host}:{server.port}", "") == "ok"
            assert _rest_served(host, server.port)
        st = server.status()
        assert not st["auth"] and st["isolation"] == "none" and st["secret"] is None
        # the ports that Milvus 2.3.5 opens on all interfaces when it runs without a namespace: the documented ones
        ports = json.loads((server.home / "server.json").read_text())["ports"]
        host = {(a, p) for a, p, _ in _host_listeners({st["pid"]})}
        assert {p for _, p in host} == set(ports.values())
        for name, port in ports.items():
            assert any(p == port and (a in LOOPBACK) == name.startswith("etcd") for a, p in host), (name, port)
        from pymilvus import MilvusClient

        MilvusClient(uri=server.uri).create_collection("kept", dimension=4)
        server.stop()

        _start(server)  # this isorag
        st = server.status()
        assert st["auth"] and st["isolation"] == "netns" and st["secret"] == str(server.secret_path)
        assert _probe(server.uri, "") == "refused"
        assert _probe(server.uri, f"root:{DEFAULT_ROOT_PASSWORD}") == "refused"
        assert not _rest_served("127.0.0.1", server.port)
        for host in _other_addresses():
            assert _refused(host, server.port)
        client = MilvusClient(uri=server.uri, token=server.token)
        assert "kept" in client.list_collections()
        client.close()
    finally:
        _stop(server)


# ------------------------------------------------------------------------------------------------ compose's Milvus
def test_compose_milvus_settings_and_set_password(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The milvus service's environment of docker/compose.yml, given to the same Milvus 2.3.5 with a config
    that says "no authentication, REST on": the variables turn both around; then ``isorag milvus
    set-password``, as the milvus-init service runs it, changes root's default password, idempotently."""
    import yaml

    compose = yaml.safe_load((ROOT / "docker" / "compose.yml").read_text())
    env = {k: str(v) for k, v in compose["services"]["milvus"]["environment"].items()
           if k.startswith(("COMMON_", "PROXY_"))}  # the settings; etcd and MinIO are the embedded ones here
    assert env == {"COMMON_SECURITY_AUTHORIZATIONENABLED": "true", "PROXY_HTTP_ENABLED": "false"}
    monkeypatch.setattr(lm, "_PASS_ENV", lm._PASS_ENV + tuple(env))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setitem(lm._EXTRA_CONFIG, "common.security.authorizationEnabled", "false")
    monkeypatch.setitem(lm._EXTRA_CONFIG, "proxy.http.enabled", "true")
    server = LocalMilvus(home=tmp_path / "milvus", port=_free_port(19911))
    server.home.mkdir(parents=True)
    # launched as compose does, with nobody changing the default password
    fd = os.open(server.home / "server.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        server._launch(fd)
    finally:
        os.close(fd)
    try:
        default = f"root:{DEFAULT_ROOT_PASSWORD}"
        for _ in range(300):
            if _probe(server.uri, default) == "ok":
                break
            time.sleep(0.5)
        assert _probe(server.uri, default) == "ok"
        assert _probe(server.uri, "") == "refused"  # COMMON_SECURITY_AUTHORIZATIONENABLED did it
        assert not _rest_served("127.0.0.1", server.port)  # and PROXY_HTTP_ENABLED

        def set_password(password: str | None) -> subprocess.CompletedProcess[str]:
            e = {k: v for k, v in os.environ.items() if k not in ("MILVUS_TOKEN", "MILVUS_ROOT_PASSWORD")}
            e.update(PYTHONPATH=str(ROOT), MILVUS_URI=server.uri)
            if password is not None:
                e["MILVUS_ROOT_PASSWORD"] = password
            return subprocess.run([sys.executable, "-m", "engine.cli", "milvus", "set-password"], env=e,
                                  capture_output=True, text=True, timeout=180)

        out = set_password("compose-secret-1")
        assert out.returncode == 0 and "set;" in out.stdout, out.stderr[-2000:]
        assert "compose-secret-1" not in out.stdout + out.stderr
        assert _probe(server.uri, "root:compose-secret-1") == "ok"
        assert _probe(server.uri, default) == "refused"
        out = set_password("compose-secret-1")  # a second `compose up`
        assert out.returncode == 0 and "was already set" in out.stdout, out.stderr[-2000:]
        out = set_password("another-secret")  # neither the default nor the password set
        assert out.returncode != 0 and "accepts neither" in out.stderr and "Traceback" not in out.stderr
        assert "another-secret" not in out.stderr
        out = set_password(None)
        assert out.returncode != 0 and "MILVUS_ROOT_PASSWORD" in out.stderr and "Traceback" not in out.stderr

        # the engine service's MILVUS_URI + MILVUS_TOKEN
        from engine.stores.vectors import VectorStore

        vs = VectorStore(server.uri, token="root:compose-secret-1", kg="compose_probe", dim=4)
        vs.ensure_collections()
        assert vs.count("entities") == 0
        vs.drop()
        vs.close()
    finally:
        _stop(server)
