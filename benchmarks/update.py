"""Living KGs: a change set and a sync against a full reload, on MetaQA and on the 1M-edge scale KG.

    python benchmarks/update.py [--metaqa-only] [--kb ../shared/data/metaqa/kb.txt] [--edges 1000000] [--keep]
    python benchmarks/update.py --smoke     # a few hundred demo triples, 100 graph-only operations, no scale KG

Per KG (MetaQA's KB; the scale KG of ``--edges`` triples that ``benchmarks/scale.py`` generates, reused from its
cache under ``$ISORAG_HOME/scale``):

1. a full load into a fresh KG ``<--kg-prefix>_<name>`` (default ``sync_bench_<name>``; the BulkLoader, as
   ``isorag load``): ``reload_s``;
2. a change set made from the file (seeded): 1% of its triples removed, as many new triples added (existing
   entities and relations, pairs not in the KG), 0.1% of its entities renamed; applied with ``apply_changes``:
   ``changeset_s``, changes per second into each store (graph: operations / the graph stage's seconds; vectors:
   vectors upserted or deleted / the vector stage's seconds);
3. graph-only changes: a second change set of triples only (``--graph-ops``, default 20,000: half removed, half
   added between entities that keep a triple after the removals), no vector to write but for the entities the
   removals leave with no triple (they leave the KG): ``graph_ops_per_s`` (operations / wall time of the whole
   apply);
4. a sync (``isorag sync FILE --kg ...`` in a child process, whose peak RSS is the client's) from a file that
   differs by 1% from the KG (0.5% of its triples dropped, 0.5% new ones): ``sync_s``, ``client_peak_rss_mb``;
   then a second sync of the same file with ``--dry-run`` must find nothing to change (``resync_changes`` = 0);
5. ``stores_agree``: ``Engine.stats`` after everything (counts in Neo4j and Milvus agree), and the KG's triple
   count equals the distinct triples of the sync file;
6. a full check of the stores without ``--deep`` (``Engine.check``: every id and every vector's text digest of both
   stores compared): ``check_s``, which must find nothing (``check_ok``), and ``check_over_reload`` (its share of a
   full reload of the same KG; at most 0.2 is the aim).

The last line is one JSON object (also benchmarks/results/update.json) with, among others, ``metaqa_changeset_s``,
``metaqa_reload_s``, ``metaqa_check_s``, ``scale_sync_s``, ``scale_reload_s``, ``scale_check_s``,
``scale_client_peak_rss_mb``, ``graph_ops_per_s`` and ``stores_agree``. ``--metaqa-only`` skips the scale KG. The KGs
are dropped at the end unless ``--keep``. ``--smoke``: the small MetaQA folder made from the bundled demo KG (a few
hundred triples) and 100 graph-only operations, no scale KG, KGs ``bench_smoke_update_*`` (results in
benchmarks/results/update.smoke.json).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common  # noqa: F401 - sys.path and the environment, on import
from _common import DATA, ROOT, drop_kg, emit, parse_args, peak_rss_mb, server_rss_mb, smoke_metaqa, start_servers


def read_triples(path: Path) -> list[tuple[str, str, str]]:
    """The file's distinct triples, in file order (the benchmark's own bookkeeping, not the code measured)."""
    from loaders import TripleRecord, open_source

    seen: dict[tuple[str, str, str], None] = {}
    for rec in open_source(path):
        if isinstance(rec, TripleRecord):
            seen.setdefault((rec.head, rec.relation, rec.tail), None)
    return list(seen)


def new_triples(triples: list[tuple[str, str, str]], have: set[tuple[str, str, str]], n: int,
                rng: random.Random) -> list[tuple[str, str, str]]:
    """``n`` triples not in ``have``: an existing head and tail with an existing relation."""
    out: list[tuple[str, str, str]] = []
    while len(out) < n:
        h = triples[rng.randrange(len(triples))][0]
        r = triples[rng.randrange(len(triples))][1]
        t = triples[rng.randrange(len(triples))][2]
        if h != t and (h, r, t) not in have:
            have.add((h, r, t))
            out.append((h, r, t))
    return out


def write_changes(path: Path, removes: list[tuple[str, str, str]], adds: list[tuple[str, str, str]],
                  renames: list[tuple[str, str]]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for h, r, t in removes:
            f.write(json.dumps({"op": "remove", "head": h, "relation": r, "tail": t}) + "\n")
        for h, r, t in adds:
            f.write(json.dumps({"op": "add", "head": h, "relation": r, "tail": t}) + "\n")
        for key, name in renames:
            f.write(json.dumps({"op": "set", "key": key, "name": name}) + "\n")


#: the child's own peak RSS, read from /proc at its exit (VmHWM: this process image's high-water mark; the rusage of
#: children would also count the parent's pages a fork shares before exec)
_CHILD = """
import sys
from engine.cli import main
try:
    rc = main(sys.argv[1:])
finally:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            sys.stderr.write("\\nISORAG_PEAK_RSS_KB=" + line.split()[1] + "\\n")
sys.exit(rc)
"""


def run_cli(argv: list[str]) -> tuple[dict[str, Any], float, float]:
    """``isorag ARGV --json --quiet`` in a child process: (its JSON, wall seconds, the child's peak RSS in MB)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _CHILD, *argv, "--json", "--quiet"], cwd=ROOT,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"isorag {' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    kb = [line.split("=", 1)[1] for line in proc.stderr.splitlines() if line.startswith("ISORAG_PEAK_RSS_KB=")]
    return json.loads(proc.stdout), wall, int(kb[-1]) / 1024.0 if kb else float("nan")


def bench(name: str, path: Path, args: argparse.Namespace, neo: str, mil: str, work: Path) -> dict[str, Any]:
    """Steps 1-6 of the module docstring on one KG."""
    from engine import Engine, EngineConfig, MilvusSettings, Neo4jSettings

    kg = f"{args.kg_prefix}_{name}"
    rng = random.Random(args.seed)
    eng = Engine(EngineConfig(kg=kg, neo4j=Neo4jSettings.from_env(uri=neo), milvus=MilvusSettings(uri=mil)))
    eng.embedder.encode(["warm up"])
    out: dict[str, Any] = {"kg": kg, "file": str(path)}
    drop_kg(eng)
    # 1. full load
    t0 = time.perf_counter()
    load = eng.load(path, progress=not args.quiet)
    out["reload_s"] = round(time.perf_counter() - t0, 2)
    print(f"[{name}] full load: {load.triples:,} triples in {out['reload_s']} s", flush=True)
    triples = read_triples(path)
    removes, adds = changeset(eng, name, triples, args, work, rng, out)
    current = graph_only(eng, name, triples, removes, adds, args, work, rng, out)
    target, again = sync(eng, name, triples, set(removes), current, work, rng, out)
    agree_and_check(eng, name, target, again, out)
    if not args.keep:
        drop_kg(eng)
    eng.close()
    return out


def changeset(eng: Any, name: str, triples: list[tuple[str, str, str]], args: argparse.Namespace, work: Path,
              rng: random.Random, out: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """2. the change set: 1% removed, 1% added, 0.1% of the entities renamed; returns (removed, added)."""
    from engine.changes.apply import apply_changes
    from engine.changes.ops import read_changes
    from loaders.bulk import default_name

    have = set(triples)
    n = max(1, len(triples) // 100)
    removes = rng.sample(triples, n)
    adds = new_triples(triples, have, n, rng)
    keys = sorted({h for h, _, _ in triples} | {t for _, _, t in triples})
    renames = [(k, default_name(k) + " (renamed)") for k in rng.sample(keys, max(1, len(keys) // 1000))]
    changes = work / f"{name}-changes.jsonl"
    write_changes(changes, removes, adds, renames)
    ops = len(removes) + len(adds) + len(renames)
    t0 = time.perf_counter()
    rep = apply_changes(eng.graph, eng.vectors, eng.embedder, read_changes(changes), progress=not args.quiet,
                        source=str(changes))
    wall = time.perf_counter() - t0
    out["changeset"] = {"ops": ops, "removed": len(removes), "added": len(adds), "renamed": len(renames),
                        "skipped": rep.skipped, "graph_s": round(rep.graph_s, 2), "vector_s": round(rep.vector_s, 2),
                        "vectors_written": rep.vectors_upserted + rep.vectors_deleted,
                        "entities_left": getattr(rep, "orphans_removed", None)}
    out["changeset_s"] = round(wall, 2)
    out["changeset_graph_ops_per_s"] = round(ops / rep.graph_s, 1) if rep.graph_s else None
    out["changeset_vector_ops_per_s"] = (round((rep.vectors_upserted + rep.vectors_deleted) / rep.vector_s, 1)
                                         if rep.vector_s else None)
    print(f"[{name}] change set of {ops:,} ops in {wall:.2f} s (graph {rep.graph_s:.2f} s, vectors "
          f"{rep.vector_s:.2f} s, {out['changeset']['vectors_written']:,} vectors)", flush=True)
    return removes, adds


def graph_only(eng: Any, name: str, triples: list[tuple[str, str, str]], removes: list[Any], adds: list[Any],
               args: argparse.Namespace, work: Path, rng: random.Random, out: dict[str, Any]) -> set[Any]:
    """3. graph-only changes: triples only, no vector to write (but for the entities that leave with their last
    triple); the added triples join entities that keep a triple after the removals, so that no entity is made
    again (an entity made again is embedded again: not a graph-only change); returns the KG's triples after
    them."""
    from engine.changes.apply import apply_changes
    from engine.changes.ops import read_changes

    removed_set = set(removes)
    current = (set(triples) - removed_set) | set(adds)
    cur = [t for t in triples if t not in removed_set] + adds
    m = max(1, args.graph_ops // 2)
    g_removes = rng.sample(cur, m)
    g_adds = new_triples(sorted(current - set(g_removes)), current | removed_set | set(g_removes), m, rng)
    graph_changes = work / f"{name}-graph-changes.jsonl"
    write_changes(graph_changes, g_removes, g_adds, [])
    t0 = time.perf_counter()
    grep = apply_changes(eng.graph, eng.vectors, eng.embedder, read_changes(graph_changes), progress=not args.quiet,
                         source=str(graph_changes))
    gwall = time.perf_counter() - t0
    out["graph_only"] = {"ops": 2 * m, "wall_s": round(gwall, 2), "graph_s": round(grep.graph_s, 2),
                         "skipped": grep.skipped, "vectors_written": grep.vectors_upserted + grep.vectors_deleted,
                         "entities_left": getattr(grep, "orphans_removed", None)}
    out["graph_ops_per_s"] = round(2 * m / gwall, 1)
    print(f"[{name}] graph-only change set of {2 * m:,} ops in {gwall:.2f} s: {out['graph_ops_per_s']:,} ops/s",
          flush=True)
    return (current - set(g_removes)) | set(g_adds)


def sync(eng: Any, name: str, triples: list[tuple[str, str, str]], removed_set: set[Any], current: set[Any],
         work: Path, rng: random.Random, out: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """4. a sync from a file that differs by 1% from the KG, then a dry run of it again; returns (the file's
    triples, the dry run's report)."""
    kept = sorted(current)
    rng.shuffle(kept)
    k = max(1, len(kept) // 200)
    s_adds = new_triples(triples, set(kept) | removed_set, k, rng)
    target = kept[k:] + s_adds
    sync_file = work / f"{name}-sync.tsv"
    with sync_file.open("w", encoding="utf-8") as f:
        for h, r, t in target:
            f.write(f"{h}\t{r}\t{t}\n")
    rep_s, swall, rss = run_cli(["sync", str(sync_file), "--kg", eng.kg])
    out["sync"] = {key: rep_s.get(key) for key in ("triples", "partitions", "store_triples", "triples_added",
                                                 "triples_removed", "entities_set", "entities_removed", "diff_s",
                                                 "apply_s", "wall_s", "changes", "version")}
    out["sync_expected"] = {"triples_added": len(s_adds), "triples_removed": k}
    out["sync_s"] = round(swall, 2)  # the whole command: start, model, diff, apply
    out["client_peak_rss_mb"] = round(rss, 1)
    print(f"[{name}] sync: {rep_s['changes']:,} changes ({rep_s['triples_added']:,} +, {rep_s['triples_removed']:,} -, "
          f"{rep_s['entities_set']:,} set, {rep_s['entities_removed']:,} entities removed) in {swall:.1f} s "
          f"(diff {rep_s['diff_s']:.1f} s, apply {rep_s['apply_s']:.1f} s), client peak RSS {rss:.0f} MB",
          flush=True)
    again, awall, _ = run_cli(["sync", str(sync_file), "--kg", eng.kg, "--dry-run"])
    out["resync_changes"] = again["changes"]
    out["resync_dry_run_s"] = round(awall, 2)
    return target, again


def agree_and_check(eng: Any, name: str, target: list[Any], again: dict[str, Any], out: dict[str, Any]) -> None:
    """5. the stores agree, and the KG holds the file's triples; 6. a full check of both stores, without --deep."""
    st = eng.stats()
    out["neo4j"] = {k2: st["neo4j"][k2] for k2 in ("entities", "relations", "types", "triples")}
    out["milvus"] = {k2: st["milvus"][k2] for k2 in ("entities", "relations", "types")}
    out["triples_match_file"] = st["neo4j"]["triples"] == len(set(target))
    out["stores_agree"] = bool(st["agree"]) and out["triples_match_file"] and again["changes"] == 0
    print(f"[{name}] stores agree: {st['agree']}, KG triples {st['neo4j']['triples']:,} = file "
          f"{len(set(target)):,}: {out['triples_match_file']}; second sync changes {again['changes']}", flush=True)
    t0 = time.perf_counter()
    check = eng.check(progress=False)
    out["check_s"] = round(time.perf_counter() - t0, 2)
    out["check_ok"] = check.ok
    out["check_over_reload"] = round(out["check_s"] / out["reload_s"], 4) if out["reload_s"] else None
    print(f"[{name}] check (no --deep): {'agree' if check.ok else 'DIFFER'} in {out['check_s']} s, "
          f"{out['check_over_reload']} of a full reload", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kb", default=str(DATA / "metaqa" / "kb.txt"))
    ap.add_argument("--edges", type=int, default=1_000_000, help="size of the scale KG (benchmarks/scale.py)")
    ap.add_argument("--metaqa-only", action="store_true", help="skip the scale KG")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--graph-ops", type=int, default=20_000, help="size of the graph-only change set")
    ap.add_argument("--keep", action="store_true", help="keep the KGs afterwards (default: drop them)")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--kg-prefix", default="sync_bench", help="the KGs are <prefix>_metaqa and <prefix>_scale")
    args = parse_args(ap, {"kb": lambda a: str(smoke_metaqa() / "kb.txt"), "metaqa_only": True, "graph_ops": 100,
                           "quiet": True, "kg_prefix": "bench_smoke_update"})
    kb = Path(args.kb)
    neo, mil = start_servers()
    result: dict[str, Any] = {"load_avg_start": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory(prefix="isorag-update-") as tmp:
        work = Path(tmp)
        if not kb.is_file():
            raise SystemExit(f"{kb}: no such file (give --kb, or run --smoke)")
        mq = bench("metaqa", kb, args, neo, mil, work)
        result["metaqa"] = mq
        agree = [mq["stores_agree"]]
        sc: dict[str, Any] | None = None
        if not args.metaqa_only:
            from scale import cached_file

            path, _ = cached_file(args.edges, args.seed)
            sc = bench("scale", path, args, neo, mil, work)
            result["scale"] = sc
            agree.append(sc["stores_agree"])
    result.update({
        "metaqa_changeset_s": mq["changeset_s"],
        "metaqa_reload_s": mq["reload_s"],
        "metaqa_sync_s": mq["sync_s"],
        "metaqa_check_s": mq["check_s"],
        "scale_check_s": sc["check_s"] if sc else None,
        "check_over_reload": max(x["check_over_reload"] or 0 for x in ([mq, sc] if sc else [mq])),
        "check_ok": all(x["check_ok"] for x in ([mq, sc] if sc else [mq])),
        "scale_edges": None if args.metaqa_only else args.edges,
        "scale_sync_s": sc["sync_s"] if sc else None,
        "scale_sync_diff_s": sc["sync"]["diff_s"] if sc else None,
        "scale_reload_s": sc["reload_s"] if sc else None,
        "scale_changeset_s": sc["changeset_s"] if sc else None,
        "scale_client_peak_rss_mb": sc["client_peak_rss_mb"] if sc else None,
        "metaqa_client_peak_rss_mb": mq["client_peak_rss_mb"],
        "graph_ops_per_s": min(x["graph_ops_per_s"] for x in ([mq, sc] if sc else [mq])),
        "changeset_graph_ops_per_s": mq["changeset_graph_ops_per_s"],
        "changeset_vector_ops_per_s": mq["changeset_vector_ops_per_s"],
        "stores_agree": all(agree),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "server_rss_mb": {k: round(v, 1) for k, v in server_rss_mb().items()},
        "load_avg_end": [round(x, 2) for x in os.getloadavg()],
    })
    emit("update", result)


if __name__ == "__main__":
    main()
