"""Helpers shared by the benchmarks: servers, results, memory."""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def start_servers() -> tuple[str, str]:
    """The local Neo4j and Milvus (or NEO4J_URI / MILVUS_URI), started if needed."""
    neo = os.environ.get("NEO4J_URI")
    mil = os.environ.get("MILVUS_URI")
    if not neo:
        from engine.servers.neo4j import ensure_local_neo4j

        neo = ensure_local_neo4j()
    if not mil:
        from engine.servers.milvus import ensure_local_milvus

        mil = ensure_local_milvus()
    return neo, mil


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def server_rss_mb() -> dict[str, float]:
    out: dict[str, float] = {}
    try:
        import psutil

        for p in psutil.process_iter(["name", "cmdline", "memory_info"]):
            cmd = " ".join(p.info.get("cmdline") or [])
            if "isorag" in cmd and "java" in (p.info.get("name") or ""):
                out["neo4j"] = p.info["memory_info"].rss / 2**20
            elif "milvus" in (p.info.get("name") or "") and "standalone" in cmd:
                out["milvus"] = p.info["memory_info"].rss / 2**20
    except Exception:  # noqa: BLE001 - memory of the servers is informative only
        pass
    return out


def emit(name: str, result: dict[str, Any]) -> None:
    """Write benchmarks/results/<name>.json and print the figures as one JSON line, last."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, separators=(",", ":")))


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    i = min(len(s) - 1, max(0, int(round(q / 100.0 * (len(s) - 1)))))
    return s[i]
