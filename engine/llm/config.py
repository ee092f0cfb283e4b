"""LLM settings: :class:`LLMConfig`, read from arguments, the environment or a TOML/JSON file, and the message
shown when no LLM is configured.

The sampling defaults are SimGRAG's code's: temperature 0.2, top_p 0.1, max_tokens 1024; seed 0.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from engine._errors import ConfigError
from engine._secrets import masked_repr, register

__all__ = ["NO_LLM_HELP", "LLMConfig"]

#: what a caller is told when a text needs a pattern and no LLM is configured (answering, the langchain retriever)
NO_LLM_HELP = (
    "no LLM is configured to turn the text into a pattern. Either pass the pattern yourself "
    '(pattern={"triples": [["Heat", "directed_by", "UNKNOWN director 1"]]} in Python, --pattern on the command '
    "line), or configure an OpenAI-compatible "
    "endpoint: set ISORAG_LLM_BASE_URL (e.g. http://localhost:11434/v1) and ISORAG_LLM_MODEL (and "
    "ISORAG_LLM_API_KEY or OPENAI_API_KEY if it needs one), or pass Engine(llm=LLMConfig(base_url=..., "
    "model=...)) or Engine(llm=<a langchain-core chat model>)"
)

_FLOAT_FIELDS = {"temperature", "top_p", "timeout", "retry_backoff"}
_INT_FIELDS = {"seed", "max_tokens", "max_retries", "concurrency"}
_OPTIONAL_FIELDS = {"base_url", "api_key", "model", "top_p", "seed"}
# Checked before the generic ISORAG_LLM_<FIELD>: the names other OpenAI tooling already uses.
_ENV_FALLBACKS = {"base_url": ("OPENAI_BASE_URL",), "api_key": ("OPENAI_API_KEY",)}


@dataclass(frozen=True)
class LLMConfig:
    """How to reach an OpenAI-compatible chat endpoint, and how to sample from it.

    ``base_url`` is e.g. ``http://localhost:11434/v1`` (Ollama) or ``http://localhost:8000/v1`` (vLLM);
    ``None`` means OpenAI itself. ``timeout`` bounds one HTTP attempt; ``max_retries`` counts the extra
    attempts after a 429, a 5xx or a connection error, ``retry_backoff`` is the first backoff in seconds
    (doubled each retry, with jitter). ``concurrency`` caps the calls in flight through one client.
    """

    base_url: str | None = None
    api_key: str | None = None  # masked in repr
    model: str | None = None
    temperature: float = 0.2
    top_p: float | None = 0.1
    seed: int | None = 0
    max_tokens: int = 1024
    timeout: float = 60.0
    max_retries: int = 3
    concurrency: int = 4
    retry_backoff: float = 0.5

    def __post_init__(self) -> None:
        for name in _FLOAT_FIELDS | _INT_FIELDS:
            value = getattr(self, name)
            if value is None and name in _OPTIONAL_FIELDS:
                continue
            kinds = (int, float) if name in _FLOAT_FIELDS else (int,)
            if isinstance(value, bool) or not isinstance(value, kinds):
                raise ConfigError(f"LLM {name} must be a number, got {value!r}")
            if name in _FLOAT_FIELDS and not math.isfinite(value):
                raise ConfigError(f"LLM {name} must be finite, got {value!r}")
        for name in ("base_url", "api_key", "model"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"LLM {name} must be a string, got {type(value).__name__}")
        register(self.api_key)
        if self.temperature < 0:
            raise ConfigError(f"LLM temperature must be >= 0, got {self.temperature}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ConfigError(f"LLM top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ConfigError(f"LLM max_tokens must be >= 1, got {self.max_tokens}")
        if self.timeout <= 0:
            raise ConfigError(f"LLM timeout must be > 0 seconds, got {self.timeout}")
        if self.max_retries < 0:
            raise ConfigError(f"LLM max_retries must be >= 0, got {self.max_retries}")
        if self.concurrency < 1:
            raise ConfigError(f"LLM concurrency must be >= 1, got {self.concurrency}")
        if self.retry_backoff < 0:
            raise ConfigError(f"LLM retry_backoff must be >= 0, got {self.retry_backoff}")

    def __repr__(self) -> str:
        return masked_repr(self, secret=("api_key",), uris=("base_url",))

    @property
    def configured(self) -> bool:
        """True when an endpoint (base URL or API key) and a model are set."""
        return bool(self.base_url or self.api_key) and bool(self.model)

    @classmethod
    def from_env(cls, **overrides: Any) -> LLMConfig:
        """From ``ISORAG_LLM_<FIELD>`` (``ISORAG_LLM_BASE_URL``, ``ISORAG_LLM_API_KEY``, ``ISORAG_LLM_MODEL``,
        ``ISORAG_LLM_TEMPERATURE``, ``ISORAG_LLM_TOP_P``, ``ISORAG_LLM_SEED``, ``ISORAG_LLM_MAX_TOKENS``,
        ``ISORAG_LLM_TIMEOUT``, ``ISORAG_LLM_MAX_RETRIES``, ``ISORAG_LLM_CONCURRENCY``,
        ``ISORAG_LLM_RETRY_BACKOFF``), then ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``; keyword ``overrides``
        win over both (``top_p=None`` really means no top_p). An optional field set to ``""`` or ``none``
        in the environment is None."""
        _check_names(overrides, "from_env()")
        values: dict[str, Any] = {}
        for f in fields(cls):
            names = (f"ISORAG_LLM_{f.name.upper()}", *_ENV_FALLBACKS.get(f.name, ()))
            for env_name in names:
                raw = os.environ.get(env_name)
                if raw is not None and (raw.strip() or f.name in _OPTIONAL_FIELDS):
                    values[f.name] = _from_text(f.name, raw, env_name)
                    break
        values.update(overrides)
        return cls(**values)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> LLMConfig:
        """From a TOML file (its ``[llm]`` table, or the top level when there is none) or a JSON file (its
        ``"llm"`` object, or the top level). Unknown keys are an error. Keep keys out of shared files: a
        missing ``api_key`` is taken from the environment when the client starts."""
        p = Path(path)
        try:
            raw = p.read_bytes()
        except OSError as e:
            raise ConfigError(f"cannot read LLM config {p}: {e}") from e
        if p.suffix.lower() == ".json":
            try:
                data = json.loads(raw)
            except ValueError as e:
                raise ConfigError(f"{p}: not valid JSON: {e}") from e
        else:
            try:
                import tomllib
            except ModuleNotFoundError:  # Python 3.10
                try:
                    import tomli as tomllib  # type: ignore[no-redef]
                except ModuleNotFoundError as e:
                    raise ConfigError(f"{p}: reading TOML on Python 3.10 needs: pip install tomli") from e
            try:
                data = tomllib.loads(raw.decode("utf-8"))
            except (ValueError, UnicodeDecodeError) as e:
                raise ConfigError(f"{p}: not valid TOML: {e}") from e
        if isinstance(data, Mapping) and isinstance(data.get("llm"), Mapping):
            data = data["llm"]
        if not isinstance(data, Mapping):
            raise ConfigError(f"{p}: expected a table of LLM settings, got {type(data).__name__}")
        _check_names(data, str(p))
        return cls(**dict(data))


def _check_names(values: Mapping[str, Any], where: str) -> None:
    known = {f.name for f in fields(LLMConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown LLM setting(s) {unknown}; known: {sorted(known)}")


def _from_text(name: str, raw: str, source: str) -> Any:
    text = raw.strip()
    if name in _OPTIONAL_FIELDS and text.lower() in ("", "none", "null"):
        return None
    if name in _FLOAT_FIELDS or name in _INT_FIELDS:
        try:
            return float(text) if name in _FLOAT_FIELDS else int(text)
        except ValueError:
            raise ConfigError(f"{source}={raw!r} is not a valid {name}") from None
    return text
