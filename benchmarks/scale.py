"""Scale curve: synthetic KGs of growing size, load throughput, store sizes, retrieval latency, exactness.

    python benchmarks/scale.py --edges 100000,1000000,10000000 [--queries 60] [--keep] [--graph replica,expand]
    python benchmarks/scale.py --smoke      # 2,000 edges loaded online, 6 queries, every path, KG dropped, no plot

Per size: a KG with power-law (Zipf) degrees, thousands of typed relation names made from verb phrases and
realistic entity names (people, places, organisations, products; a number where a name repeats) is written
as a TSV file (cached under ``$ISORAG_HOME/scale``), loaded into KG ``scale_<size>`` with the project's
offline importer (:mod:`loaders.offline`: ``neo4j-admin database import full`` into a local Neo4j of its own
per size, under ``$ISORAG_HOME/scale/neo4j-<size>`` on ``--port``, while ONNX embeddings go to Milvus), or with
``--loader online`` with the ``BulkLoader`` (batched UNWIND MERGE through Bolt into the shared local Neo4j).
Gold patterns are sampled with
:mod:`engine.evaluation.synth`; each is retrieved with k(n) = k(r) = 64 (and k(n) = 1024, k(r) = 64 at the largest
size); latency per stage (embed, vector, graph, total) p50/p95 for each graph path of ``--graph`` (the in-process
replica, one statement per query, the expansion path: the same patterns through each, in one run); exactness:
each path's top-k GSDs equal those of the exhaustive Cypher oracle on the same candidates, where the oracle
finishes within ``--oracle-timeout``. The graph read replica is built once per size, timed and weighed (its arrays,
and the process's resident memory before and after), beside the KG's load time.
Store sizes are the growth of the Neo4j and Milvus data directories over the load (they hold every KG).
With ``--keep`` the KGs stay; a later run finds them loaded and only samples and queries again (a quiet-machine
re-measurement), carrying the load figures (time, stages, store growth, peak memory) over from the previous
``scale.json``; ``wall_s`` is then that run's time alone.

``--smoke``: one KG of 2,000 edges through the online loader, 6 patterns, every path and the oracle, dropped at
the end (under a minute; no plot, results in benchmarks/results/scale.smoke.json).

The last line is one JSON object (also benchmarks/results/scale.json); the plot, benchmarks/results/scale.png,
has four panels against KG size: retrieval latency per stage, load time per stage, store sizes and memory
(``--plot-only`` redraws it from scale.json).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import _common  # noqa: F401 - sys.path and the environment, on import
from _common import RESULTS, drop_kg, emit, parse_args, peak_rss_mb, percentile, server_rss_mb, start_servers

FIRST = ["Maria", "James", "Aiko", "Omar", "Lena", "Kwame", "Sofia", "Ivan", "Priya", "Mateo", "Chen", "Amara",
         "Lucas", "Freya", "Tariq", "Elena", "Noah", "Yara", "Hugo", "Mei", "Diego", "Ingrid", "Ravi", "Zofia",
         "Felix", "Nadia", "Kenji", "Chloe", "Emeka", "Astrid", "Pablo", "Leila", "Tomas", "Hana", "Samuel", "Iris"]
LAST = ["Okafor", "Moreno", "Jensen", "Ito", "Castillo", "Novak", "Haddad", "Lindqvist", "Mensah", "Romero",
        "Tanaka", "Kowalski", "Brennan", "Achebe", "Varga", "Delacroix", "Sato", "Petrov", "Osei", "Fischer",
        "Almeida", "Nakamura", "Byrne", "Rahman", "Costa", "Holm", "Adeyemi", "Larsen", "Quinn", "Silva"]
PLACE_A = ["Port", "Lake", "North", "South", "East", "West", "New", "Old", "Upper", "Lower", "Fort", "Saint"]
PLACE_B = ["Elmwood", "Ardent", "Brightwater", "Corvania", "Delmora", "Ashford", "Redcliff", "Stonebridge",
           "Marlow", "Eastmere", "Glenhaven", "Kingsport", "Silverton", "Oakridge", "Ravenna", "Thornbury"]
ORG_A = ["Northwind", "Vega", "Bluepeak", "Orion", "Cobalt", "Helix", "Summit", "Atlas", "Lumen", "Sterling",
         "Meridian", "Quartz", "Pioneer", "Harbor", "Zenith", "Granite"]
ORG_B = ["Logistics", "Foods", "Analytics", "Motors", "Pharma", "Energy", "Textiles", "Robotics", "Media",
         "Capital", "Airlines", "Biotech", "Steel", "Software", "Insurance", "Studios"]
PROD_A = ["Orbit", "Nova", "Pulse", "Echo", "Falcon", "Aurora", "Titan", "Comet", "Breeze", "Spark"]
PROD_B = ["Kettle", "Drone", "Scanner", "Router", "Tablet", "Bike", "Lamp", "Camera", "Sensor", "Speaker"]
# relation names: verb phrases typed by (head kind, tail kind)
VERBS = [("works for", "person", "org"), ("was born in", "person", "place"), ("lives in", "person", "place"),
         ("is married to", "person", "person"), ("founded", "person", "org"), ("designed", "person", "product"),
         ("mentored", "person", "person"), ("invested in", "person", "org"), ("reviewed", "person", "product"),
         ("is based in", "org", "place"), ("owns", "org", "product"), ("acquired", "org", "org"),
         ("manufactures", "org", "product"), ("sponsors", "org", "person"), ("lies in", "place", "place"),
         ("borders", "place", "place"), ("is sold in", "product", "place"), ("competes with", "product", "product")]
OBJ_VERBS = [("supplies {n} to", "org", "org"), ("buys {n} from", "org", "org"), ("licenses {n} to", "org", "org"),
             ("exports {n} to", "place", "place"), ("ships {n} to", "org", "place"),
             ("sells {n} to", "person", "org"), ("teaches {n} to", "person", "person"),
             ("wrote about {n} for", "person", "org"), ("uses {n} from", "product", "org")]
NOUNS = ["steel", "grain", "software", "chips", "cotton", "timber", "coffee", "engines", "textiles", "medicine",
         "batteries", "glass", "paper", "fuel", "cement", "copper", "rice", "fertilizer", "tyres", "solar panels",
         "robots", "spices", "leather", "wine", "wool", "plastics", "turbines", "lenses", "sensors", "vaccines"]
ADVERBS = ["", "formerly ", "jointly ", "officially ", "briefly ", "secretly ", "primarily ", "occasionally ",
           "publicly ", "reportedly "]
KINDS = ("person", "place", "org", "product")
KIND_SHARE = {"person": 0.45, "place": 0.15, "org": 0.25, "product": 0.15}


def relation_names() -> list[tuple[str, str, str]]:
    out = [(a + v, h, t) for a in ADVERBS for v, h, t in VERBS]
    out += [(a + v.format(n=n), h, t) for a in ADVERBS for v, h, t in OBJ_VERBS for n in NOUNS]
    return out  # 10 * 18 + 10 * 9 * 30 = 2880 relation names


def entity_name(kind: str, rng: Any) -> str:
    if kind == "person":
        return f"{FIRST[rng.integers(len(FIRST))]} {LAST[rng.integers(len(LAST))]}"
    if kind == "place":
        return f"{PLACE_A[rng.integers(len(PLACE_A))]} {PLACE_B[rng.integers(len(PLACE_B))]}"
    if kind == "org":
        return f"{ORG_A[rng.integers(len(ORG_A))]} {ORG_B[rng.integers(len(ORG_B))]}"
    return f"{PROD_A[rng.integers(len(PROD_A))]} {PROD_B[rng.integers(len(PROD_B))]} {rng.integers(100, 999)}"


def generate(edges: int, path: Path, *, seed: int = 0, alpha: float = 1.0, degree: float = 4.0) -> dict[str, Any]:
    """Write ``edges`` distinct triples ``head<TAB>relation<TAB>tail`` with Zipf(alpha) entity and relation
    popularity; about ``edges / degree`` entities."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n_ent = max(100, int(edges / degree))
    counts = {k: max(10, int(n_ent * s)) for k, s in KIND_SHARE.items()}
    names: dict[str, list[str]] = {}
    seen: dict[str, int] = {}
    for k in KINDS:
        lst = []
        for _ in range(counts[k]):
            base = entity_name(k, rng)
            c = seen.get(base, 0)
            seen[base] = c + 1
            lst.append(base if c == 0 else f"{base} {c + 1}")
        names[k] = lst
    rels = relation_names()
    rel_p = 1.0 / np.arange(1, len(rels) + 1) ** alpha
    rel_p /= rel_p.sum()
    ent_p = {}
    for k in KINDS:
        p = 1.0 / np.arange(1, counts[k] + 1) ** alpha
        ent_p[k] = p / p.sum()
    out: set[tuple[int, int, int]] = set()
    with path.open("w", encoding="utf-8") as f:
        while len(out) < edges:
            m = min(1_000_000, int((edges - len(out)) * 1.2) + 100)
            ridx = rng.choice(len(rels), size=m, p=rel_p)
            hk = {}
            for k in KINDS:
                hk[k] = iter(rng.choice(counts[k], size=m, p=ent_p[k]))
            tk = {}
            for k in KINDS:
                tk[k] = iter(rng.permutation(counts[k])[rng.choice(counts[k], size=m, p=ent_p[k])])
            for r in ridx:
                name, hkind, tkind = rels[r]
                h, t = int(next(hk[hkind])), int(next(tk[tkind]))
                if hkind == tkind and h == t:
                    continue
                key = (int(r), h + (KINDS.index(hkind) << 40), t + (KINDS.index(tkind) << 40))
                if key in out:
                    continue
                out.add(key)
                f.write(f"{names[hkind][h]}\t{name}\t{names[tkind][t]}\n")
                if len(out) >= edges:
                    break
    return {"entities_made": sum(counts.values()), "relation_names": len(rels)}


def cached_file(edges: int, seed: int = 0) -> tuple[Path, dict[str, Any]]:
    """The scale KG of ``edges`` triples as a TSV file under ``$ISORAG_HOME/scale``, generated once (also used by
    benchmarks/update.py); returns (path, what the generation said)."""
    data = Path(os.environ.get("ISORAG_HOME") or Path.home() / ".isorag") / "scale"
    data.mkdir(parents=True, exist_ok=True)
    path = data / f"scale_{edges}.tsv"
    gen: dict[str, Any] = {"cached": path.exists()}
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        gen.update(generate(edges, tmp, seed=seed))
        # grouped by relation (kept so cached files stay valid): the loader once wrote one statement per
        # relationship type per batch; it now writes all of a batch's types in one statement (dynamic types)
        env = {**os.environ, "LC_ALL": "C"}
        subprocess.run(["sort", "-t", "\t", "-k2,2", "-S", "512M", "-T", str(data), "-o", str(path), str(tmp)],
                       check=True, env=env)
        tmp.unlink()
        gen["sorted_by_relation"] = True
    return path, gen


def du_mb(path: Path) -> float | None:
    if not path.exists():
        return None
    try:
        out = subprocess.run(["du", "-sm", str(path)], capture_output=True, text=True, timeout=600).stdout
        return float(out.split()[0])
    except (subprocess.SubprocessError, ValueError, IndexError):
        return None


class _TimedGraph:
    """The graph store with a server-side transaction timeout on every read (the oracle's time limit)."""

    def __init__(self, graph: Any, timeout_s: float) -> None:
        self.graph, self.timeout_s = graph, timeout_s

    def read(self, query: str, **params: Any) -> Any:
        import neo4j

        return self.graph.read(neo4j.Query(query, timeout=self.timeout_s), **params)


def run_size(edges: int, args: argparse.Namespace, neo: str, mil: str, largest: bool,
             previous: dict[str, Any] | None = None) -> dict[str, Any]:
    from engine import Engine, EngineConfig, IsoragError, MatchSettings, MilvusSettings, Neo4jSettings
    from engine.retrieval.oracle import oracle_matches
    from engine.evaluation.synth import SynthSettings, Synthesizer

    home = Path(os.environ.get("ISORAG_HOME") or Path.home() / ".isorag")
    data = home / "scale"
    t0 = time.perf_counter()
    prev = previous or {}
    path, gen = cached_file(edges, args.seed)
    gen_s = time.perf_counter() - t0
    print(f"[{edges:,}] generated {path} in {gen_s:.1f} s", flush=True)

    kg = f"{args.kg_prefix}_{edges}"
    local = None
    neo_dir, mil_dir = home / "neo4j", home / "milvus"
    if args.loader == "offline":
        # a local Neo4j of its own per size (the offline importer replaces a whole database); one runs at a time
        from engine.servers.neo4j import LocalNeo4j

        pagecache = args.pagecache or ("4g" if edges >= 5_000_000 else "1g")
        local = LocalNeo4j(home=data / f"neo4j-{edges}", port=args.port, heap="2g", pagecache=pagecache)
        neo_dir = local.home / "data"
        neo = local.start() if neo_dir.exists() else local.uri  # (no store yet: the import starts it)
    cfg = EngineConfig(kg=kg, neo4j=Neo4jSettings.from_env(uri=neo), milvus=MilvusSettings(uri=mil),
                       match=MatchSettings(k_node=64, k_rel=64, k=args.k, deadline_s=args.deadline))
    eng = Engine(cfg, llm=False)
    size0 = {"neo4j": du_mb(neo_dir), "milvus": du_mb(mil_dir)}
    st = eng.graph.stats() if neo_dir.exists() else {"entities": 0}
    load: dict[str, Any]
    if st["entities"] and not args.reload and eng.stats()["agree"]:
        # the KG is kept from an earlier run (--keep): its load figures are carried over from that run's JSON
        load = {**prev.get("load", {}), "reused": True}
        load_s = prev.get("load_s")
        gen["previous_run"] = {k: prev[k] for k in ("generate_s", "synth_s", "wall_s") if k in prev}
    else:
        if local is not None:  # a fresh database and no vectors: everything is loaded and embedded anew
            local.stop()
            import shutil

            shutil.rmtree(local.home / "data", ignore_errors=True)
            shutil.rmtree(local.home / "import", ignore_errors=True)
            eng.vectors.drop()
            size0 = {"neo4j": 0.0, "milvus": du_mb(mil_dir)}
        elif st["entities"]:
            drop_kg(eng)
        summary = eng.load(path, "tsv", progress=not args.quiet, offline_import=local is not None,
                           local_neo4j=local)
        load_s = summary.wall_s
        load = summary.to_dict()
        load["loader"] = ("offline: neo4j-admin database import full into a fresh local Neo4j, embeddings "
                          "beside it" if local is not None else "online: batched UNWIND through Bolt")
        load["triples_per_s"] = round(summary.triples / max(summary.wall_s, 1e-9), 1)
        load["graph_triples_per_s"] = round(summary.triples / max(summary.graph_s, 1e-9), 1)
        load["embed_entities_per_s"] = round(summary.embedded_entities / max(summary.embed_s, 1e-9), 1)
        print(f"[{edges:,}] loaded in {summary.wall_s:.1f} s ({load['triples_per_s']} triples/s, "
              f"embed {load['embed_entities_per_s']} entities/s)", flush=True)
    # Neo4j's store files grow at its next checkpoint (the embedded DBMS has no db.checkpoint procedure):
    # its growth right after a load understates the store (1 MB measured at 100k); a rerun with the KG kept
    # (--keep) measures it after the server has checkpointed
    size1 = {"neo4j": du_mb(neo_dir), "milvus": du_mb(mil_dir)}
    sizes = {k: {"before_mb": size0[k], "after_mb": size1[k],
                 "growth_mb": (size1[k] - size0[k]) if size0[k] is not None and size1[k] is not None else None}
             for k in size0}
    if load.get("reused") and prev.get("store_mb"):  # the growth over the load that made it; now_mb: all KGs now
        sizes = {k: {**v, "now_mb": size1.get(k)} for k, v in prev["store_mb"].items()}

    t1 = time.perf_counter()
    syn = Synthesizer(eng.graph, seed=args.seed, settings=SynthSettings(max_answers=args.max_answers))
    gold = list(syn.generate(args.queries, [s for s in args.shapes.split(",") if s]))
    synth_s = time.perf_counter() - t1
    print(f"[{edges:,}] synth {len(gold)} gold patterns in {synth_s:.1f} s (dropped {syn.dropped})", flush=True)

    replica = measure_replica(eng, load_s)
    print(f"[{edges:,}] replica: {replica}", flush=True)
    settings_list = [("k64", {"k_node": 64, "k_rel": 64})]
    if largest:
        settings_list.append(("k1024", {"k_node": 1024, "k_rel": 64}))
    paths = [g.strip() for g in args.graph.split(",") if g.strip()]
    runs: dict[str, Any] = {}
    for label, kw in settings_list:
        shapes: dict[str, Any] = {}
        for rec in gold:
            shapes.setdefault(rec["shape"], rec["pattern"])
        for p in paths:  # warm-up: model, connections, caches, each shape's statements planned once on each path
            for pat in shapes.values():
                try:
                    eng.retrieve(pat, graph=p, **kw)
                except IsoragError:
                    pass
        per = {p: {s: [] for s in ("version", "embed", "vector", "graph", "total")} for p in paths}
        hit = {p: 0 for p in paths}
        not_exact = {p: 0 for p in paths}
        served: dict[str, dict[str, int]] = {p: {} for p in paths}
        by_shape: dict[str, dict[str, list[float]]] = {p: {} for p in paths}
        exact_ok = {p: 0 for p in paths}
        exact_n = oracle_timeouts = 0
        oracle_ms: list[float] = []
        for n_rec, rec in enumerate(gold):
            got: dict[str, Any] = {}
            for p in paths[n_rec % len(paths):] + paths[:n_rec % len(paths)]:  # the order rotates
                try:
                    got[p] = eng.retrieve(rec["pattern"], graph=p, **kw)
                except IsoragError as e:
                    print(f"  retrieval failed ({p}): {e}", flush=True)
            if len(got) < len(paths):
                continue
            for p, res in got.items():
                for s in per[p]:
                    per[p][s].append(res.timings.get(s, 0.0))
                by_shape[p].setdefault(rec["shape"], []).append(res.timings.get("total", 0.0))
                not_exact[p] += not res.exact
                hit[p] += bool({a.entity.name for a in res.answers} & set(rec["answers"]))
                via = res.stats.get("graph_path", "?")
                served[p][via] = served[p].get(via, 0) + 1
            if args.oracle_timeout > 0:
                from dataclasses import replace

                ms = replace(cfg.match, **kw)
                first = got[paths[0]]
                cands = eng.retriever.candidates(first.pattern, ms, {})
                t2 = time.perf_counter()
                try:
                    want = oracle_matches(_TimedGraph(eng.graph, args.oracle_timeout), first.pattern, cands,
                                          limit=args.k)
                except IsoragError:
                    oracle_timeouts += 1
                    continue
                oracle_ms.append((time.perf_counter() - t2) * 1000)
                exact_n += 1
                for p, res in got.items():
                    exact_ok[p] += [round(s.gsd, 6) for s in res.subgraphs] == [round(m.gsd, 6) for m in want]
        out: dict[str, Any] = {}
        for p in paths:
            n_q = len(per[p]["total"])
            out[p] = {"queries": n_q,
                      "p50_ms": {s: round(percentile(v, 50), 2) for s, v in per[p].items()},
                      "p95_ms": {s: round(percentile(v, 95), 2) for s, v in per[p].items()},
                      "total_p50_ms_by_shape": {k2: round(percentile(v, 50), 2)
                                                for k2, v in sorted(by_shape[p].items())},
                      "hit": round(hit[p] / max(n_q, 1), 4), "not_exact_results": not_exact[p],
                      "served_by": served[p], "exact": round(exact_ok[p] / exact_n, 4) if exact_n else None}
        main_p = out[paths[0]]
        runs[label] = {**kw, **main_p, "paths": out,
                       "oracle": {"ran": exact_n, "timeouts": oracle_timeouts, "timeout_s": args.oracle_timeout,
                                  "p50_ms": round(percentile(oracle_ms, 50), 2) if oracle_ms else None}}
        if "expand" in out:
            runs[label]["ratios_to_expand"] = {
                p: {f"{w}_{st}": round(out[p][f"{w}_ms"][st] / max(out["expand"][f"{w}_ms"][st], 1e-9), 3)
                    for w in ("p50", "p95") for st in ("graph", "total")} for p in paths if p != "expand"}
        for p in paths:
            print(f"[{edges:,}] {label} {p}: p50 {out[p]['p50_ms']} p95 {out[p]['p95_ms']} exact {out[p]['exact']} "
                  f"served by {out[p]['served_by']}", flush=True)
        print(f"[{edges:,}] {label}: {exact_n} oracle runs, {oracle_timeouts} timeouts; ratios "
              f"{runs[label].get('ratios_to_expand')}", flush=True)
    stats = eng.graph.stats()
    servers = server_rss_mb()
    if not args.keep:
        drop_kg(eng)
    eng.close()
    if local is not None:
        local.stop()
        if not args.keep:
            import shutil

            shutil.rmtree(local.home, ignore_errors=True)
    main = runs["k64"]
    wall_s = time.perf_counter() - t0
    peak = round(peak_rss_mb(), 1)
    return {"edges": edges, "wall_s": round(wall_s, 1), "entities": stats["entities"], "relations": stats["relations"],
            "triples": stats["triples"], "generate_s": round(gen_s, 1), "generator": gen,
            "load_s": round(load_s, 1) if load_s is not None else None, "load": load, "store_mb": sizes,
            "synth_s": round(synth_s, 1), "gold_patterns": len(gold), "synth_dropped": syn.dropped,
            "p50_ms": main["p50_ms"], "p95_ms": main["p95_ms"], "exact": main["exact"], "runs": runs,
            "replica": replica,
            "peak_rss_mb": peak,
            # the peak of the process that loaded the KG (this one, or the earlier run whose KG is reused)
            "load_peak_rss_mb": (prev.get("load_peak_rss_mb") or prev.get("peak_rss_mb")) if load.get("reused")
            else peak, "server_rss_mb": {k: round(v, 1) for k, v in servers.items()},
            "dropped": not args.keep}


def measure_replica(eng: Any, load_s: float | None) -> dict[str, Any]:
    """Build the KG's graph read replica from Neo4j (its saved file removed first, so that it is streamed) and
    report its build time, its arrays' size and the growth of this process's resident memory, and the build time
    as a share of the KG's load time."""
    import psutil

    from engine.retrieval.replica import drop_replica_files, replica_state, version_key
    from engine.retrieval.graph_paths import wait_for_replica

    drop_replica_files(eng.graph)
    rss0 = psutil.Process().memory_info().rss
    t0 = time.perf_counter()
    state = wait_for_replica(eng.graph, version_key(eng.kg, eng.graph.version()), eng.config.graph_cache_mb)
    wall = time.perf_counter() - t0
    rss1 = psutil.Process().memory_info().rss
    info = replica_state(eng.graph) if state.state == "ready" else None
    info = info or {"state": state.state, "why": state.why}
    out = {"state": state.state, "build_wall_s": round(wall, 2), "rss_growth_mb": round((rss1 - rss0) / 2**20, 1),
           **{k: v for k, v in info.items() if k != "state"}}
    if load_s:
        out["build_share_of_load"] = round(wall / load_s, 4)
    return out


def _plot_stores(ax: Any, xs: list[int], values: list[dict[str, Any]], style: str, what: str) -> None:
    """One line per store (Neo4j, Milvus) of ``values[i][store]`` against ``xs``, where known."""
    for store, c in (("neo4j", "tab:green"), ("milvus", "tab:blue")):
        pts = [(x, v.get(store)) for x, v in zip(xs, values) if v.get(store)]
        if pts:
            ax.plot(*zip(*pts), style, color=c, label=f"{store} {what}")


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """Four panels against KG size: retrieval latency per stage, load time per stage, store sizes, memory."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    xs = [r["edges"] for r in results]
    ax = axes[0][0]
    colors = {"embed": "tab:blue", "vector": "tab:orange", "graph": "tab:green", "total": "tab:red"}
    for stage, c in colors.items():
        ax.plot(xs, [r["p50_ms"][stage] for r in results], "o-", color=c, label=f"{stage} p50")
        ax.plot(xs, [r["p95_ms"][stage] for r in results], "s--", color=c, alpha=0.6, label=f"{stage} p95")
    for r in [r for r in results if "k1024" in r["runs"]]:
        ax.plot([r["edges"]], [r["runs"]["k1024"]["p50_ms"]["total"]], "r*", markersize=14,
                label="total p50, k(n)=1024")
        ax.plot([r["edges"]], [r["runs"]["k1024"]["p95_ms"]["total"]], "rx", markersize=10,
                label="total p95, k(n)=1024")
    # the targets: p50 at most 200 ms at 1M edges (k(n)=64), 750 ms at 10M edges (k(n)=1024, SimGRAG's figure)
    ax.plot([1_000_000], [200], "kv", markersize=9, fillstyle="none", label="target p50 at 1M, k(n)=64")
    ax.plot([10_000_000], [750], "k*", markersize=12, fillstyle="none", label="target p50 at 10M, k(n)=1024")
    ax.set_yscale("log")
    ax.set_ylabel("retrieval latency per query (ms)")
    ax.set_title("retrieval latency per stage, k(n)=k(r)=64")
    ax.legend(fontsize=7, ncol=2)

    ax = axes[0][1]
    loads = [r.get("load") or {} for r in results]
    for key, label, c in (("wall_s", "whole load", "tab:red"), ("graph_s", "graph: import or Bolt writes", "tab:green"),
                          ("embed_s", "embedding names", "tab:blue"), ("vector_s", "Milvus inserts", "tab:orange")):
        pts = [(x, ld[key]) for x, ld in zip(xs, loads) if ld.get(key)]
        if pts:
            ax.plot(*zip(*pts), "o-", color=c, label=label)
    walls = [(x, r["wall_s"]) for x, r in zip(xs, results)
             if r.get("wall_s") and not (r.get("load") or {}).get("reused")]
    if walls:
        ax.plot(*zip(*walls), "k^--", label="whole run (generate, load, synth, queries)")
    ax.axhline(90 * 60, color="k", lw=0.8, ls=":", label="90 min (target for the 10M run)")
    ax.set_yscale("log")
    ax.set_ylabel("seconds")
    ax.set_title("load time per stage (triples/s, names/s annotated)")
    for x, ld in zip(xs, loads):
        if ld.get("wall_s"):
            ax.annotate(f"{ld.get('triples_per_s', 0):,.0f} t/s\n{ld.get('embed_entities_per_s', 0):,.0f} names/s",
                        (x, ld["wall_s"]), textcoords="offset points", xytext=(-30, 8), fontsize=7)
    ax.legend(fontsize=7)

    ax = axes[1][0]
    _plot_stores(ax, xs, [{k: v.get("growth_mb") for k, v in (r.get("store_mb") or {}).items()} for r in results],
                 "o-", "data directory growth over the load")
    ax.set_yscale("log")
    ax.set_ylabel("MB")
    ax.set_title("store sizes")
    ax.legend(fontsize=7)

    ax = axes[1][1]
    pts = [(x, r.get("load_peak_rss_mb") or r["peak_rss_mb"]) for x, r in zip(xs, results)]
    ax.plot(*zip(*pts), "o-", color="tab:purple", label="engine process peak RSS (generate, load, query)")
    ax.plot(xs, [r["peak_rss_mb"] for r in results], "o:", color="tab:purple", alpha=0.5,
            label="engine process peak RSS (this run)")
    _plot_stores(ax, xs, [r.get("server_rss_mb") or {} for r in results], "s--", "server RSS after queries")
    ax.set_yscale("log")
    ax.set_ylabel("MB")
    ax.set_title("memory")
    ax.legend(fontsize=7)
    for a in axes.flat:
        a.set_xscale("log")
        a.set_xlabel("KG edges")
        a.grid(True, which="both", alpha=0.3)
    fig.suptitle("isorag scale curve (synthetic power-law KGs; benchmarks/scale.py)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--edges", default="100000", help="comma list, e.g. 100000,1000000,10000000")
    ap.add_argument("--queries", type=int, default=60, help="gold patterns per size")
    ap.add_argument("--shapes", default="path1,path2,path3,star,conj2,conj3")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--max-answers", type=int, default=10)
    ap.add_argument("--deadline", type=float, default=30.0, help="retrieval deadline per query (s)")
    ap.add_argument("--oracle-timeout", type=float, default=10.0, help="s per oracle query; 0 skips the oracle")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", action="store_true", help="keep the KGs (default: drop each after its run)")
    ap.add_argument("--reload", action="store_true", help="drop and reload a KG that is already loaded")
    ap.add_argument("--loader", choices=["offline", "online"], default="offline",
                    help="offline: neo4j-admin import into a local Neo4j of its own per size (default); "
                         "online: the BulkLoader into the shared local Neo4j")
    ap.add_argument("--port", type=int, default=7688, help="Bolt port of the per-size Neo4j (offline loader)")
    ap.add_argument("--pagecache", default=None, help="page cache of the per-size Neo4j (default 1g; 4g from 5M)")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--plot-only", action="store_true", help="redraw scale.png from benchmarks/results/scale.json")
    ap.add_argument("--graph", default="replica,statement,expand",
                    help="graph paths to run the same patterns through (comma list of replica, statement, expand)")
    ap.add_argument("--kg-prefix", default="scale", help="the KGs are <prefix>_<edges>")
    args = parse_args(ap, {"edges": "2000", "queries": 6, "loader": "online", "oracle_timeout": 2.0, "quiet": True,
                           "kg_prefix": "bench_smoke_scale"})
    import json

    prev_file = RESULTS / "scale.json"
    previous = {r["edges"]: r for r in json.loads(prev_file.read_text())["sizes"]} \
        if prev_file.exists() and not args.smoke else {}
    if args.plot_only:
        plot(list(previous.values()), RESULTS / "scale.png")
        print(f"wrote {RESULTS / 'scale.png'}")
        return
    sizes = [int(x) for x in args.edges.split(",") if x.strip()]
    neo, mil = start_servers()
    results = []
    for e in sizes:
        results.append(run_size(e, args, neo, mil, largest=e == max(sizes), previous=previous.get(e)))
        RESULTS.mkdir(parents=True, exist_ok=True)
        if not args.smoke:  # the committed plot is a real run's
            plot(results, RESULTS / "scale.png")
    emit("scale", {"sizes": results, "load_avg": [round(x, 2) for x in os.getloadavg()]})


if __name__ == "__main__":
    main()
