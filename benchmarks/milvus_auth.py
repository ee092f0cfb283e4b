"""What the local Milvus' protections cost a search: authentication, and the namespace relay.

Three private servers (own homes and ports under --dir, started and stopped here; the default server is not
touched), each with one collection of --rows random 384-d vectors (HNSW, L2):

    open        authentication off, no namespace (the local server before issue 13)
    auth        authentication on, no namespace (ISORAG_MILVUS_ISOLATION=none)
    auth+netns  authentication on, the server in its own network namespace behind the relay (the default)

--searches VectorStore.search calls (one vector, limit 16) per server, interleaved in rounds of 100 so that
the machine's drift falls on all three alike. Last line: one JSON object, per server p50/p95/mean in ms.

    python benchmarks/milvus_auth.py [--searches 1000] [--rows 1000]
    python benchmarks/milvus_auth.py --smoke    # 100 searches on 100 rows (the three servers still start)
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

import _common  # noqa: F401 - sys.path and the environment, on import
from _common import emit, parse_args, percentile

MODES = ("open", "auth", "auth+netns")


def _free_port(start: int) -> int:
    for port in range(start, start + 500):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise SystemExit(f"no free port from {start}")


def _start(mode: str, home: Path, port: int) -> Any:
    from engine.servers.milvus import LocalMilvus

    # open: the old setting, here only
    server = LocalMilvus(home=home, port=port, isolation="netns" if mode == "auth+netns" else "none",
                         authentication=mode != "open")
    server.start()
    return server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--searches", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--dir", default=None, help="where the servers' homes are made (default: a temporary folder)")
    args = parse_args(ap, {"searches": 100, "rows": 100})

    from engine.stores.vectors import VectorStore

    import tempfile

    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="isorag-bench-milvus-auth-"))
    shutil.rmtree(root, ignore_errors=True)
    rng = np.random.default_rng(0)
    data = rng.standard_normal((args.rows, 384)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    queries = data[rng.integers(0, args.rows, args.searches)]

    servers, stores = {}, {}
    port = 19760
    try:
        # one after the other: a server's internal ports are chosen free when it starts
        for mode in MODES:
            port = _free_port(port + 1)
            servers[mode] = _start(mode, root / mode.replace("+", "-"), port)
        for mode in MODES:
            vs = VectorStore(servers[mode].uri, kg="bench_auth", dim=384)
            vs.upsert("entities", range(args.rows), data)
            vs.finalize("entities")
            for q in queries[:50]:  # warm-up
                vs.search("entities", q, 16)
            stores[mode] = vs
        times: dict[str, list[float]] = {m: [] for m in MODES}
        for lo in range(0, args.searches, 100):
            for mode in MODES:
                vs = stores[mode]
                for q in queries[lo:lo + 100]:
                    t0 = time.perf_counter()
                    vs.search("entities", q, 16)
                    times[mode].append((time.perf_counter() - t0) * 1000)
        result = {
            "searches": args.searches, "rows": args.rows, "dim": 384, "limit": 16,
            **{mode: {"p50_ms": round(percentile(t, 50), 3), "p95_ms": round(percentile(t, 95), 3),
                      "mean_ms": round(statistics.fmean(t), 3)} for mode, t in times.items()},
        }
    finally:
        for vs in stores.values():
            try:
                vs.drop()
            finally:
                vs.close()
        for server in servers.values():
            server.stop()
        shutil.rmtree(root, ignore_errors=True)
    emit("milvus_auth", result)


if __name__ == "__main__":
    main()
