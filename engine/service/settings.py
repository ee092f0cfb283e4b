"""How ``isorag serve`` runs: :class:`ServiceSettings` (address, workers, keys, CORS, state) and :class:`Limits`.

Both are small immutable objects with named defaults. A server with several workers hands them to each worker
process through one environment variable (:data:`SETTINGS_ENV`, JSON: no secret is in them).
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from engine._config import isorag_home
from engine._errors import ConfigError

__all__ = ["Limits", "ServiceSettings", "SETTINGS_ENV", "is_loopback"]

SETTINGS_ENV = "ISORAG_SERVE_SETTINGS"
DEFAULT_PORT = 8750


@dataclass(frozen=True)
class Limits:
    """What one request may ask. Each limit answers with a problem (413, 422 or 504) that names it.

    ``body_bytes``: a request body (JSON); ``upload_bytes``: a claims file sent to the jobs route;
    ``question_chars``: a question, claim or search text; ``pattern_triples``: triples of a given pattern;
    ``k``: subgraphs per answer; ``page``: entities or triples per page of a search or a neighbourhood;
    ``timeout_s``: the work of one request (also the match deadline); ``body_timeout_s``: the time a client has
    to send its body (a slow client is cut off, the others are not held up).
    """

    body_bytes: int = 1 << 20
    upload_bytes: int = 64 << 20
    question_chars: int = 2_000
    pattern_triples: int = 16
    k: int = 100
    page: int = 5_000
    timeout_s: float = 60.0
    body_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        for name in ("body_bytes", "upload_bytes", "question_chars", "pattern_triples", "k", "page"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"limit {name} must be a positive integer, got {v!r}")
        for name in ("timeout_s", "body_timeout_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ConfigError(f"limit {name} must be a finite number of seconds > 0, got {v!r}")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ServiceSettings:
    """``host`` / ``port``: where to listen (loopback unless told); ``workers``: processes; ``auth``: API keys
    required (``False`` only on loopback: ``--no-auth``); ``keys``: the keys file (None: ``$ISORAG_KEYS`` or
    ``$ISORAG_HOME/service/keys.json``); ``state_dir``: jobs and metrics files shared by the workers (None:
    ``$ISORAG_HOME/service``); ``cors_origins``: origins allowed to call from a browser (none: CORS off);
    ``llm``: use the LLM the environment configures (``ISORAG_LLM_*``); ``job_concurrency``: claims verified at
    once per job; ``concurrency``: engine calls at once per worker (past it, requests wait their turn, so that a
    burst does not start more threads than the machine serves)."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    workers: int = 1
    auth: bool = True
    keys: str | None = None
    state_dir: str | None = None
    cors_origins: tuple[str, ...] = ()
    llm: bool = True
    job_concurrency: int = 2
    concurrency: int = 8
    limits: Limits = field(default_factory=Limits)

    def __post_init__(self) -> None:
        if not self.auth and not is_loopback(self.host):
            raise ConfigError(f"--no-auth is refused on {self.host}: without keys the service may only listen on "
                              "a loopback address (127.0.0.1, ::1, localhost)")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or not 1 <= self.workers <= 64:
            raise ConfigError(f"workers must be an integer from 1 to 64, got {self.workers!r}")
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ConfigError(f"port must be an integer from 0 to 65535, got {self.port!r}")
        if not isinstance(self.job_concurrency, int) or not 1 <= self.job_concurrency <= 64:
            raise ConfigError(f"job concurrency must be an integer from 1 to 64, got {self.job_concurrency!r}")
        c = self.concurrency
        if isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= 1024:
            raise ConfigError(f"concurrency must be an integer from 1 to 1024, got {self.concurrency!r}")
        for origin in self.cors_origins:
            if origin == "*" or not origin.startswith(("http://", "https://")):
                raise ConfigError(f"CORS origin {origin!r}: list each origin as scheme://host[:port] ('*' is refused)")

    @property
    def state_path(self) -> Path:
        return Path(self.state_dir).expanduser() if self.state_dir else isorag_home() / "service"

    @property
    def keys_path(self) -> Path:
        from engine.service.keys import default_keys_path

        return Path(self.keys).expanduser() if self.keys else default_keys_path()

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls) -> "ServiceSettings":
        raw = os.environ.get(SETTINGS_ENV)
        if not raw:
            return cls()
        data: dict[str, Any] = json.loads(raw)
        data["limits"] = Limits(**data.get("limits", {}))
        data["cors_origins"] = tuple(data.get("cors_origins", ()))
        return cls(**data)

    def with_(self, **changes: Any) -> "ServiceSettings":
        return replace(self, **changes)
