"""Integration tests of the embedded local Neo4j (a real Neo4j 5.26 server, real Bolt, the real Python driver).

The default server (``$ISORAG_HOME/neo4j``, port 7687) is started or reused and left running: other tests use it.
Tests that stop a server use their own home (tmp_path) and a free port.
"""

from __future__ import annotations

import socket
import time
import uuid

import pytest
from neo4j import GraphDatabase

from engine._errors import LocalServerError
from engine.servers.neo4j import NEO4J_VERSION, LocalNeo4j, default_instance, ensure_local_neo4j


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server() -> LocalNeo4j:
    srv = default_instance()
    srv.start(timeout=300)
    return srv  # never stopped here: the default server is shared


def test_version_is_pinned_526() -> None:
    major, minor, patch = NEO4J_VERSION.split(".")
    assert (major, minor) == ("5", "26") and patch.isdigit()


def test_start_and_status(server: LocalNeo4j) -> None:
    st = server.status()
    assert st["running"] and st["bolt_ok"] and st["ready"]
    assert isinstance(st["pid"], int)
    assert st["uri"] == server.uri == f"bolt://127.0.0.1:{server.port}"
    assert st["home"] == str(server.home)
    assert st["version"] == NEO4J_VERSION


def test_write_and_read_through_the_driver(server: LocalNeo4j) -> None:
    tag = uuid.uuid4().hex
    with GraphDatabase.driver(server.uri, auth=None) as driver:
        try:
            driver.execute_query(
                "CREATE (a:IsoragLocalTest {tag: $tag, name: 'a'})-[:KNOWS {w: 1.5}]->"
                "(b:IsoragLocalTest {tag: $tag, name: 'b'})", tag=tag)
            records, _, _ = driver.execute_query(
                "MATCH (a:IsoragLocalTest {tag: $tag})-[r:KNOWS]->(b) RETURN a.name AS a, r.w AS w, b.name AS b",
                tag=tag)
            assert [(r["a"], r["w"], r["b"]) for r in records] == [("a", 1.5, "b")]
            records, _, _ = driver.execute_query("CALL dbms.components() YIELD versions, edition "
                                                 "RETURN versions[0] AS v, edition")
            assert records[0]["v"] == NEO4J_VERSION and records[0]["edition"] == "community"
        finally:
            driver.execute_query("MATCH (n:IsoragLocalTest {tag: $tag}) DETACH DELETE n", tag=tag)


def test_bolt_listens_on_loopback_without_auth(server: LocalNeo4j) -> None:
    with GraphDatabase.driver(server.uri, auth=("anyone", "anything")) as driver:
        records, _, _ = driver.execute_query(
            "SHOW SETTINGS YIELD name, value WHERE name IN "
            "['server.bolt.listen_address', 'dbms.security.auth_enabled', 'server.bolt.enabled'] "
            "RETURN name, value")
    settings = {r["name"]: r["value"] for r in records}
    assert settings["server.bolt.listen_address"] == f"127.0.0.1:{server.port}"
    assert settings["dbms.security.auth_enabled"] == "false"
    assert settings["server.bolt.enabled"] == "true"


def test_start_is_idempotent(server: LocalNeo4j) -> None:
    pid = server.status()["pid"]
    t0 = time.monotonic()
    assert server.start() == server.uri
    assert ensure_local_neo4j() == server.uri
    assert server.status()["pid"] == pid
    assert time.monotonic() - t0 < 30


def test_running_on_another_port_is_a_clear_error(server: LocalNeo4j) -> None:
    other = LocalNeo4j(home=server.home, port=_free_port())
    with pytest.raises(LocalServerError, match="already running on port"):
        other.start(timeout=10)


def test_port_taken_by_a_foreign_process_is_a_clear_error(tmp_path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        t0 = time.monotonic()
        with pytest.raises(LocalServerError, match=f"port {port} .* already in use"):
            LocalNeo4j(home=tmp_path / "neo4j", port=port).start(timeout=30)
        assert time.monotonic() - t0 < 10


def test_a_launcher_that_dies_raises_with_its_log(tmp_path) -> None:
    srv = LocalNeo4j(home=tmp_path / "neo4j", port=_free_port(), tx_timeout="not-a-duration")
    with pytest.raises(LocalServerError, match="exited while starting") as exc:
        srv.start(timeout=120)
    assert "NumberFormatException" in str(exc.value)
    assert not srv.status()["running"]


def test_own_instance_start_stop(tmp_path) -> None:
    srv = LocalNeo4j(home=tmp_path / "neo4j", port=_free_port(), heap="512m", pagecache="64m")
    try:
        assert srv.start(timeout=300) == srv.uri
        st = srv.status()
        assert st["running"] and st["bolt_ok"]
        assert (srv.home / "data" / "databases" / "neo4j").is_dir()
        assert srv.start() == srv.uri and srv.status()["pid"] == st["pid"]
    finally:
        assert srv.stop() is True
    st = srv.status()
    assert not st["running"] and not st["bolt_ok"] and st["pid"] is None
    assert srv.stop() is False
    with socket.socket() as s:  # the port is free again (SO_REUSEADDR: closed connections may sit in TIME_WAIT)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", srv.port))
    assert "stopped cleanly" in (srv.home / "logs" / "isorag-neo4j.log").read_text()
