"""API keys of ``isorag serve`` (engine.service.keys), with no server: a model-based test of create / revoke / check
across several KeyStore objects on one file (as the workers of a server and the ``isorag keys`` command share it),
the file's mode and content, and the service's settings, metrics, problems and CLI refusals."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

from engine._errors import ConfigError, InputError
from engine.service.keys import ROLES, KeyStore
from helpers import ROOT

KGS = ("films", "music", "other_kg")


class KeysMachine(RuleBasedStateMachine):
    """Three stores on one file (a writer and two readers that cache what they read), checked against a dict."""

    keys = Bundle("keys")

    @initialize()
    def start(self) -> None:
        import tempfile

        self.dir = Path(tempfile.mkdtemp())
        self.path = self.dir / "keys.json"
        self.stores = [KeyStore(self.path) for _ in range(3)]
        self.model: dict[str, tuple[frozenset[str], str, bool]] = {}  # key -> (kgs, role, revoked)

    @rule(target=keys, kgs=st.sets(st.sampled_from(KGS + ("*",)), min_size=1, max_size=2),
          role=st.sampled_from(ROLES), by=st.integers(0, 2))
    def create(self, kgs: set[str], role: str, by: int) -> str:
        key, entry = self.stores[by].create(sorted(kgs), role)
        assert entry.role == role and set(entry.kgs) == kgs
        self.model[key] = (frozenset(kgs), role, False)
        return key

    @rule(key=keys, by=st.integers(0, 2))
    def revoke(self, key: str, by: int) -> None:
        kid = key.split("_")[1]
        self.stores[by].revoke(kid)
        kgs, role, _ = self.model[key]
        self.model[key] = (kgs, role, True)

    @rule(key=keys, by=st.integers(0, 2), kg=st.sampled_from(KGS), need=st.sampled_from(ROLES))
    def check(self, key: str, by: int, kg: str, need: str) -> None:
        kgs, role, revoked = self.model[key]
        found = self.stores[by].check(key)
        assert (found is None) == revoked
        if found is not None:
            want = ("*" in kgs or kg in kgs) and ROLES.index(role) >= ROLES.index(need)
            assert found.allows(kg, need) == want

    @rule(key=keys, by=st.integers(0, 2), flip=st.integers(8, 50))
    def wrong_key(self, key: str, by: int, flip: int) -> None:
        bad = key[:flip] + ("A" if key[flip] != "A" else "B") + key[flip + 1:]
        assert self.stores[by].check(bad) is None

    @invariant()
    def file_is_private_and_holds_no_key(self) -> None:
        if not self.path.exists():
            return
        assert stat.S_IMODE(self.path.stat().st_mode) == 0o600
        text = self.path.read_text()
        for key in self.model:
            assert key not in text and key.split("_", 2)[2] not in text
        listed = {k.id: k.revoked is not None for k in self.stores[0].list()}
        assert listed == {k.split("_")[1]: rev for k, (_, _, rev) in self.model.items()}


TestKeysMachine = KeysMachine.TestCase
TestKeysMachine.settings = settings(max_examples=30, stateful_step_count=20, deadline=None,
                                    suppress_health_check=[HealthCheck.too_slow])


def test_key_format_and_refusals(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "k" / "keys.json")
    key, entry = store.create(["films"], "read", name="ci")
    assert key.startswith(f"isorag_{entry.id}_") and len(key) == len("isorag_") + 8 + 1 + 43
    assert stat.S_IMODE((tmp_path / "k").stat().st_mode) == 0o700
    assert store.check(key) == entry and store.check(" " + key + "\n") == entry
    for bad in ("", "isorag_", key + "x", key.replace("isorag_", "isorog_"), None, 42):
        assert store.check(bad) is None  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown role"):
        store.create(["films"], "root")
    with pytest.raises(ConfigError, match="invalid KG name"):
        store.create(["films`) DETACH DELETE n //"], "read")
    with pytest.raises(ConfigError, match="at least one KG"):
        store.create([], "read")
    with pytest.raises(InputError, match="no key with id"):
        store.revoke("deadbeef")
    store.revoke(entry.id)
    assert store.check(key) is None
    (tmp_path / "k" / "keys.json").write_text("not json")
    with pytest.raises(ConfigError, match="not a keys file"):
        KeyStore(tmp_path / "k" / "keys.json").check(key)


def test_settings_refuse_no_auth_off_loopback() -> None:
    from engine.service.settings import Limits, ServiceSettings, is_loopback

    for host in ("0.0.0.0", "::", "192.168.1.4", "example.org"):
        with pytest.raises(ConfigError, match="--no-auth is refused"):
            ServiceSettings(host=host, auth=False)
    for host in ("127.0.0.1", "127.9.9.9", "::1", "[::1]", "localhost"):
        assert is_loopback(host)
        ServiceSettings(host=host, auth=False)
    ServiceSettings(host="0.0.0.0", auth=True)  # keys: any address
    with pytest.raises(ConfigError, match="CORS origin"):
        ServiceSettings(cors_origins=("*",))
    with pytest.raises(ConfigError, match="limit timeout_s"):
        Limits(timeout_s=float("nan"))
    s = ServiceSettings(workers=3, cors_origins=("http://localhost:3000",), limits=Limits(k=7))
    os.environ["ISORAG_SERVE_SETTINGS"] = s.to_env()
    try:
        assert ServiceSettings.from_env() == s
    finally:
        del os.environ["ISORAG_SERVE_SETTINGS"]


def test_metrics_render_adds_up_workers() -> None:
    from engine.service.metrics import Metrics, render

    a, b = Metrics(), Metrics()
    for m in (a, b):
        m.stages("ask", {"embed": 3.0, "graph": 40.0})
        m.inc("isorag_errors_total", {"type": "PatternError", "status": "422"})
    b.inc("isorag_engine_cache_total", {"result": "hit"})
    text = render([a.snapshot(), b.snapshot()])
    assert '# TYPE isorag_stage_seconds histogram' in text
    assert 'isorag_stage_seconds_count{route="ask",stage="graph"} 2' in text
    assert 'isorag_stage_seconds_bucket{route="ask",stage="embed",le="0.0025"} 0' in text
    assert 'isorag_stage_seconds_bucket{route="ask",stage="embed",le="0.005"} 2' in text
    assert 'isorag_errors_total{status="422",type="PatternError"} 2' in text
    assert 'isorag_engine_cache_total{result="hit"} 1' in text


def test_problem_body_and_eids() -> None:
    from engine.service.problems import eids_as_text, problem_body, status_of
    from engine._errors import KGNotFoundError, PatternError, StoreUnavailableError

    body = json.loads(problem_body(422, "PatternError", "bad", "ask: pattern", "/v1/kgs/x/ask"))
    assert body["type"] == "urn:isorag:error:PatternError" and body["status"] == 422 and body["where"] == "ask: pattern"
    assert status_of(KGNotFoundError("x", "bolt://a", "http://b")) == 404
    assert status_of(PatternError("p")) == 422 and status_of(StoreUnavailableError("Neo4j", "bolt://a")) == 503
    assert status_of(RuntimeError()) == 500
    big = 2 ** 63 - 5
    out = eids_as_text({"eid": big, "gsd": 0.5, "triples": [{"head_eid": 1, "tail_eid": big, "relation": "r"}],
                        "n": {"eid": True}})
    assert out == {"eid": str(big), "gsd": 0.5, "triples": [{"head_eid": "1", "tail_eid": str(big), "relation": "r"}],
                   "n": {"eid": True}}


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def test_cli_keys_and_serve_refusals(tmp_path: Path) -> None:
    keys = str(tmp_path / "keys.json")
    made = _cli("keys", "create", "--kg", "films", "--kg", "music", "--role", "write", "--keys", keys)
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    assert key.startswith("isorag_") and key not in made.stderr and key not in Path(keys).read_text()
    kid = key.split("_")[1]
    listed = _cli("keys", "list", "--json", "--keys", keys)
    assert [(k["id"], k["role"], k["kgs"]) for k in json.loads(listed.stdout)] == [(kid, "write", ["films", "music"])]
    assert key not in listed.stdout
    assert _cli("keys", "revoke", kid, "--keys", keys).returncode == 0
    assert json.loads(_cli("keys", "list", "--json", "--keys", keys).stdout)[0]["revoked"]
    bad = _cli("keys", "create", "--kg", "films", "--keys", keys)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--role" in bad.stderr
    refused = _cli("serve", "--host", "0.0.0.0", "--no-auth", "--keys", keys)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "--no-auth is refused on 0.0.0.0" in refused.stderr and "Traceback" not in refused.stderr
