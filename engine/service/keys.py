"""API keys of ``isorag serve``: made, listed and revoked by ``isorag keys``, checked on every request.

A key is ``isorag_<id>_<secret>``: ``id`` (8 hex digits) names it in listings and revocations, ``secret`` is 256
random bits. The file keeps, per key, only the SHA-256 of the whole key (a full-entropy secret needs no slow hash:
nothing short enough to guess is ever hashed), its KGs (names, or ``*`` for every KG), its role and dates; the key
itself is shown once, when it is made, and never written or logged. The file is JSON, mode 0600, replaced whole
(write to a temporary file, fsync, rename) under an exclusive ``fcntl`` lock on ``<file>.lock``, so several
``isorag keys`` commands and every worker of a server may use it at once. A server reads it again whenever its
size, mtime or inode change, so a key made or revoked is seen by the next request on every worker.

Roles, each allowing what the ones before it allow: ``read`` (ask, retrieve, verify, search, browse, stats, job
progress and results), ``write`` (apply a change set, submit a verification job), ``admin`` (check and repair).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine._config import check_kg_name, isorag_home
from engine._errors import ConfigError, InputError

__all__ = ["ENV_KEY", "ROLES", "ApiKey", "KeyStore", "default_keys_path", "key_from_env"]

ROLES = ("read", "write", "admin")
ALL_KGS = "*"
_KEY = re.compile(r"isorag_(?P<id>[0-9a-f]{8})_(?P<secret>[A-Za-z0-9_-]{43})")
_FORMAT = 1
#: a key the operator chooses and hands the server in its environment (compose): ISORAG_API_KEY, with
#: ISORAG_API_KEY_ROLE (default read) and ISORAG_API_KEY_KGS (comma-separated names, default every KG)
ENV_KEY = "ISORAG_API_KEY"
ENV_KEY_MIN = 32


def default_keys_path() -> Path:
    """``$ISORAG_KEYS``, else ``$ISORAG_HOME/service/keys.json``."""
    given = os.environ.get("ISORAG_KEYS", "").strip()
    return Path(given).expanduser() if given else isorag_home() / "service" / "keys.json"


@dataclass(frozen=True)
class ApiKey:
    """What the file says of a key (never the key itself)."""

    id: str
    kgs: tuple[str, ...]
    role: str
    created: str
    name: str = ""
    revoked: str | None = None

    def allows(self, kg: str | None, role: str) -> bool:
        """Whether this key may do what needs ``role`` on ``kg`` (None: a route of no one KG)."""
        if self.revoked is not None or ROLES.index(self.role) < ROLES.index(role):
            return False
        return kg is None or ALL_KGS in self.kgs or kg in self.kgs

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kgs": list(self.kgs), "role": self.role, "name": self.name,
                "created": self.created, "revoked": self.revoked}


def _check_role(role: str) -> str:
    if role not in ROLES:
        raise ConfigError(f"unknown role {role!r}: use {', '.join(ROLES)}")
    return role


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def key_from_env() -> tuple[str, ApiKey] | None:
    """The SHA-256 of ``$ISORAG_API_KEY`` and what it may do, or None when it is not set. The key itself is kept
    nowhere (and registered as a secret, so no message carries it)."""
    from engine._secrets import register

    raw = os.environ.get(ENV_KEY, "")
    if not raw.strip():
        return None
    key = raw.strip()
    if len(key) < ENV_KEY_MIN or any(c.isspace() for c in key):
        raise ConfigError(f"{ENV_KEY} must be at least {ENV_KEY_MIN} characters without spaces (e.g. the output of "
                          "`openssl rand -base64 32`)")
    register(key)
    role = _check_role(os.environ.get(f"{ENV_KEY}_ROLE", "").strip() or "read")
    kgs = [k.strip() for k in os.environ.get(f"{ENV_KEY}_KGS", "").split(",") if k.strip()] or [ALL_KGS]
    scoped = tuple(sorted({k if k == ALL_KGS else check_kg_name(k) for k in kgs}))
    return _digest(key), ApiKey("env", scoped, role, "")


class KeyStore:
    """The keys file at ``path`` (see the module's docstring). Thread-safe; any number of processes."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 env_key: tuple[str, ApiKey] | None = None) -> None:
        """``env_key``: a key accepted besides the file's (:func:`key_from_env`)."""
        self.path = Path(path) if path is not None else default_keys_path()
        self.env_key = env_key
        self._mutex = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._entries: dict[str, dict[str, Any]] = {}

    # -- the file ---------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as e:
            raise ConfigError(f"cannot read the keys file {self.path}: {e.strerror or e}") from e
        try:
            data = json.loads(raw)
            entries = data["keys"]
            assert isinstance(entries, dict)
        except (ValueError, KeyError, TypeError, AssertionError):
            raise ConfigError(f"the keys file {self.path} is not a keys file of isorag (fix or remove it)") from None
        return entries

    def _write(self, entries: dict[str, dict[str, Any]]) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)  # whatever the umask
            os.write(fd, json.dumps({"format": _FORMAT, "keys": entries}, indent=1, sort_keys=True).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _current(self) -> dict[str, dict[str, Any]]:
        """The entries as the file has them now (read again only when the file changed)."""
        with self._mutex:
            stamp = self._stamp()
            if stamp != self._seen:
                self._entries = self._read() if stamp is not None else {}
                self._seen = stamp
            return self._entries

    # -- commands ---------------------------------------------------------------------------------------
    def create(self, kgs: Sequence[str], role: str, name: str = "") -> tuple[str, ApiKey]:
        """A new key for ``kgs`` (KG names, or ``*``) with ``role``: the key (shown once) and its entry."""
        _check_role(role)
        if not kgs:
            raise ConfigError("a key needs at least one KG (--kg NAME, or --kg '*' for every KG)")
        scoped = tuple(sorted({k if k == ALL_KGS else check_kg_name(k) for k in kgs}))
        if len(name) > 200 or any(ord(c) < 32 for c in name):
            raise ConfigError("a key's name is at most 200 printable characters")
        with self._locked():
            entries = self._read()
            kid = secrets.token_hex(4)
            while kid in entries:
                kid = secrets.token_hex(4)
            key = f"isorag_{kid}_{secrets.token_urlsafe(32)}"
            entry = {"sha256": _digest(key), "kgs": list(scoped), "role": role, "name": name,
                     "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "revoked": None}
            entries[kid] = entry
            self._write(entries)
        return key, _entry(kid, entry)

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke the key ``key_id`` (its entry stays, marked, so listings say when)."""
        with self._locked():
            entries = self._read()
            entry = entries.get(key_id)
            if entry is None:
                raise InputError(f"no key with id {key_id!r} in {self.path} (see isorag keys list)")
            if entry.get("revoked") is None:
                entry["revoked"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                self._write(entries)
        return _entry(key_id, entry)

    def list(self) -> list[ApiKey]:
        return [_entry(kid, e) for kid, e in sorted(self._current().items(), key=lambda kv: kv[1]["created"])]

    def check(self, key: str) -> ApiKey | None:
        """The entry of ``key`` if it is a key of this file and not revoked, else None (in constant time per
        key: the digest is compared with ``hmac.compare_digest``)."""
        if not isinstance(key, str):
            return None
        if self.env_key is not None and hmac.compare_digest(self.env_key[0], _digest(key.strip())):
            return self.env_key[1]
        m = _KEY.fullmatch(key.strip())
        if m is None:
            return None
        entry = self._current().get(m.group("id"))
        if entry is None or not hmac.compare_digest(entry["sha256"], _digest(key.strip())):
            return None
        found = _entry(m.group("id"), entry)
        return None if found.revoked is not None else found


def _entry(kid: str, e: dict[str, Any]) -> ApiKey:
    return ApiKey(kid, tuple(e["kgs"]), e["role"], e["created"], e.get("name") or "", e.get("revoked"))
