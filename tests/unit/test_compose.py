"""docker/compose.yml has no default secret, refuses to start without its secrets, and turns Milvus'
authentication on (issue 13). There is no Docker engine here: the file is parsed, and its variables are
interpolated the way compose does (``${VAR}``, ``${VAR:-default}``, ``${VAR:?message}``, ``$$``).
The Milvus settings themselves are tried on a real Milvus 2.3.5 in test_server_security.py."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from helpers import ROOT

COMPOSE = ROOT / "docker" / "compose.yml"
REQUIRED = ("NEO4J_PASSWORD", "MILVUS_ROOT_PASSWORD", "MINIO_SECRET_KEY", "ISORAG_API_KEY")
SECRETISH = re.compile(r"PASSWORD|SECRET|TOKEN|_KEY\b|_AUTH\b", re.I)
VAR = re.compile(r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")


class Refused(Exception):
    """What compose does with ``${VAR:?message}`` when VAR is unset or empty: no start."""


def interpolate(value: Any, env: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name, op, arg = m.group("name"), m.group("op"), m.group("arg")
        have = env.get(name)
        if op in (":?", "?") and (have is None or (op == ":?" and have == "")):
            raise Refused(f"required variable {name} is missing a value: {arg}")
        if op in (":-", "-") and (have is None or (op == ":-" and have == "")):
            return arg
        return have or ""

    return VAR.sub(one, value)


@pytest.fixture(scope="module")
def text() -> str:
    return COMPOSE.read_text()


@pytest.fixture(scope="module")
def compose(text: str) -> dict[str, Any]:
    return yaml.safe_load(text)


def _env_values() -> dict[str, str]:
    return {"NEO4J_PASSWORD": "neo4j-pass-1", "MILVUS_ROOT_PASSWORD": "milvus-pass-1",
            "MINIO_SECRET_KEY": "minio-pass-1", "ISORAG_API_KEY": "k" * 40}


def test_no_secret_has_a_default(text: str) -> None:
    for m in VAR.finditer(text):
        name, op, arg = m.group("name"), m.group("op"), m.group("arg")
        if name and SECRETISH.search(name) and op in (":-", "-"):
            assert arg == "", f"${{{name}}} has a default: {arg!r}"  # an empty default is no secret
    for literal in ("isorag-change-me", "minioadmin", "root:Milvus"):
        assert literal not in text


def test_every_secret_is_required(text: str) -> None:
    for name in REQUIRED:
        uses = [m for m in VAR.finditer(text) if m.group("name") == name]
        assert uses, f"{name} is not used"
        assert all(m.group("op") == ":?" and m.group("arg").strip() for m in uses), \
            f"every use of {name} must be ${{{name}:?message}}"


@pytest.mark.parametrize("missing", REQUIRED)
def test_compose_refuses_to_start_without_each_secret(compose: dict[str, Any], missing: str) -> None:
    assert interpolate(compose, _env_values())  # all set: fine
    for env in ({k: v for k, v in _env_values().items() if k != missing}, {**_env_values(), missing: ""}):
        with pytest.raises(Refused, match=missing):
            interpolate(compose, env)


def test_milvus_authentication_on_and_token_passed(compose: dict[str, Any]) -> None:
    svc = interpolate(compose, _env_values())["services"]
    milvus = svc["milvus"]["environment"]
    assert milvus["COMMON_SECURITY_AUTHORIZATIONENABLED"] == "true"  # common.security.authorizationEnabled
    assert milvus["PROXY_HTTP_ENABLED"] == "false"
    assert milvus["MINIO_SECRET_ACCESS_KEY"] == svc["minio"]["environment"]["MINIO_ROOT_PASSWORD"] == "minio-pass-1"
    assert milvus["MINIO_ACCESS_KEY_ID"] == svc["minio"]["environment"]["MINIO_ROOT_USER"]
    # only the client port is published, on BIND_ADDRESS (loopback unless set)
    assert svc["milvus"]["ports"] == ["127.0.0.1:19530:19530"]
    for name in ("etcd", "minio", "milvus-init"):
        assert "ports" not in svc[name]
    # the one-shot init sets root's password from the required variable, after Milvus is healthy
    init = svc["milvus-init"]
    assert init["entrypoint"] + init["command"] == ["isorag", "milvus", "set-password"]
    assert init["restart"] == "no"
    assert init["environment"]["MILVUS_ROOT_PASSWORD"] == "milvus-pass-1"
    assert init["environment"]["MILVUS_URI"] == "http://milvus:19530"
    assert init["depends_on"]["milvus"]["condition"] == "service_healthy"
    # the engine runs after it, with the token
    engine = svc["engine"]
    assert engine["depends_on"]["milvus-init"]["condition"] == "service_completed_successfully"
    assert engine["environment"]["MILVUS_TOKEN"] == "root:milvus-pass-1"
    assert engine["environment"]["MILVUS_URI"] == init["environment"]["MILVUS_URI"]
    assert engine["environment"]["NEO4J_PASSWORD"] == "neo4j-pass-1"
    assert svc["neo4j"]["environment"]["NEO4J_AUTH"] == "neo4j/neo4j-pass-1"


def test_published_ports_bind_loopback_by_default(compose: dict[str, Any]) -> None:
    svc = interpolate(compose, _env_values())["services"]
    for name, s in svc.items():
        for port in s.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)


def test_serve_has_its_key_from_the_environment_and_auth_on(compose: dict[str, Any]) -> None:
    """The service (issue 28): its key from ISORAG_API_KEY (no default), never --no-auth, published on loopback
    unless BIND_ADDRESS says otherwise, after the stores are ready."""
    svc = interpolate(compose, _env_values())["services"]
    serve = svc["serve"]
    cmd = serve["entrypoint"] + serve["command"]
    assert cmd[:2] == ["isorag", "serve"] and "--no-auth" not in cmd
    assert cmd[cmd.index("--host") + 1] == "0.0.0.0"  # inside its container; the published port decides who reaches it
    env = serve["environment"]
    assert env["ISORAG_API_KEY"] == "k" * 40 and env["ISORAG_API_KEY_ROLE"] == "read"
    assert env["MILVUS_TOKEN"] == "root:milvus-pass-1" and env["NEO4J_PASSWORD"] == "neo4j-pass-1"
    assert serve["ports"] == ["127.0.0.1:8750:8750"]
    assert serve["depends_on"]["milvus-init"]["condition"] == "service_completed_successfully"
    assert "healthz" in " ".join(serve["healthcheck"]["test"])
    exposed = interpolate(compose, {**_env_values(), "BIND_ADDRESS": "0.0.0.0"})["services"]["serve"]
    assert exposed["ports"] == ["0.0.0.0:8750:8750"]


def test_the_env_key_is_checked_and_accepted(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine._errors import ConfigError
    from engine.service.keys import KeyStore, key_from_env

    monkeypatch.setenv("ISORAG_API_KEY", "short")
    with pytest.raises(ConfigError, match="at least 32"):
        key_from_env()
    key = "Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0aGlzaXM="
    monkeypatch.setenv("ISORAG_API_KEY", key)
    monkeypatch.setenv("ISORAG_API_KEY_KGS", "films, music")
    store = KeyStore(tmp_path / "keys.json", env_key=key_from_env())
    found = store.check(key)
    assert found is not None and found.role == "read" and found.kgs == ("films", "music")
    assert found.allows("films", "read") and not found.allows("films", "write") and not found.allows("other", "read")
    assert store.check(key[:-1]) is None and not (tmp_path / "keys.json").exists()
