"""The embedded local Milvus: a real Milvus 2.3.5 standalone server from the ``milvus`` package.

The ``milvus`` PyPI package bundles the server binary (xz-compressed) and a config template.  Its own
``MilvusServer`` keeps the server as a child of the Python process and kills it when that object is
garbage collected (``__del__``) or the interpreter exits, so it is not used to run the server here.
Instead this module

* renders the package's config template (``MilvusServerConfig``) into ``<home>/configs/milvus.yaml``
  with a few overrides (``common.session.ttl`` low, loopback addresses, shorter graceful stop),
* unpacks the binary once into a shared cache (``$ISORAG_HOME/cache/milvus-2.3.5/bin``),
* launches it **detached**: through ``sh -c '... &'`` in a new session, so the server is re-parented
  away from the caller and outlives it; the caller only waits for it to answer a pymilvus client.

Security (docs/security.md). Milvus 2.3.5 cannot bind a listener to loopback: every port
(client gRPC, its internal components' gRPC, the metrics/``/healthz``/``/expr`` HTTP port) listens on all
interfaces whatever ``*.ip`` says, and the internal ports and ``/expr`` answer without authentication. So

* the server runs in a network namespace of its own (only ``lo``), and :mod:`engine.servers.milvus_relay` relays its
  client port from ``127.0.0.1:<port>``, the one port the host sees. Where no namespace can be made the start
  fails, unless ``ISORAG_MILVUS_ISOLATION=none`` accepts the exposed ports;
* authentication is on (``common.security.authorizationEnabled``) and the REST API off (pymilvus uses gRPC):
  at first start a random password for ``root`` is written to ``<home>/root-password`` (mode 0600), then
  root's default password (``Milvus``; 2.3.5 has no setting for the first one) is changed to it. The secret is
  written before the change, and a start that finds it not yet applied logs in with the default and changes
  it, so a crash in between is repaired; a data directory of an earlier isorag (no authentication) is
  upgraded the same way at its next start. :func:`local_token` gives the token to every engine connection
  to this server.

One server per data directory (``home``): the starting process takes an exclusive ``flock`` on
``<home>/server.lock`` and hands the locked descriptor to the server, which keeps it for its lifetime.
The lock is therefore held exactly as long as the server process lives (also after a crash or a
``kill -9`` of whoever started it), and a second ``start()`` on the same home reuses the server
instead of launching another one (a second server on the same data directory corrupts it).
``<home>/server.json`` records pid and ports.

Layout of ``home`` (default ``$ISORAG_HOME/milvus``, ``ISORAG_HOME`` default ``~/.isorag``)::

    configs/milvus.yaml  configs/glog.conf    rendered config
    data/                                     etcd, rocksmq and segment data
    logs/                                     milvus-stdout.log, milvus-stderr.log, etcd.log, ...
    server.lock  server.json
    root-password                             root's password (mode 0600): token ``root:<password>``

CLI: ``python -m engine.servers.milvus start|stop|status|set-password`` (``isorag milvus ...`` wires the same
functions; ``set-password`` is for a Milvus that isorag does not start, see :func:`cli_set_password`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import lzma
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

from engine._errors import ConfigError, LocalServerError, StoreError, StoreUnavailableError
from engine._config import isorag_home
from engine._secrets import mask_uri, register
from engine.servers._process import pid_alive, port_open, tail

VERSION = "2.3.5"
DEFAULT_PORT = 19530
SESSION_TTL = 10  # seconds; Milvus' 30 s default stalls the first search after a restart for 23-27 s
ROOT_USER = "root"
DEFAULT_ROOT_PASSWORD = "Milvus"  # what every new Milvus data directory starts with
SECRET_FILE = "root-password"
_RELAY = Path(__file__).resolve().parent / "milvus_relay.py"

# Overrides applied on top of the package's template (dotted keys of milvus.yaml).
_EXTRA_CONFIG: dict[str, Any] = {
    "common.session.ttl": SESSION_TTL,
    # Stopping a standalone server with a loaded collection always runs into this timeout (its
    # query node waits for a hand-off no other node can take); the data is safe either way.
    "common.gracefulStopTimeout": 5,
    # Let compaction merge segments that have no index yet: VectorStore.finalize compacts before
    # the first index build, so a bulk load's small segments are merged once and indexed once
    # (with Milvus' default, they are indexed, merged, then indexed again).
    "dataCoord.compaction.indexBasedCompaction": "false",
    "common.security.authorizationEnabled": "true",
    # the REST API shares the client port; pymilvus speaks gRPC only
    "proxy.http.enabled": "false",
    "rootCoord.ip": "127.0.0.1",
    "proxy.ip": "127.0.0.1",
    "queryCoord.ip": "127.0.0.1",
    "queryNode.ip": "127.0.0.1",
    "indexCoord.ip": "127.0.0.1",
    "indexNode.ip": "127.0.0.1",
    "dataCoord.ip": "127.0.0.1",
    "dataNode.ip": "127.0.0.1",
}


# Every listener of Milvus 2.3.5 standalone (the keys of server.json's "ports"), what it is, and where it
# listens. Only etcd takes an address; the others listen on all interfaces of the namespace the server runs
# in (net.Listen(":port")), and none but the proxy checks credentials. Hence the namespace: the host sees
# only the relay's 127.0.0.1:<proxy port>.
LISTENERS: dict[str, str] = {
    "proxy": "client gRPC (pymilvus), authenticated; its REST API is turned off",
    "proxy_internal": "proxy, internal gRPC",
    "root_coord": "root coordinator gRPC (collections, credentials), no authentication",
    "query_coord": "query coordinator gRPC, no authentication",
    "query_node": "query node gRPC (searches, queries), no authentication",
    "index_node": "index node gRPC, no authentication",
    "data_coord": "data coordinator gRPC (also the index coordinator in 2.3), no authentication",
    "data_node": "data node gRPC, no authentication",
    "metrics": "HTTP: /healthz, /metrics, /debug/pprof, /log/level and /expr (reads and writes settings, "
               "keyed by the etcd root path 'by-dev'), no authentication",
    "etcd": "embedded etcd, clients (127.0.0.1)",
    "etcd_peer": "embedded etcd, peers (127.0.0.1)",
}
_COMPONENTS = ("proxy_internal", "root_coord", "query_coord", "query_node", "index_node", "data_coord", "data_node")

# The only variables of the caller's environment the server process sees.
_PASS_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR")




def _isolation(given: str | None = None) -> str:
    raw = (given or os.environ.get("ISORAG_MILVUS_ISOLATION", "")).strip().lower() or "netns"
    if raw not in ("netns", "none"):
        raise LocalServerError(f"ISORAG_MILVUS_ISOLATION={raw!r} is not 'netns' (default) or 'none'")
    return raw


def _default_port() -> int:
    raw = os.environ.get("ISORAG_MILVUS_PORT", "").strip()
    if not raw:
        return DEFAULT_PORT
    try:
        port = int(raw)
    except ValueError:
        raise LocalServerError(f"ISORAG_MILVUS_PORT={raw!r} is not a port number") from None
    return port


# --------------------------------------------------------------------------- process helpers




def _is_milvus_process(pid: int) -> bool:
    """The server itself, or the relay that runs it in a namespace (its command line holds the server's)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return pid_alive(pid)  # no /proc: trust the pid
    return b"standalone" in cmd and any(a.endswith(b"milvus") for a in cmd)


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def _server_pid(pid: int) -> int:
    """The Milvus process of ``pid``: itself, or the relay's child."""
    try:
        first = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return pid
    if first.endswith(b"milvus"):
        return pid
    return next((c for c in _children(pid) if _is_milvus_process(c)), pid)


def _rss_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _port_free(port: int) -> bool:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        return True
    except OSError:
        return False
    finally:
        sock.close()






# --------------------------------------------------------------------------- secret + authentication


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (mode 0600) atomically and durably."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _read_secret(path: Path) -> str | None:
    try:
        if path.stat().st_mode & 0o077:
            os.chmod(path, 0o600)  # ours: never readable by others
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LocalServerError(f"cannot read the local Milvus secret {path}: {exc.strerror}") from None
    register(text)
    return text or None


def _auth_failed(exc: BaseException) -> bool:
    """True if ``exc`` (pymilvus or grpc) says the credentials were refused, not that the server is down."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        code = getattr(exc, "code", None)
        try:
            code = code() if callable(code) else code
        except Exception:  # noqa: BLE001 - a status code that cannot be read is no known code
            code = None
        if getattr(code, "name", None) == "UNAUTHENTICATED" or code == 1800:  # 1800: Milvus' auth error code
            return True
        text = f"{getattr(exc, 'message', '')} {exc}".lower()
        if "unauthenticated" in text or "auth check fail" in text or "missing authorization" in text:
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False


_QUIET = threading.local()


class _QuietProbes(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_QUIET, "on", False)


@contextlib.contextmanager
def _quiet_pymilvus() -> Iterator[None]:
    """pymilvus logs every refused or failed RPC as an ERROR: expected while probing, so not shown."""
    import pymilvus  # noqa: F401 - configures its loggers

    for handler in logging.getLogger("pymilvus").handlers:
        if not any(isinstance(f, _QuietProbes) for f in handler.filters):
            handler.addFilter(_QuietProbes())
    _QUIET.on = True
    try:
        yield
    finally:
        _QUIET.on = False


def _probe(uri: str, token: str, timeout: float = 3.0) -> str:
    """Connect with ``token`` and list collections: ``"ok"``, ``"refused"`` (credentials) or ``"down"``."""
    with _quiet_pymilvus():
        return _probe_once(uri, token, timeout)


def _probe_once(uri: str, token: str, timeout: float) -> str:
    from pymilvus import connections, utility

    alias = f"isorag-probe-{uuid.uuid4().hex[:12]}"
    try:
        connections.connect(alias=alias, uri=uri, token=token, timeout=timeout)
        utility.list_collections(timeout=max(1, int(timeout)), using=alias)
        return "ok"
    except Exception as exc:  # noqa: BLE001 - any other failure means "not ready yet"
        return "refused" if _auth_failed(exc) else "down"
    finally:
        try:
            connections.remove_connection(alias)
        except Exception:  # noqa: BLE001 - closing: a connection already gone is fine
            pass


def set_root_password(uri: str, password: str, old_password: str = DEFAULT_ROOT_PASSWORD,
                      timeout: float = 10.0) -> bool:
    """Make ``password`` root's password on the Milvus at ``uri``; True if changed, False if already set.

    Idempotent: logs in with ``password`` first, then with ``old_password`` (Milvus' default) and changes it.
    Raises StoreError when neither is accepted, StoreUnavailableError when the server does not answer or the
    change fails (worth a retry: after a restart, Milvus fails it until the previous run's session expires),
    ConfigError for a password Milvus would refuse."""
    from pymilvus import connections, utility

    if not 6 <= len(password) <= 256:
        raise ConfigError("a Milvus password is 6 to 256 characters long")
    register(password)
    state = _probe(uri, f"{ROOT_USER}:{password}", timeout)
    if state == "ok":
        return False
    if state == "down":
        raise StoreUnavailableError("Milvus", uri, "no answer")
    alias = f"isorag-auth-{uuid.uuid4().hex[:12]}"
    try:
        with _quiet_pymilvus():
            connections.connect(alias=alias, uri=uri, token=f"{ROOT_USER}:{old_password}", timeout=timeout)
            utility.reset_password(ROOT_USER, old_password, password, using=alias, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - pymilvus raises several types
        if _auth_failed(exc):
            raise StoreError(
                f"the Milvus at {uri} accepts neither the new password nor the old one for {ROOT_USER!r}"
            ) from None
        reason = (str(getattr(exc, "message", None) or exc).strip().splitlines() or [type(exc).__name__])[0]
        raise StoreUnavailableError("Milvus", uri, f"changing {ROOT_USER}'s password failed: {reason[:200]}") from None
    finally:
        try:
            connections.remove_connection(alias)
        except Exception:  # noqa: BLE001 - closing: a connection already gone is fine
            pass
    return True


_TOKENS: dict[int, str] = {}  # port -> token of the local servers this process started or reused


def local_token(uri: str | None) -> str:
    """The token of the local server at ``uri`` (None: the default one), else ``""``.

    ``uri`` is this machine's local server when its host is a loopback address and its port that of the
    running default server (``ISORAG_HOME``, ``ISORAG_MILVUS_PORT``) or of a server this process started or
    reused. Reads only."""
    if uri is None:
        port: int | None = LocalMilvus().port
    else:
        try:
            parts = urlsplit(uri if "://" in uri else f"tcp://{uri}")
            host, port = parts.hostname, parts.port
        except ValueError:
            return ""
        if host not in ("127.0.0.1", "localhost", "::1") or port is None:
            return ""
    if port in _TOKENS:
        return _TOKENS[port]
    server = LocalMilvus()
    if port != server._read_state().get("port", server.port) or server._running_pid() is None:
        return ""  # not this server: its secret goes to no other program listening there
    secret = _read_secret(server.secret_path)
    return f"{ROOT_USER}:{secret}" if secret else ""


# --------------------------------------------------------------------------- binary + config


def _package_bin_dir() -> Path:
    try:
        import milvus  # type: ignore[import-untyped]
    except ImportError as exc:  # pragma: no cover - dependency of the project
        raise LocalServerError(
            "the embedded Milvus needs the 'milvus' package (pip install milvus==2.3.5)"
        ) from exc
    return Path(milvus.__file__).resolve().parent / "data" / "bin"


def _binary_dir() -> Path:
    """Unpack the bundled server once into a cache shared by every home; return its directory.

    Files are decompressed to a temporary name and renamed into place, so a server that is
    running from the cache is never overwritten in place (no ETXTBSY, no torn binary).
    """
    src = _package_bin_dir()
    dest = isorag_home() / "cache" / f"milvus-{VERSION}" / "bin"
    dest.mkdir(parents=True, exist_ok=True)
    sources = sorted(src.glob("*.lzma"))
    stamp = json.dumps({p.name: p.stat().st_size for p in sources}, sort_keys=True)
    stamp_file = dest / ".unpacked"
    if stamp_file.exists() and stamp_file.read_text() == stamp and (dest / "milvus").exists():
        return dest
    with open(dest / ".unpack.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp_file.exists() and stamp_file.read_text() == stamp and (dest / "milvus").exists():
            return dest
        for path in sources:
            target = dest / path.name[: -len(".lzma")]
            tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            with lzma.open(path, "rb") as fin, open(tmp, "wb") as fout:
                while chunk := fin.read(1 << 20):
                    fout.write(chunk)
            os.chmod(tmp, 0o755)
            os.replace(tmp, target)
        stamp_file.write_text(stamp)
    return dest


def _render_config(home: Path, port: int, overrides: dict[str, Any] | None = None) -> dict[str, int]:
    """Write ``home/configs/milvus.yaml`` (from the package's template) and ``embed-etcd.yaml``.

    Returns the ports chosen: ``proxy`` (= ``port``), ``metrics`` (HTTP /healthz), ``etcd``
    (embedded etcd, client) and ``etcd_peer``.  Internal ports start at Milvus' defaults and move
    up when taken, so a second server (another home) can run next to the default one.
    """
    try:
        from milvus import MilvusServerConfig
    except ImportError as exc:  # pragma: no cover
        raise LocalServerError(
            "the embedded Milvus needs the 'milvus' package (pip install milvus==2.3.5)"
        ) from exc

    class _Config(MilvusServerConfig):  # type: ignore[misc]  # the milvus package ships no type information
        # The package binds without SO_REUSEADDR, which fails for a while after a restart
        # (TIME_WAIT); the server itself listens with SO_REUSEADDR.
        def try_bind_port(self, p: int) -> socket.socket | None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", p))
                sock.listen()
                return sock
            except OSError:
                sock.close()
                return None

    cfg = _Config(data_dir=str(home), proxy_port=port)
    for key, value in {**_EXTRA_CONFIG, **(overrides or {})}.items():
        cfg.set(key, value)
    cfg.set("log.level", os.environ.get("ISORAG_MILVUS_LOG_LEVEL", "warn"))
    try:
        cfg.resolve()
    except RuntimeError as exc:
        raise LocalServerError(f"cannot configure the local Milvus in {home}: {exc}") from exc
    used = {int(cfg.get(k)) for k in cfg.config_key_maps.values() if k.endswith("_port")}

    def free_from(start: int) -> int:
        for p in range(start, start + 2000):
            if p not in used and _port_free(p):
                used.add(p)
                return p
        raise LocalServerError(f"no free port from {start} up for the local Milvus")

    ports = {
        "proxy": port,
        "etcd": int(cfg.get("etcd_port")),
        "etcd_peer": free_from(2380),
        "metrics": free_from(9091),
        **{name: int(cfg.get(f"{name}_port")) for name in _COMPONENTS},
    }
    # Embedded etcd listens on 2379/2380 unless told otherwise (the template only sets the client
    # side).  Advertised peer URL and initial cluster stay etcd's defaults, so the membership
    # stored in an existing data directory always matches, whatever ports are free this time.
    etcd_conf = home / "configs" / "embed-etcd.yaml"
    etcd_conf.write_text(
        f"listen-client-urls: http://localhost:{ports['etcd']}\n"
        f"advertise-client-urls: http://localhost:{ports['etcd']}\n"
        f"listen-peer-urls: http://localhost:{ports['etcd_peer']}\n"
        "auto-compaction-mode: revision\n"
        "auto-compaction-retention: '1000'\n"
        "quota-backend-bytes: 4294967296\n"
    )
    return ports


def _alias(home: Path) -> str:
    """Per-home alias: Milvus locks /run/milvus/standalone[-alias].pid, one per alias."""
    return "isorag" + hashlib.sha1(str(home).encode()).hexdigest()[:10]


# --------------------------------------------------------------------------- the server


class LocalMilvus:
    """A Milvus standalone server in a data directory, started detached and reused.

    ``isolation``: ``"netns"`` or ``"none"`` (default: ``ISORAG_MILVUS_ISOLATION``, else ``"netns"``).
    ``authentication=False`` starts it without authentication: only to measure what authentication costs (a
    private server of ``benchmarks/milvus_auth.py``); such a server serves any client that reaches its port."""

    def __init__(self, home: Path | None = None, port: int | None = None, *, isolation: str | None = None,
                 authentication: bool = True) -> None:
        self.home = Path(home).expanduser().resolve() if home else (isorag_home() / "milvus").resolve()
        self.port = int(port) if port else _default_port()
        self.isolation = isolation
        self.authentication = authentication
        self._not_ready = ""  # why the last readiness check failed, where known
        if not 0 < self.port < 65536:
            raise LocalServerError(f"invalid port {self.port}")

    # paths ------------------------------------------------------------------
    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def alias(self) -> str:
        """The server's alias, made from its home: the server's command line (and its relay's) carries it."""
        return _alias(self.home)

    @property
    def _lock_path(self) -> Path:
        return self.home / "server.lock"

    @property
    def _state_path(self) -> Path:
        return self.home / "server.json"

    @property
    def _logs(self) -> Path:
        return self.home / "logs"

    @property
    def secret_path(self) -> Path:
        """root's password (mode 0600), made at first start; the token is ``root:<password>``."""
        return self.home / SECRET_FILE

    @property
    def token(self) -> str:
        """``root:<password>`` for clients of this server, ``""`` before its first start."""
        secret = _read_secret(self.secret_path)
        return f"{ROOT_USER}:{secret}" if secret else ""

    def _ensure_secret(self) -> str:
        """root's password: the one in ``secret_path``, else a new one written there first (mode 0600)."""
        secret = _read_secret(self.secret_path)
        if secret is None:
            secret = secrets.token_urlsafe(32)
            register(secret)
            _write_private(self.secret_path, secret + "\n")
        return secret

    def _read_state(self) -> dict[str, Any]:
        try:
            return json.loads(self._state_path.read_text())
        except (OSError, ValueError):
            return {}

    def _lock_held(self) -> bool:
        """True if some process (the server, or a process starting it) holds the home's lock."""
        if not self._lock_path.exists():
            return False
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)

    def _running_pid(self) -> int | None:
        """Pid of the live server of this home, else None."""
        state = self._read_state()
        pid = state.get("pid")
        if pid and pid_alive(pid) and _is_milvus_process(pid) and self._lock_held():
            return int(pid)
        return None

    def logtail(self, lines: int = 30) -> str:
        parts = []
        files = [self._logs / "milvus-stderr.log", self._logs / "milvus-stdout.log"]
        # Milvus' own log (log.level, warn by default): standalone-<n>.log, the newest one
        own = sorted(self._logs.glob("standalone*.log"), key=lambda p: p.stat().st_mtime)
        files += own[-1:]
        for path in files:
            if not path.is_file() or path.stat().st_size == 0:
                continue
            text = tail(path, lines)
            if text.strip():
                parts.append(f"--- {path} (last lines)\n{text}")
        return "\n".join(parts) or f"(no log output in {self._logs})"

    # readiness -------------------------------------------------------------
    def _client_ok(self, port: int, timeout: float = 3.0) -> bool:
        """True if a pymilvus client with this server's token can connect to ``port`` and list collections."""
        if not port_open(port, timeout=min(timeout, 0.5)):
            return False
        return _probe(f"http://127.0.0.1:{port}", self.token, timeout) == "ok"

    def _ready_with_secret(self, port: int) -> bool:
        """True once the server answers with root's secret; applies the secret where it is not yet."""
        if not port_open(port, timeout=0.5):
            return False
        uri = f"http://127.0.0.1:{port}"
        if not self._read_state().get("auth"):
            # started by an earlier isorag, without authentication until its next start: nothing to apply
            token = self.token
            if _probe(uri, token) != "ok":
                return False
            _TOKENS[port] = token
            return True
        secret = self._ensure_secret()
        state = _probe(uri, f"{ROOT_USER}:{secret}")
        if state == "refused":
            # first start, a crash before the change, or a data directory of an earlier isorag
            try:
                set_root_password(uri, secret)
            except StoreUnavailableError as exc:
                self._not_ready = exc.reason
                return False
            except StoreError:
                raise LocalServerError(
                    f"the local Milvus of {self.home} accepts neither root's password in {self.secret_path} "
                    "nor the default one: put the right password back in that file"
                ) from None
            state = _probe(uri, f"{ROOT_USER}:{secret}")
        if state == "ok":
            _TOKENS[port] = f"{ROOT_USER}:{secret}"
        return state == "ok"

    def _healthz(self, metrics_port: int | None) -> bool:
        if not metrics_port:
            return True
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/healthz", timeout=1) as resp:
                return b"OK" in resp.read()
        except Exception:  # noqa: BLE001 - any failure of the health check means not healthy (yet)
            return False

    def _wait_ready(self, pid: int, port: int, metrics_port: int | None, deadline: float) -> None:
        self._not_ready = ""
        while True:
            if not pid_alive(pid):
                relay = [ln for ln in tail(self._logs / "milvus-stderr.log").splitlines()
                         if ln.startswith("isorag-relay: cannot")]
                if relay:
                    raise LocalServerError(
                        f"the local Milvus (home {self.home}) did not start: {relay[-1][len('isorag-relay: '):]}; "
                        "without a namespace its ports would be open to the network: allow network namespaces "
                        "(root, or unprivileged user namespaces), use another Milvus (MILVUS_URI), or set "
                        "ISORAG_MILVUS_ISOLATION=none to accept the exposure (authentication stays on)"
                    )
                raise LocalServerError(
                    f"the local Milvus (pid {pid}, home {self.home}) exited during start-up\n"
                    + self.logtail()
                )
            if self._healthz(metrics_port) and self._ready_with_secret(port):
                return
            if time.monotonic() > deadline:
                why = f" ({self._not_ready})" if self._not_ready else ""
                raise LocalServerError(
                    f"the local Milvus (pid {pid}, home {self.home}) did not become ready on "
                    f"127.0.0.1:{port} in time{why}\n" + self.logtail()
                )
            time.sleep(0.25)

    def _warm(self, port: int, deadline: float) -> None:
        """After a restart, wait until the collections that were loaded answer queries.

        The previous run's sessions stay in etcd for ``common.session.ttl`` seconds after a
        restart and requests stall until they expire; absorbing that here keeps it out of the
        first search (and its per-query deadline).  Best effort: errors are left to the caller.
        """
        from pymilvus import Collection, connections, utility

        alias = f"isorag-warm-{uuid.uuid4().hex[:12]}"
        try:
            connections.connect(alias=alias, uri=f"http://127.0.0.1:{port}", token=self.token, timeout=5)
            for name in utility.list_collections(timeout=10, using=alias):
                left = int(deadline - time.monotonic())
                if left < 1:
                    return
                state = getattr(
                    utility.load_state(name, using=alias, timeout=10), "name", ""
                )
                if state == "Loading":  # being recovered after the restart
                    utility.wait_for_loading_complete(name, timeout=left, using=alias)
                elif state != "Loaded":
                    continue
                col = Collection(name, using=alias)
                col.query(expr="", output_fields=["count(*)"], timeout=left)
                # and one search per vector index: the search path has its own stall
                for idx in col.indexes:
                    field = next((f for f in col.schema.fields if f.name == idx.field_name), None)
                    dim = (field.params or {}).get("dim") if field is not None else None
                    if field is None or not dim or field.dtype.name != "FLOAT_VECTOR":
                        continue
                    left = max(1, int(deadline - time.monotonic()))
                    col.search(
                        [[0.0] * int(dim)], idx.field_name,
                        {"metric_type": idx.params.get("metric_type", "L2"), "params": {}},
                        limit=1, timeout=left,
                    )
        except Exception:  # noqa: BLE001 - warming is an optimisation only
            pass
        finally:
            try:
                connections.remove_connection(alias)
            except Exception:  # noqa: BLE001 - closing: a connection already gone is fine
                pass

    # start -----------------------------------------------------------------
    def start(self, timeout: float = 120) -> str:
        """Start the server (or reuse the one already running on this home); return its URI.

        Returns once a pymilvus client can list collections.  Raises LocalServerError with
        the tail of the server's log when it cannot be started.
        """
        deadline = time.monotonic() + timeout
        self.home.mkdir(parents=True, exist_ok=True)
        while True:
            pid = self._running_pid()
            if pid is not None:
                state = self._read_state()
                port = int(state.get("port", self.port))
                if port != self.port:
                    raise LocalServerError(
                        f"the local Milvus of {self.home} is already running on port {port}, "
                        f"not {self.port} (stop it first: isorag milvus stop)"
                    )
                self._wait_ready(pid, port, None if state.get("isolation") == "netns"
                                 else state.get("metrics_port"), deadline)
                return self.uri
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                # another process is starting it (or its state file is not written yet)
                os.close(fd)
                if time.monotonic() > deadline:
                    raise LocalServerError(
                        f"timed out waiting for another process to start the local Milvus of {self.home}"
                    ) from None
                time.sleep(0.2)
                continue
            metrics_port: int | None
            try:
                pid, metrics_port = self._launch(fd)
            finally:
                os.close(fd)  # the server keeps its own copy of the locked descriptor
            if self._read_state().get("isolation") == "netns":
                metrics_port = None  # inside the namespace: readiness is the client's answer
            try:
                self._wait_ready(pid, self.port, metrics_port, deadline)
            except LocalServerError:
                self._kill(pid, 10)
                raise
            self._warm(self.port, deadline)
            return self.uri

    def _launch(self, lock_fd: int) -> tuple[int, int]:
        isolation = _isolation(self.isolation)
        if not _port_free(self.port):
            raise LocalServerError(
                f"port {self.port} on 127.0.0.1 is in use by another program "
                f"(another Milvus? set ISORAG_MILVUS_PORT or stop it)"
            )
        bin_dir = _binary_dir()
        auth = self.authentication
        ports = _render_config(self.home, self.port,
                               None if auth else {"common.security.authorizationEnabled": "false"})
        if auth:
            self._ensure_secret()
        self._logs.mkdir(parents=True, exist_ok=True)
        for name in ("milvus-stdout.log", "milvus-stderr.log"):
            log = self._logs / name
            if log.exists() and log.stat().st_size:
                os.replace(log, log.with_suffix(".log.1"))
        # Milvus reads any environment variable as a config override (PROXY_PORT -> proxy.port...),
        # so the server gets a small, explicit environment rather than the caller's.
        env = {k: v for k, v in os.environ.items() if k in _PASS_ENV}
        env.update(
            DEPLOY_MODE="STANDALONE",
            METRICS_PORT=str(ports["metrics"]),
            MILVUSCONF=str(self.home / "configs"),
            ETCD_CONFIG_PATH=str(self.home / "configs" / "embed-etcd.yaml"),
        )
        command = [str(bin_dir / "milvus"), "run", "standalone", "-alias", _alias(self.home)]
        if isolation == "netns":
            command = [sys.executable, "-I", str(_RELAY), str(self.port), "--", *command]
            # the relay hands both on to Milvus only (its bundled libraries are not Python's)
            env.update(ISORAG_MILVUS_LIBS=str(bin_dir), ISORAG_PASS_FDS=str(lock_fd))
        else:
            env.update(LD_LIBRARY_PATH=str(bin_dir))
        # sh backgrounds the server and exits at once: the server is re-parented (never our child,
        # so never our zombie), runs in its own session, and inherits the locked descriptor.
        script = 'out=$1 err=$2; shift 2; "$@" </dev/null >"$out" 2>"$err" & echo $!'
        try:
            out = subprocess.run(
                [
                    "/bin/sh", "-c", script, "sh",
                    str(self._logs / "milvus-stdout.log"),
                    str(self._logs / "milvus-stderr.log"),
                    *command,
                ],
                cwd=self.home, env=env, pass_fds=(lock_fd,), start_new_session=True,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30, check=True, text=True,
            )
            pid = int(out.stdout.strip().splitlines()[-1])
        except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
            raise LocalServerError(f"could not launch the local Milvus from {bin_dir}: {exc}") from exc
        state = {
            "pid": pid, "port": self.port, "metrics_port": ports["metrics"], "ports": ports,
            "home": str(self.home), "version": VERSION, "binary": str(bin_dir / "milvus"),
            "started_at": time.time(), "auth": auth, "isolation": isolation,
        }
        tmp = self._state_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(state, indent=2))
        os.replace(tmp, self._state_path)
        return pid, ports["metrics"]

    # stop ------------------------------------------------------------------
    def _kill(self, pid: int, timeout: float) -> bool:
        """SIGTERM, then SIGKILL after ``timeout``; True once the process is gone."""
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return True
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not pid_alive(pid):
                return True
            time.sleep(0.1)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return True
        end = time.monotonic() + 10
        while time.monotonic() < end:
            if not pid_alive(pid):
                return True
            time.sleep(0.1)
        return False

    def stop(self, timeout: float = 60) -> bool:
        """Stop the server of this home; True if one was running, False if none was."""
        pid = self._running_pid()
        if pid is None:
            return False
        server_pid = _server_pid(pid)
        # SIGTERM (the relay passes it on); Milvus force-quits after common.gracefulStopTimeout (5 s here), so a server
        # still there after 20 s is stuck (seen in cgo calls) and gets SIGKILL: its data is
        # in the WAL (rocksmq) and storage either way.
        if not self._kill(pid, min(timeout, 20)):
            raise LocalServerError(f"the local Milvus (pid {pid}, home {self.home}) does not stop")
        # the lock goes with the process; wait for the kernel to release it
        end = time.monotonic() + 5
        while self._lock_held() and time.monotonic() < end:
            time.sleep(0.05)
        # files Milvus leaves outside the home (its pid-file lock dies with the process)
        for leftover in (
            Path("/run/milvus") / f"standalone-{_alias(self.home)}.pid",
            Path("/tmp/milvus") / f"standalone-{_alias(self.home)}.pid",
            Path("/tmp/milvus") / f"server_id_{server_pid}",
        ):
            try:
                leftover.unlink()
            except OSError:
                pass
        return True

    # status ----------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        pid = self._running_pid()
        state = self._read_state() if pid else {}
        port = int(state.get("port", self.port)) if pid else self.port
        ok = bool(pid) and self._client_ok(port, timeout=2.0)
        info: dict[str, Any] = {
            "running": pid is not None,
            "pid": pid,
            "uri": f"http://127.0.0.1:{port}",
            "home": str(self.home),
            "version": VERSION,
            "ok": ok,
        }
        if pid:
            info["server_pid"] = _server_pid(pid)
            info["rss_bytes"] = _rss_bytes(info["server_pid"])
            info["started_at"] = state.get("started_at")
            # a server started by an earlier isorag runs without both until its next start
            info["auth"] = bool(state.get("auth"))
            info["isolation"] = state.get("isolation", "none")
        info["secret"] = str(self.secret_path) if self.secret_path.exists() else None
        return info


def ensure_local_milvus() -> str:
    """Start (or reuse) the default local Milvus; return its URI."""
    return LocalMilvus().start()


# --------------------------------------------------------------------------- CLI


def cli_start() -> int:
    """``isorag milvus start``: prints what it did; returns 0 (an error is raised)."""
    server = LocalMilvus()
    was_running = server._running_pid() is not None
    t0 = time.monotonic()
    uri = server.start()
    st = server.status()
    verb = "already running" if was_running else f"started in {time.monotonic() - t0:.1f} s"
    print(f"Milvus {VERSION} {verb} at {uri} (pid {st['pid']})")
    print(f"home: {server.home}")
    return 0


def cli_stop() -> int:
    """``isorag milvus stop``: returns 0 (stopped or was not running; an error is raised)."""
    server = LocalMilvus()
    pid = server._running_pid()
    if server.stop():
        print(f"Milvus (pid {pid}) stopped; home: {server.home}")
    else:
        print(f"Milvus is not running; home: {server.home}")
    return 0


def cli_status() -> int:
    """``isorag milvus status``: returns 0 if running and answering, else 1 (as ``isorag neo4j status``)."""
    st = LocalMilvus().status()
    if st["running"]:
        rss = st.get("rss_bytes")
        mem = f", RSS {rss / 2**20:.0f} MiB" if rss else ""
        health = "ok" if st["ok"] else "NOT answering"
        print(f"Milvus {st['version']} running at {st['uri']} (pid {st['pid']}{mem}): {health}")
        if st["auth"]:
            print(f"authentication: on (root's password in {st['secret']}, mode 0600)")
        else:
            print("authentication: OFF (started by an earlier isorag; it is turned on at the next start: "
                  "isorag milvus stop, then isorag milvus start)")
        if st["isolation"] == "netns":
            print(f"network: only {st['uri']} (the server runs in a network namespace of its own)")
        else:
            print("network: EVERY port of the server on all interfaces (no network namespace)")
    else:
        print(f"Milvus is not running (would listen at {st['uri']})")
    print(f"home: {st['home']}")
    return 0 if st["running"] and st["ok"] else 1


def cli_set_password(wait: float = 120) -> int:
    """``isorag milvus set-password``: make ``$MILVUS_ROOT_PASSWORD`` root's password on ``$MILVUS_URI``.

    For a Milvus that isorag does not start (docker/compose.yml runs it once, before the engine): changes
    the default password, and does nothing when the password is already set. The password comes from the
    environment only (a command line is visible to every user of the machine). Waits up to ``wait``
    seconds for the server to answer."""
    uri = os.environ.get("MILVUS_URI", "").strip()
    password = os.environ.get("MILVUS_ROOT_PASSWORD", "")
    if not uri:
        raise ConfigError(
            "set MILVUS_URI to the Milvus whose root password to set (the local server's is isorag's own, "
            f"in {LocalMilvus().secret_path})"
        )
    if not password:
        raise ConfigError("set MILVUS_ROOT_PASSWORD to the password to give root (not on the command line)")
    deadline = time.monotonic() + wait
    while True:
        try:
            changed = set_root_password(uri, password)
            break
        except StoreUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(2)
    verb = "set" if changed else "was already set"
    print(f"root's password on {mask_uri(uri)} {verb}; clients use MILVUS_TOKEN=root:<that password>")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    commands = {"start": cli_start, "stop": cli_stop, "status": cli_status, "set-password": cli_set_password}
    if len(args) != 1 or args[0] not in commands:
        print("usage: python -m engine.servers.milvus start|stop|status|set-password", file=sys.stderr)
        return 2
    try:
        return commands[args[0]]()
    except (ConfigError, StoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
