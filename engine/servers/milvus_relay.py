"""Run the local Milvus in a network namespace of its own and relay its client port from the host's loopback.

Milvus 2.3.5 binds every gRPC and HTTP listener to all interfaces (``net.Listen(":port")``); its ``*.ip``
settings are advertised addresses only. Its internal components (root coord, query node, data node...) answer
without authentication, and the metrics port runs ``/expr`` (config reads and writes, keyed by the etcd root
path, ``by-dev`` by default): authentication on the proxy alone does not keep the data in. So the server runs in
a new network namespace whose only interface is ``lo``, and this process, started in the caller's namespace,

1. binds ``127.0.0.1:<port>`` in the caller's namespace,
2. enters a new network namespace (a new user namespace too where the caller lacks ``CAP_SYS_ADMIN``) and
   brings its ``lo`` up,
3. starts Milvus there as its child (killed with this process: ``PR_SET_PDEATHSIG``),
4. relays each connection to ``127.0.0.1:<port>`` inside the namespace, until Milvus exits; SIGTERM is passed on.

Standard library only, run as ``python -I milvus_relay.py PORT -- MILVUS ARGS...`` (``-I``: nothing from
the caller's environment or the engine package is imported). Exits with 3 when the namespace cannot be made.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import signal
import socket
import struct
import subprocess
import sys
import threading

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
EXIT_NO_NAMESPACE = 3
MARK = "isorag-relay:"


def _say(msg: str) -> None:
    print(f"{MARK} {msg}", file=sys.stderr, flush=True)


def _unshare_net(libc: ctypes.CDLL) -> str:
    """Enter a new network namespace; return how ("net" or "user+net")."""
    if libc.unshare(CLONE_NEWNET) == 0:
        return "net"
    err = ctypes.get_errno()
    if err != errno.EPERM:
        raise OSError(err, f"unshare(CLONE_NEWNET): {os.strerror(err)}")
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWUSER|CLONE_NEWNET): {os.strerror(err)}")
    # same uid and gid inside: files keep their owner; capabilities end at Milvus' exec
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")
    return "user+net"


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifr = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, SIOCGIFFLAGS, ifr))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(1 << 18)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _serve(client: socket.socket, port: int) -> None:
    try:
        upstream = socket.create_connection(("127.0.0.1", port), timeout=10)
    except OSError:
        client.close()
        return
    upstream.settimeout(None)
    for s in (client, upstream):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # gRPC's small frames: no Nagle delay
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _accept(listener: socket.socket, port: int) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError as e:
            if e.errno in (errno.EINTR, errno.ECONNABORTED):
                continue
            return
        threading.Thread(target=_serve, args=(client, port), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        _say("usage: python -I milvus_relay.py PORT -- MILVUS ARGS...")
        return 2
    port, command = int(argv[0]), argv[2:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("127.0.0.1", port))  # in the caller's namespace: the only port the host sees
        listener.listen(128)
    except OSError as e:
        _say(f"cannot listen on 127.0.0.1:{port}: {e.strerror}")
        return 1
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        how = _unshare_net(libc)  # before any thread: unshare(CLONE_NEWUSER) refuses threaded callers
        _loopback_up()
    except OSError as e:
        _say(f"cannot make a network namespace for the local Milvus ({e.strerror or e})")
        return EXIT_NO_NAMESPACE

    def die_with_parent() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    # the server lock (an inherited descriptor) goes on to Milvus; this process keeps its copy too, so the
    # lock is held while either lives
    fds = tuple(int(fd) for fd in os.environ.get("ISORAG_PASS_FDS", "").split(",") if fd)
    env = {k: v for k, v in os.environ.items() if k != "ISORAG_PASS_FDS"}
    env["LD_LIBRARY_PATH"] = env.pop("ISORAG_MILVUS_LIBS", "")
    child = subprocess.Popen(command, preexec_fn=die_with_parent, pass_fds=fds, stdin=subprocess.DEVNULL, env=env)
    _say(f"Milvus pid {child.pid} in its own network namespace ({how}); relaying 127.0.0.1:{port}")

    def stop(signum: int, _frame: object) -> None:
        try:
            child.send_signal(signal.SIGTERM)
        except OSError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    threading.Thread(target=_accept, args=(listener, port), daemon=True).start()
    code = child.wait()
    listener.close()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
