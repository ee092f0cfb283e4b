"""``isorag serve`` for the service's tests: a server in a thread of the test process (sharing its embedding
model), or in its own process (the CLI, for workers, restarts and logs); a small films KG; keys.

    with ThreadServer(settings, pool) as srv:       # srv.url, srv.get(path, key=...), srv.post(...)
    with ProcessServer(["--workers", "2"], env) as srv:
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from helpers import ROOT

#: a few films: what the service's tests ask about (loaded in seconds)
FILMS = """Heat|directed_by|Michael Mann
Heat|starred_actors|Al Pacino
Heat|starred_actors|Robert De Niro
Heat|release_year|1995
Collateral|directed_by|Michael Mann
Collateral|starred_actors|Tom Cruise
Thief|directed_by|Michael Mann
The Insider|directed_by|Michael Mann
The Insider|starred_actors|Al Pacino
Scarface|starred_actors|Al Pacino
Scarface|directed_by|Brian De Palma
Carlito's Way|directed_by|Brian De Palma
Carlito's Way|starred_actors|Al Pacino
Blade Runner|directed_by|Ridley Scott
Alien|directed_by|Ridley Scott
"""
DIRECTED_BY_HEAT = {"triples": [["Heat", "directed_by", "UNKNOWN 1"]]}


MANN_FILMS = ("Heat", "Collateral", "Thief", "The Insider")


def claims(n: int) -> str:
    """``n`` claims about who directed the films, every other one false, each with its pattern."""
    rows = []
    for i in range(n):
        film = MANN_FILMS[i % len(MANN_FILMS)]
        who = "Michael Mann" if i % 2 == 0 else "Ridley Scott"
        rows.append({"id": f"c{i}", "claim": f"{film} was directed by {who}", "label": "SUPPORTED" if i % 2 == 0 else
                     "REFUTED", "pattern": {"triples": [[film, "directed_by", who]]}})
    return "".join(json.dumps(r) + "\n" for r in rows)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def load_films(eng: Any, tmp: Path, text: str = FILMS) -> None:
    path = tmp / "films.txt"
    path.write_text(text)
    eng.load(path, progress=False)


class _Client:
    url: str

    def request(self, method: str, path: str, key: str | None = None, **kw: Any) -> httpx.Response:
        headers = dict(kw.pop("headers", {}) or {})
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        return httpx.request(method, self.url + path, headers=headers, timeout=kw.pop("timeout", 120), **kw)

    def get(self, path: str, key: str | None = None, **kw: Any) -> httpx.Response:
        return self.request("GET", path, key, **kw)

    def post(self, path: str, key: str | None = None, **kw: Any) -> httpx.Response:
        return self.request("POST", path, key, **kw)

    def wait_healthy(self, timeout: float = 120.0, proc: Any = None) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"the server exited with {proc.returncode}")
            try:
                if httpx.get(self.url + "/healthz", timeout=2).text == "ok":
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"no server at {self.url}")


class ThreadServer(_Client):
    """``create_app(settings, pool=pool)`` served by uvicorn in a thread of this process."""

    def __init__(self, settings: Any, pool: Any = None) -> None:
        import uvicorn

        from engine.service.app import create_app

        self.settings = settings.with_(port=settings.port or free_port())
        self.url = f"http://127.0.0.1:{self.settings.port}"
        self.app = create_app(self.settings, pool=pool)
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.settings.port,
                                                    log_level="warning", timeout_keep_alive=5))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def service(self) -> Any:
        return self.app.state.service

    def __enter__(self) -> "ThreadServer":
        self.thread.start()
        self.wait_healthy(30)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(30)


class ProcessServer(_Client):
    """``isorag serve ARGS`` in a process of its own (stdout and stderr to ``log``)."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args, self.env, self.log = args, env, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> "ProcessServer":
        env = {**os.environ, **self.env, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "serve", "--port", str(self.port),
                                          *self.args], env=env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self.wait_healthy(180, self.proc)
        return self

    def kill(self) -> None:
        """SIGKILL the server and its workers (its process group): nothing gets to clean up."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> "ProcessServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def server_env(neo4j_uri: str, milvus_uri: str, keys: Path) -> dict[str, str]:
    return {"NEO4J_URI": neo4j_uri, "MILVUS_URI": milvus_uri, "ISORAG_KEYS": str(keys), "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false"}


def films_server(neo4j_uri: str, milvus_uri: str, embedder: Any, tmp: Path, llm: Any = False,
                 **settings: Any) -> Any:
    """A module fixture's body: the films KG loaded under a name of its own, keys of every role for it (``read``,
    ``write``, ``admin``) and one read key for every KG (``all``), and a :class:`ThreadServer` on it; yields the
    server (``srv.kg``, ``srv.keys``, ``srv.owner``), then drops the KG."""
    from engine._config import EngineConfig, MilvusSettings, Neo4jSettings
    from engine._engine import Engine
    from engine.service.engines import EnginePool
    from engine.service.keys import KeyStore
    from engine.service.settings import ServiceSettings

    from helpers.kg import unique_kg

    base = EngineConfig(kg=unique_kg("srv"), neo4j=Neo4jSettings(uri=neo4j_uri), milvus=MilvusSettings(uri=milvus_uri))
    owner = Engine(base, llm=False, embedder=embedder)
    load_films(owner, tmp)
    store = KeyStore(tmp / "keys.json")
    keys = {role: store.create([base.kg], role)[0] for role in ("read", "write", "admin")}
    keys["all"] = store.create(["*"], "read")[0]
    pool = EnginePool(llm=llm, embedder=embedder, config=base)
    cfg = ServiceSettings(port=0, keys=str(tmp / "keys.json"), state_dir=str(tmp / "state"), llm=llm is not False,
                          **settings)
    try:
        with ThreadServer(cfg, pool) as srv:
            srv.kg, srv.keys, srv.owner, srv.store = base.kg, keys, owner, store
            yield srv
    finally:
        owner.drop()
        owner.close()

