"""Secrets never appear in a repr, str, message or log (docs/security.md).

Every settings/config class is checked: its secret fields (password, token, key...) set to a marker, its URI
fields given user info with that marker as the password; then the errors whose message carries a URI, from
the stores' clients (unreachable addresses: no server needed), the CLI and the LLM client.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
import re
import subprocess
import sys
from typing import Any

import pytest

import engine._config as config_mod
import engine.llm.base as llm_base_mod
import engine.llm.config as llm_config_mod
from engine._config import EngineConfig, MilvusSettings, Neo4jSettings
from engine._errors import ConfigError, IsoragError, LLMError, StoreUnavailableError
from engine._secrets import mask_uri, scrub
from engine.llm import LLMConfig, OpenAILLM

from helpers import ROOT

SECRET = "Sup3r-s3cret-value"
SECRET_FIELD = re.compile(r"^(password|passwd|token|secret|api_key|apikey|credentials?)$|_(password|token|secret|key)$",
                          re.I)
URI_FIELD = re.compile(r"(uri|url)$", re.I)


def _settings_classes() -> list[type]:
    """Every dataclass of the configuration modules."""
    out = []
    for mod in (config_mod, llm_config_mod, llm_base_mod):
        for _, cls in inspect.getmembers(mod, inspect.isclass):
            if dataclasses.is_dataclass(cls) and cls.__module__ == mod.__name__:
                out.append(cls)
    return out


def _scheme(cls: type) -> str:
    """A URI scheme the class accepts (Neo4j's settings take Bolt only, the others http(s))."""
    return "bolt" if cls.__name__.startswith("Neo4j") else "https"


def _with_secrets(cls: type) -> tuple[Any, list[str]] | None:
    """An instance of ``cls`` with every secret and URI field holding ``SECRET``; None if it has neither."""
    kw: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if SECRET_FIELD.search(f.name):
            kw[f.name] = SECRET
        elif URI_FIELD.search(f.name):
            kw[f.name] = f"{_scheme(cls)}://someone:{SECRET}@db.example:7687"
    return (cls(**kw), sorted(kw)) if kw else None


def test_every_settings_class_masks_its_secrets() -> None:
    checked = {}
    for cls in _settings_classes():
        made = _with_secrets(cls)
        if made is None:
            continue
        obj, names = made
        for text in (repr(obj), str(obj)):
            assert SECRET not in text, f"{cls.__name__} shows a secret: {text}"
        for name in names:
            if SECRET_FIELD.search(name):
                assert f"{name}='***'" in repr(obj), repr(obj)
            else:
                assert f"{name}='{_scheme(cls)}://someone:***@db.example:7687'" in repr(obj), repr(obj)
        checked[cls.__name__] = names
    # the test is not vacuous: the classes that hold secrets were found, with their fields
    assert checked["Neo4jSettings"] == ["password", "uri"]
    assert checked["MilvusSettings"] == ["token", "uri"]
    assert checked["LLMConfig"] == ["api_key", "base_url"]


def test_engine_config_nests_masked_settings() -> None:
    cfg = EngineConfig(
        neo4j=Neo4jSettings(uri=f"neo4j+s://neo4j:{SECRET}@x.databases.neo4j.io", password=SECRET),
        milvus=MilvusSettings(uri=f"https://root:{SECRET}@milvus.example:443", token=f"root:{SECRET}"),
    )
    for text in (repr(cfg), str(cfg), repr(cfg.with_(kg="other"))):
        assert SECRET not in text
    assert "password='***'" in repr(cfg) and "token='***'" in repr(cfg)
    # an unset secret shows as unset, so a reader can tell
    assert "password=''" in repr(EngineConfig(neo4j=Neo4jSettings()))


def test_settings_from_env_mask_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEO4J_PASSWORD", SECRET)
    monkeypatch.setenv("MILVUS_TOKEN", f"root:{SECRET}")
    monkeypatch.setenv("ISORAG_LLM_API_KEY", SECRET)
    monkeypatch.setenv("ISORAG_LLM_MODEL", "m")
    for obj in (EngineConfig.from_env(), LLMConfig.from_env()):
        assert SECRET not in repr(obj)


@pytest.mark.parametrize("uri, shown", [
    ("bolt://neo4j:pw-123456@host:7687", "bolt://neo4j:***@host:7687"),
    ("http://root:Milvus@127.0.0.1:19530/x", "http://root:***@127.0.0.1:19530/x"),
    ("https://TOKEN-abcdef@host", "https://***@host"),
    ("http://127.0.0.1:19530", "http://127.0.0.1:19530"),
    ("http://h/v1?api_key=abc&x=1", "http://h/v1?api_key=***&x=1"),
])
def test_mask_uri(uri: str, shown: str) -> None:
    assert mask_uri(uri) == shown


def test_every_error_message_is_scrubbed() -> None:
    uri = f"http://root:{SECRET}@127.0.0.1:1"
    e = StoreUnavailableError("Milvus", uri, f"cannot connect to {uri} with root:{SECRET}")
    assert SECRET not in str(e) and SECRET not in e.uri and SECRET not in e.reason
    assert "http://root:***@127.0.0.1:1" in str(e)
    MilvusSettings(token=f"root:{SECRET}")  # registers the secret: any message that quotes it loses it
    for err in (IsoragError(f"token root:{SECRET}"), ConfigError(f"x {SECRET} y"),
                LLMError("HTTP 401", text=f'{{"error": "bad key {SECRET}"}}')):
        assert SECRET not in str(err) and SECRET not in getattr(err, "text", "")


def test_milvus_client_errors_hide_the_uri_password_and_token() -> None:
    from engine.stores.vectors import VectorStore

    with pytest.raises(StoreUnavailableError) as info:
        VectorStore(f"http://root:{SECRET}@127.0.0.1:1", timeout=1)
    assert SECRET not in str(info.value) and "127.0.0.1:1" in str(info.value)
    with pytest.raises(StoreUnavailableError) as info:
        VectorStore("http://127.0.0.1:1", token=f"root:{SECRET}", timeout=1)
    assert SECRET not in str(info.value)


def test_neo4j_uri_with_user_info_is_a_masked_config_error() -> None:
    from engine.stores.graph import GraphStore

    with pytest.raises(ConfigError) as info:
        GraphStore(Neo4jSettings(uri=f"bolt://neo4j:{SECRET}@127.0.0.1:1", password=SECRET))
    assert SECRET not in str(info.value) and "bolt://neo4j:***@127.0.0.1:1" in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_cli_messages_hide_secrets() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEO4J_", "MILVUS_"))}
    env.update(PYTHONPATH=str(ROOT), NEO4J_URI=f"bolt://neo4j:{SECRET}@127.0.0.1:1", NEO4J_PASSWORD=SECRET,
               MILVUS_URI=f"http://root:{SECRET}@127.0.0.1:1", MILVUS_TOKEN=f"root:{SECRET}", HF_HUB_OFFLINE="1")
    out = subprocess.run([sys.executable, "-m", "engine.cli", "stats", "--kg", "secrets_probe"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert SECRET not in out.stdout + out.stderr, out.stderr[-2000:]
    assert "***" in out.stderr


def test_llm_key_and_url_password_stay_out(llm_server: Any, caplog: pytest.LogCaptureFixture) -> None:
    key = f"sk-{SECRET}"
    cfg = LLMConfig(base_url=llm_server.base_url, api_key=key, model="m", max_retries=0)
    assert key not in repr(cfg) and "api_key='***'" in repr(cfg)
    llm = OpenAILLM(cfg)
    # an endpoint that echoes the key in its error (some proxies do)
    llm_server.status(401, message=f"Incorrect API key provided: {key}")
    with pytest.raises(LLMError) as info:
        llm.complete("hi")
    assert "401" in str(info.value)
    assert SECRET not in str(info.value) and SECRET not in info.value.text
    # a base URL with user info: in the repr, the connection errors and the retry log
    host = llm_server.base_url.split("://", 1)[1]
    bad = OpenAILLM(LLMConfig(base_url=f"http://user:{SECRET}@127.0.0.1:1/v1", model="m", max_retries=1,
                              retry_backoff=0, timeout=2))
    assert SECRET not in repr(bad) and "user:***@" in repr(bad)
    with caplog.at_level(logging.WARNING), pytest.raises(LLMError) as info:
        bad.complete("hi")
    assert SECRET not in str(info.value)
    assert SECRET not in caplog.text
    assert host  # the scripted server was the one that answered above


def test_scrub_leaves_ordinary_text() -> None:
    assert scrub("no secrets here: bolt://127.0.0.1:7687") == "no secrets here: bolt://127.0.0.1:7687"
    # a plain word as a password is masked in reprs and URIs, but not searched for in every message
    MilvusSettings(token="root:Milvus")
    Neo4jSettings(password="password")
    text = "Milvus is unavailable at http://127.0.0.1:1: wrong password"
    assert scrub(text) == text
    assert scrub("http://root:Milvus@h:1") == "http://root:***@h:1"
