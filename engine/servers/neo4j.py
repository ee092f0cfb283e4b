"""The embedded local Neo4j server: Neo4j Community 5.26 from Maven Central, started as a detached process.

With no ``NEO4J_URI`` the engine uses this server. The launcher (``engine/servers/neo4j_launcher``: a pom and one Java
class) runs an embedded DBMS (``org.neo4j:neo4j`` + ``org.neo4j:neo4j-bolt``) with the Bolt connector on
127.0.0.1 only and authentication off. ``LocalNeo4j`` builds it with Maven (once; cached by a hash of the pom and
the Java source), spawns it in its own session so that it outlives the Python process, waits until Bolt answers,
reuses it when it is already running, and stops it with SIGTERM (the launcher's shutdown hook shuts the DBMS down
cleanly).

Layout of an instance's home (default ``$ISORAG_NEO4J_HOME``, else ``$ISORAG_HOME/neo4j``; ``ISORAG_HOME``
defaults to ``~/.isorag``)::

    data/                 Neo4j stores and transaction logs
    logs/console.log      the JVM's stdout + stderr (launcher lines and Neo4j's user log): read this first
    logs/isorag-neo4j.log the launcher's own lines (start, ready, shutdown)
    logs/debug.log        Neo4j's debug log
    run/neo4j.pid         pid of the JVM (written by this module)
    run/ready.json        written by the launcher once the default database is available, removed on shutdown
    neo4j.conf            optional extra Neo4j settings (the launcher's own settings override them)
    import/<kg>/          CSV files and state of an offline import (:mod:`loaders.offline`), removed when done

The build lives in ``$ISORAG_HOME/neo4j/build/<hash>/`` (shared by every instance): ``target/lib/*.jar`` (copied
from ``~/.m2``) and ``target/classes``.

Environment: ``ISORAG_HOME``, ``ISORAG_NEO4J_HOME``, ``ISORAG_NEO4J_PORT`` (default 7687), ``ISORAG_NEO4J_HEAP``
(default 2g), ``ISORAG_NEO4J_PAGECACHE`` (default 1g), ``JAVA_HOME`` (else ``java`` on PATH; Java 17+ required),
``MAVEN_HOME`` (else ``mvn`` on PATH).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from engine._config import isorag_home
from engine._errors import LocalServerError
from engine.servers._process import HOST, port_open, say, tail

__all__ = [
    "LocalNeo4j",
    "NEO4J_VERSION",
    "default_instance",
    "ensure_local_neo4j",
    "cli_start",
    "cli_stop",
    "cli_status",
]

SOURCE_DIR = Path(__file__).resolve().parent / "neo4j_launcher"
MAIN_CLASS = "isorag.Neo4jServer"
DEFAULT_PORT = 7687
#: the database a local instance serves (Community: one user database)
GRAPH_DATABASE = "neo4j"
_BUILD_FORMAT = "1"  # bump to force a rebuild when the build layout changes


def _pom_version() -> str:
    m = re.search(r"<neo4j\.version>([^<]+)</neo4j\.version>", (SOURCE_DIR / "pom.xml").read_text())
    return m.group(1).strip() if m else "5.26"


NEO4J_VERSION = _pom_version()

# JVM flags: those of Neo4j's own server scripts that matter for an embedded DBMS, minus -XX:+AlwaysPreTouch
# (it would make the whole heap resident at once on a shared development machine).
JVM_FLAGS = [
    "-XX:+UseG1GC",
    "-XX:-OmitStackTraceInFastThrow",
    "-XX:+DisableExplicitGC",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djdk.nio.maxCachedBufferSize=1024",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dlog4j2.disable.jmx=true",
    "-Dfile.encoding=UTF-8",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
]






def _mem_bytes(size: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)i?b?\s*", size.lower())
    if not m:
        raise LocalServerError(f"bad memory size {size!r} (use e.g. 512m, 2g)")
    return int(m.group(1)) * 1024 ** " kmgt".index(m.group(2) or " ")




@contextlib.contextmanager
def _locked(path: Path, what: str) -> Iterator[None]:
    """An exclusive flock on ``path``, across processes; says so on stderr when it has to wait."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for another process that holds the {what} lock ({path})")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)




def _port_owner(port: int) -> str:
    """Best effort: who listens on ``port`` (pid and command), for error messages."""
    try:
        import psutil

        for c in psutil.net_connections(kind="tcp"):
            if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
                try:
                    cl = psutil.Process(c.pid).cmdline()
                except psutil.Error:
                    cl = []
                if MAIN_CLASS in cl and "--home" in cl[:-1]:
                    return f"pid {c.pid}: the local Neo4j of {cl[cl.index('--home') + 1]}"
                return f"pid {c.pid}: {' '.join(cl)[:200] or '?'}"
    except Exception:  # noqa: BLE001 - diagnostics only
        pass
    return "unknown process"


def _cmdline(pid: int) -> list[str] | None:
    """The command line of a live (non-zombie) process, or None."""
    try:
        import psutil

        p = psutil.Process(pid)
        if p.status() == psutil.STATUS_ZOMBIE:
            return None
        return p.cmdline()
    except Exception:  # noqa: BLE001 - psutil.NoSuchProcess, AccessDenied, ...
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a] or None


def _bolt_query_ok(uri: str, timeout: float = 10.0) -> bool:
    """True if a trivial statement (``cypher/ping.cypher``) through the Python driver succeeds."""
    from neo4j import GraphDatabase

    from engine._cypher import cypher

    try:
        with GraphDatabase.driver(uri, auth=None, connection_timeout=timeout,
                                  connection_acquisition_timeout=timeout) as driver:
            records, _, _ = driver.execute_query(cypher("ping"))
            return bool(records) and records[0]["ok"] == 1
    except Exception:  # noqa: BLE001 - any driver error means "not (yet) answering"
        return False


# --------------------------------------------------------------------------------------------- java, maven
_java_cache: dict[str, tuple[str, int]] = {}


def find_java() -> tuple[str, int]:
    """(path of ``java``, major version); JAVA_HOME first, then PATH. Java 17 or newer is required."""
    jh = os.environ.get("JAVA_HOME")
    cand = str(Path(jh) / "bin" / "java") if jh and (Path(jh) / "bin" / "java").exists() else shutil.which("java")
    if not cand:
        raise LocalServerError("Java not found: the local Neo4j needs Java 17 (set JAVA_HOME or put java on PATH)")
    if cand in _java_cache:
        return _java_cache[cand]
    try:
        out = subprocess.run([cand, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise LocalServerError(f"cannot run {cand} -version: {e}") from e
    text = out.stderr + out.stdout
    m = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not m:
        raise LocalServerError(f"cannot tell the version of {cand}: {text.strip()[:300]}")
    major = int(m.group(1)) if m.group(1) != "1" else int(m.group(2) or 0)
    if major < 17:
        raise LocalServerError(f"{cand} is Java {major}; Neo4j {NEO4J_VERSION} needs Java 17 or 21 "
                               "(set JAVA_HOME to a Java 17 installation)")
    if major > 21:
        say(f"warning: {cand} is Java {major}; Neo4j {NEO4J_VERSION} is supported on Java 17 and 21")
    _java_cache[cand] = (cand, major)
    return cand, major


def find_mvn() -> str:
    for var in ("MAVEN_HOME", "M2_HOME"):
        home = os.environ.get(var)
        if home and (Path(home) / "bin" / "mvn").exists():
            return str(Path(home) / "bin" / "mvn")
    mvn = shutil.which("mvn")
    if not mvn:
        raise LocalServerError("Maven (mvn) not found: it builds the local Neo4j from Maven Central "
                               "(install Maven 3.6+ or set MAVEN_HOME)")
    return mvn


def source_hash() -> str:
    """Hash of what the build depends on: the pom, the Java sources, the build format."""
    h = hashlib.sha256(_BUILD_FORMAT.encode())
    files = [SOURCE_DIR / "pom.xml", *sorted((SOURCE_DIR / "src").rglob("*.java"))]
    for f in files:
        h.update(str(f.relative_to(SOURCE_DIR)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def build_root() -> Path:
    return isorag_home() / "neo4j" / "build"


# --------------------------------------------------------------------------------------------- the server
class LocalNeo4j:
    """One local Neo4j instance: a home directory and a Bolt port on 127.0.0.1."""

    def __init__(self, home: Path | None = None, port: int | None = None, heap: str = "2g",
                 pagecache: str = "1g", tx_timeout: str = "10m") -> None:
        self.home = Path(home).expanduser().resolve() if home else (isorag_home() / "neo4j").resolve()
        self.port = int(port if port is not None else os.environ.get("ISORAG_NEO4J_PORT") or DEFAULT_PORT)
        self.heap = heap
        self.pagecache = pagecache
        self.tx_timeout = tx_timeout
        _mem_bytes(heap), _mem_bytes(pagecache)  # validate early

    # paths
    @property
    def uri(self) -> str:
        return f"bolt://{HOST}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.home / "logs" / "console.log"

    @property
    def _pid_file(self) -> Path:
        return self.home / "run" / "neo4j.pid"

    @property
    def _ready_file(self) -> Path:
        return self.home / "run" / "ready.json"

    def __repr__(self) -> str:
        return f"LocalNeo4j(home={str(self.home)!r}, port={self.port})"

    # build
    def build(self) -> Path:
        """Resolve Neo4j's jars with Maven and compile the launcher; cached per source hash. Returns the build dir."""
        digest = source_hash()
        root = build_root()
        out = root / digest
        if (out / "BUILD_OK").exists():
            return out
        with _locked(root / "build.lock", "build"):
            if (out / "BUILD_OK").exists():
                return out
            java, _ = find_java()
            mvn = find_mvn()
            tmp = root / f"{digest}.tmp{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            shutil.copy2(SOURCE_DIR / "pom.xml", tmp / "pom.xml")
            shutil.copytree(SOURCE_DIR / "src", tmp / "src")
            cmd = [mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(tmp / "pom.xml"),
                   "dependency:copy-dependencies", "compile"]
            env = dict(os.environ, JAVA_HOME=str(Path(os.path.realpath(java)).parent.parent))
            say(f"building the local Neo4j {NEO4J_VERSION} launcher in {out}")
            say(f"  $ {' '.join(cmd)}")
            say("  (the first build downloads about 130 MB from Maven Central into ~/.m2: 1-2 minutes)")
            t0 = time.monotonic()
            try:
                res = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True,
                                     stdin=subprocess.DEVNULL, timeout=1800)
            except (OSError, subprocess.TimeoutExpired) as e:
                shutil.rmtree(tmp, ignore_errors=True)
                raise LocalServerError(f"Maven build of the local Neo4j failed: {e}") from e
            output = re.sub(r"\x1b\[[0-9;]*m", "", res.stdout + res.stderr).strip()
            if res.returncode != 0 or not (tmp / "target" / "classes" / "isorag" / "Neo4jServer.class").exists():
                shutil.rmtree(tmp, ignore_errors=True)
                tail = "\n".join(output.splitlines()[-40:])
                raise LocalServerError(f"Maven build of the local Neo4j failed (exit {res.returncode}):\n{tail}")
            if output:
                say(output)
            jars = len(list((tmp / "target" / "lib").glob("*.jar")))
            (tmp / "BUILD_OK").write_text(json.dumps({"neo4j": NEO4J_VERSION, "jars": jars,
                                                      "seconds": round(time.monotonic() - t0, 1)}) + "\n")
            shutil.rmtree(out, ignore_errors=True)
            os.replace(tmp, out)
            say(f"built in {time.monotonic() - t0:.1f} s ({jars} jars)")
            self._prune_builds(keep=out)
            return out

    @staticmethod
    def _prune_builds(keep: Path) -> None:
        """Remove other builds unless a running launcher uses them."""
        in_use = ""
        with contextlib.suppress(Exception):
            import psutil

            for p in psutil.process_iter(["cmdline"]):
                cl = p.info.get("cmdline") or []
                if MAIN_CLASS in cl:
                    in_use += " ".join(cl)
        for d in build_root().iterdir():
            if d.is_dir() and d != keep and str(d) not in in_use:
                shutil.rmtree(d, ignore_errors=True)

    def _command(self, build_dir: Path) -> list[str]:
        java, _ = find_java()
        heap = _mem_bytes(self.heap)
        xms = min(heap, 512 * 1024 ** 2)
        cp = f"{build_dir / 'target' / 'lib'}/*{os.pathsep}{build_dir / 'target' / 'classes'}"
        return [java, f"-Xmx{heap // 1024 ** 2}m", f"-Xms{xms // 1024 ** 2}m", *JVM_FLAGS,
                f"-XX:ErrorFile={self.home / 'logs' / 'hs_err_pid%p.log'}",
                "-cp", cp, MAIN_CLASS,
                "--home", str(self.home), "--port", str(self.port),
                "--pagecache", self.pagecache, "--tx-timeout", self.tx_timeout]

    # process state
    def _is_ours(self, pid: int) -> bool:
        cl = _cmdline(pid)
        if not cl or MAIN_CLASS not in cl:
            return False
        try:
            return Path(cl[cl.index("--home") + 1]).resolve() == self.home
        except (ValueError, IndexError):
            return False

    def _ready_info(self) -> dict[str, Any]:
        try:
            return json.loads(self._ready_file.read_text())
        except (OSError, ValueError):
            return {}

    def _find_pid(self) -> int | None:
        """The pid of this home's running launcher (from the pid file or the ready marker), or None."""
        cands = []
        with contextlib.suppress(OSError, ValueError):
            cands.append(int(self._pid_file.read_text().strip()))
        if (p := self._ready_info().get("pid")) is not None:
            cands.append(int(p))
        for pid in cands:
            if self._is_ours(pid):
                return pid
        return None

    def _clear_run_files(self) -> None:
        for f in (self._pid_file, self._ready_file):
            with contextlib.suppress(OSError):
                f.unlink()

    # lifecycle
    def start(self, timeout: float = 180) -> str:
        """Start the server (or reuse the running one) and wait until Bolt answers; returns the URI."""
        with _locked(self.home / "run" / "lock", "start/stop"):
            pid = self._find_pid()
            if pid is not None:
                ready_port = self._ready_info().get("port")
                running_port = ready_port or self._port_of(pid)
                if running_port is not None and int(running_port) != self.port:
                    raise LocalServerError(
                        f"the local Neo4j in {self.home} is already running on port {running_port} (pid {pid}), "
                        f"not {self.port}: stop it first or use port {running_port}")
                if port_open(self.port) and _bolt_query_ok(self.uri):
                    return self.uri
                say(f"local Neo4j (pid {pid}) is running but Bolt does not answer yet; waiting")
                self._wait(pid, timeout, log_offset=0)
                return self.uri

            self._clear_run_files()
            if port_open(self.port):
                raise LocalServerError(
                    f"port {self.port} on {HOST} is already in use by another process ({_port_owner(self.port)}): "
                    f"it is not the local Neo4j of {self.home}. Set ISORAG_NEO4J_PORT to a free port, "
                    "or NEO4J_URI to use that server")
            build_dir = self.build()
            self._prune_builds(keep=build_dir)
            for d in ("data", "logs", "run"):
                (self.home / d).mkdir(parents=True, exist_ok=True)
            self._rotate_log()
            offset = self.log_path.stat().st_size if self.log_path.exists() else 0
            cmd = self._command(build_dir)
            say(f"starting the local Neo4j {NEO4J_VERSION} at {self.uri} (home {self.home}, heap {self.heap}, "
                 f"page cache {self.pagecache}); log: {self.log_path}")
            t0 = time.monotonic()
            pid = self._spawn(cmd)
            self._pid_file.write_text(f"{pid}\n")
            self._wait(pid, timeout, log_offset=offset)
            say(f"local Neo4j is up at {self.uri} (pid {pid}) after {time.monotonic() - t0:.1f} s")
            return self.uri

    def _spawn(self, cmd: list[str]) -> int:
        """Run ``cmd`` detached: its own session, reparented to init (never our child, never our zombie)."""
        script = 'log=$1; shift; "$@" </dev/null >>"$log" 2>&1 & echo $!'
        try:
            res = subprocess.run(["/bin/sh", "-c", script, "sh", str(self.log_path), *cmd],
                                 capture_output=True, text=True, start_new_session=True, cwd=self.home,
                                 timeout=30)
            return int(res.stdout.strip())
        except (OSError, ValueError, subprocess.TimeoutExpired) as e:
            raise LocalServerError(f"cannot launch the local Neo4j ({cmd[0]}): {e}") from e

    def _wait(self, pid: int, timeout: float, log_offset: int) -> None:
        deadline = time.monotonic() + timeout
        while True:
            # right after the spawn the pid may still be the shell before its exec of java: "alive" = any live
            # process; it is checked to be our launcher once it is ready
            if _cmdline(pid) is None:
                self._clear_run_files()
                raise LocalServerError(
                    f"the local Neo4j (pid {pid}) exited while starting; last lines of {self.log_path}:\n"
                    f"{tail(self.log_path, 40, log_offset)}")
            info = self._ready_info()
            if info.get("pid") == pid and self._is_ours(pid) and port_open(self.port) and _bolt_query_ok(self.uri):
                return
            if time.monotonic() > deadline:
                raise LocalServerError(
                    f"the local Neo4j (pid {pid}) did not answer on {self.uri} within {timeout:.0f} s; it is still "
                    f"running (call start() again to keep waiting, or stop()); last lines of {self.log_path}:\n"
                    f"{tail(self.log_path, 40, log_offset)}")
            time.sleep(0.25)

    def _port_of(self, pid: int) -> int | None:
        cl = _cmdline(pid) or []
        with contextlib.suppress(ValueError, IndexError):
            return int(cl[cl.index("--port") + 1])
        return None

    def _rotate_log(self, max_bytes: int = 20 * 1024 ** 2) -> None:
        with contextlib.suppress(OSError):
            if self.log_path.stat().st_size > max_bytes:
                os.replace(self.log_path, self.log_path.with_suffix(".log.1"))

    def stop(self, timeout: float = 60) -> bool:
        """SIGTERM (clean shutdown), wait, SIGKILL as a last resort. True if it was running."""
        with _locked(self.home / "run" / "lock", "start/stop"):
            pid = self._find_pid()
            if pid is None:
                self._clear_run_files()
                return False
            say(f"stopping the local Neo4j (pid {pid}, {self.uri})")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while self._is_ours(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if self._is_ours(pid):
                say(f"the local Neo4j (pid {pid}) did not stop within {timeout:.0f} s: SIGKILL")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + 15
                while self._is_ours(pid) and time.monotonic() < deadline:
                    time.sleep(0.1)
                if self._is_ours(pid):
                    raise LocalServerError(f"cannot stop the local Neo4j (pid {pid})")
            self._clear_run_files()
            return True

    def is_running(self) -> bool:
        return self._find_pid() is not None

    def import_full(self, args: list[str], *, log_path: Path, echo: Callable[[str], None] | None = None,
                    heap: str = "2g", poll: Callable[[], None] | None = None) -> None:
        """Run ``neo4j-admin database import full <args>`` on this home's stores (the server must be stopped).

        The admin tool is Neo4j's own (``org.neo4j.cli.AdminTool``, already among the launcher's jars); it
        replaces the default database with the CSV files named in ``args``. Its output goes to ``log_path``
        and, line by line, to ``echo``. ``poll`` is called about once a second while it runs (it may raise to
        abort the import, which kills the tool). A failure raises :class:`LocalServerError` with the log's tail.
        """
        if self.is_running():
            raise LocalServerError(f"the local Neo4j of {self.home} is running: stop it before an offline import")
        build_dir = self.build()
        java, _ = find_java()
        conf_dir = self.home
        if not (self.home / "neo4j.conf").is_file():
            conf_dir = self.home / "run" / "admin-conf"
            conf_dir.mkdir(parents=True, exist_ok=True)
            (conf_dir / "neo4j.conf").touch()
        cmd = [java, f"-Xmx{_mem_bytes(heap) // 1024 ** 2}m", *JVM_FLAGS[:2], "-cp",
               f"{build_dir / 'target' / 'lib'}/*", "org.neo4j.cli.AdminTool", "database", "import", "full",
               GRAPH_DATABASE, *args]
        env = dict(os.environ, NEO4J_HOME=str(self.home), NEO4J_CONF=str(conf_dir))
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("w", encoding="utf-8") as log:
            log.write("$ " + " ".join(cmd) + "\n")
            log.flush()
            proc = subprocess.Popen(cmd, cwd=self.home, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, text=True, bufsize=1)
            assert proc.stdout is not None
            import threading

            def pump() -> None:
                for line in proc.stdout:  # type: ignore[union-attr]
                    log.write(line)
                    log.flush()
                    if echo is not None and line.strip() and not line.startswith((".", "-")):
                        echo(line.rstrip())

            t = threading.Thread(target=pump, name="isorag-neo4j-import", daemon=True)
            t.start()
            try:
                while proc.poll() is None:
                    if poll is not None:
                        poll()
                    time.sleep(1.0)
            except BaseException:
                proc.kill()
                proc.wait()
                raise
            finally:
                t.join(timeout=10)
        if proc.returncode != 0:
            raise LocalServerError(f"neo4j-admin database import failed (exit {proc.returncode}) in {self.home}; "
                                   f"last lines of {log_path}:\n{tail(log_path, 30)}")

    def status(self) -> dict[str, Any]:
        pid = self._find_pid()
        info = self._ready_info() if pid is not None else {}
        bolt_ok = pid is not None and port_open(self.port) and _bolt_query_ok(self.uri, timeout=5)
        return {
            "running": pid is not None,
            "pid": pid,
            "uri": self.uri,
            "home": str(self.home),
            "version": info.get("version", NEO4J_VERSION),
            "bolt_ok": bool(bolt_ok),
            "ready": bool(info),
            "log": str(self.log_path),
        }


# --------------------------------------------------------------------------------------------- defaults, CLI
def default_instance() -> LocalNeo4j:
    """The default instance: $ISORAG_NEO4J_HOME (else $ISORAG_HOME/neo4j), port $ISORAG_NEO4J_PORT (7687),
    heap/page cache from env."""
    return LocalNeo4j(home=Path(os.environ["ISORAG_NEO4J_HOME"]) if os.environ.get("ISORAG_NEO4J_HOME") else None,
                      heap=os.environ.get("ISORAG_NEO4J_HEAP") or "2g",
                      pagecache=os.environ.get("ISORAG_NEO4J_PAGECACHE") or "1g")


def ensure_local_neo4j() -> str:
    """Start (or reuse) the default local Neo4j; returns its Bolt URI."""
    return default_instance().start()


def cli_start() -> int:
    """``isorag neo4j start``: prints what it did; returns 0 (an error is raised)."""
    srv = default_instance()  # a LocalServerError goes up to the CLI's one-line error (status 2)
    was = srv._find_pid()
    t0 = time.monotonic()
    uri = srv.start()
    st = srv.status()
    how = "already running" if was is not None else f"started in {time.monotonic() - t0:.1f} s"
    print(f"Neo4j {st['version']} {how} at {uri} (pid {st['pid']})")
    print(f"home: {st['home']}")
    print(f"log:  {st['log']}")
    return 0


def cli_stop() -> int:
    """``isorag neo4j stop``: returns 0 (stopped or was not running; an error is raised)."""
    srv = default_instance()
    was_running = srv.stop()
    print(f"Neo4j at {srv.uri} stopped" if was_running else f"Neo4j at {srv.uri} was not running")
    return 0


def cli_status() -> int:
    """``isorag neo4j status``: returns 0 if running and Bolt answers, else 1."""
    st = default_instance().status()
    if st["running"]:
        print(f"Neo4j {st['version']} running at {st['uri']} (pid {st['pid']}), "
              f"Bolt {'answers' if st['bolt_ok'] else 'does NOT answer'}")
    else:
        print(f"Neo4j is not running (would listen on {st['uri']})")
    print(f"home: {st['home']}")
    print(f"log:  {st['log']}")
    return 0 if st["running"] and st["bolt_ok"] else 1
