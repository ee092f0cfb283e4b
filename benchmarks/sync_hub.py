"""Sync of a KG with one very large hub entity: memory stays bounded.

    python benchmarks/sync_hub.py [--hub 1000000] [--keep]
    python benchmarks/sync_hub.py --smoke       # a hub of 5,000 triples, partitions of 500: under a minute

A sync cuts the entity id space into partitions by the triples' heads, so one entity with a million triples puts
all of them in one partition. Such a partition is compared in parts cut by the tails' ids (engine/changes/sync.py).
This script loads a KG of one hub (``--hub`` triples ``hub -links-> leaf i``) and a few hundred other triples into
Neo4j alone (no vectors: a dry run needs none), then runs ``isorag sync --dry-run`` of a file that drops 1% of the
hub's triples and adds 1% new ones, twice, in a child process each (its peak RSS is the client's memory):

* ``parts``: as the engine does it;
* ``whole``: with the hub's partition compared whole (``HUB_FACTOR`` set beyond the hub: what a sync did before).

Per run: ``diff_s``, ``peak_triples`` (the most triples of one side held at once), the child's peak RSS and the
counts found (both must find the same). The last line is one JSON object (also benchmarks/results/sync_hub.json).
The KG is dropped at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common  # noqa: F401 - sys.path and the environment, on import
from _common import ROOT, emit, parse_args, start_servers

#: the child: a dry-run sync of the file, with HUB_FACTOR as given, printing its report and its peak RSS
_CHILD = """
import json, sys
from engine import Engine
from engine._config import EngineConfig
from engine.changes import sync
kg, path, factor, per = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sync.HUB_FACTOR = factor
with Engine(EngineConfig.from_env().with_(kg=kg), llm=False) as eng:
    rep = sync.sync_file(eng.graph, None, None, path, dry_run=True, progress=False, partition_triples=per)
rss = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
print(json.dumps({**rep.to_dict(), "peak_rss_mb": round(rss / 1024, 1)}))
"""


def load_graph(kg: str, path: Path, neo: str) -> float:
    """Load ``path`` into Neo4j alone (the graph stage of a load: no vectors); returns its seconds."""
    from engine._config import EngineConfig, Neo4jSettings
    from engine._engine import Engine
    from loaders import open_source
    from loaders.bulk import BulkLoader, LoadSummary

    eng = Engine(EngineConfig(kg=kg, neo4j=Neo4jSettings.from_env(uri=neo)), llm=False)
    t0 = time.perf_counter()
    BulkLoader(eng.graph, None, None, progress=False, batch_size=20_000).load_records(  # type: ignore[arg-type]
        open_source(path), LoadSummary())
    return time.perf_counter() - t0


def dry_sync(kg: str, path: Path, factor: int, per: int, env: dict[str, str]) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _CHILD, kg, str(path), str(factor), str(per)], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"sync --dry-run failed: {proc.stderr.strip()[-2000:]}")
    rep = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"diff_s": round(rep["diff_s"], 2), "wall_s": round(time.perf_counter() - t0, 2),
            "peak_triples": rep["peak_triples"], "peak_rss_mb": rep["peak_rss_mb"], "partitions": rep["partitions"],
            "triples_added": rep["triples_added"], "triples_removed": rep["triples_removed"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hub", type=int, default=1_000_000, help="triples of the hub entity")
    ap.add_argument("--partition-triples", type=int, default=50_000, help="the sync's partition size")
    ap.add_argument("--keep", action="store_true", help="keep the KG afterwards (default: drop it)")
    ap.add_argument("--kg", default="sync_hub", help="the KG's name")
    args = parse_args(ap, {"hub": 5_000, "partition_triples": 500, "kg": "bench_smoke_sync_hub"})
    neo, mil = start_servers()
    env = {**os.environ, "NEO4J_URI": neo, "MILVUS_URI": mil, "PYTHONPATH": str(ROOT)}
    kg = args.kg
    out: dict[str, Any] = {"hub": args.hub, "partition_triples": args.partition_triples,
                           "load_avg_start": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory(prefix="isorag-sync-hub-") as tmp:
        kb, edited = Path(tmp) / "kb.txt", Path(tmp) / "edited.txt"
        others = [f"node {i}|rel {i % 5}|node {(i * 7) % 300}\n" for i in range(300)]
        with kb.open("w", encoding="utf-8") as f, edited.open("w", encoding="utf-8") as g:
            drop = max(1, args.hub // 100)
            for i in range(args.hub):
                f.write(f"hub|links|leaf {i}\n")
                if i >= drop:
                    g.write(f"hub|links|leaf {i}\n")
            for i in range(drop):
                g.write(f"hub|links|new leaf {i}\n")
            f.writelines(others)
            g.writelines(others)
        out["load_graph_s"] = round(load_graph(kg, kb, neo), 1)
        print(f"loaded a hub of {args.hub:,} triples into Neo4j in {out['load_graph_s']} s", flush=True)
        for name, factor in (("parts", 2), ("whole", 1 << 40)):
            out[name] = dry_sync(kg, edited, factor, args.partition_triples, env)
            print(f"{name}: {json.dumps(out[name])}", flush=True)
    out["same_counts"] = all(out["parts"][k] == out["whole"][k] for k in ("triples_added", "triples_removed"))
    out["peak_triples_ratio"] = round(out["parts"]["peak_triples"] / max(1, out["whole"]["peak_triples"]), 4)
    out["peak_rss_ratio"] = round(out["parts"]["peak_rss_mb"] / out["whole"]["peak_rss_mb"], 3)
    out["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    if not args.keep:
        from engine._config import Neo4jSettings
        from engine.stores.graph import GraphStore

        GraphStore(Neo4jSettings.from_env(uri=neo), kg).drop()
    emit("sync_hub", out)


if __name__ == "__main__":
    main()
