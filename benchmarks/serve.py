"""``isorag serve`` under load: clients on loopback against the same calls in process, in one run.

    python benchmarks/serve.py                 # levels 1, 8, 32, 64; demo KG + MetaQA; 10,000 requests for RSS
    python benchmarks/serve.py --quick         # levels 1 and 8 on the demo KG (under three minutes once it is loaded)
    python benchmarks/serve.py --smoke         # a tiny KG, a few requests, a 200-node draw: under a minute
    python benchmarks/serve.py --screenshot docs/img/explorer.png   # also: the explorer after a demo question

Workloads, taken in turn by every client: the demo questions' gold patterns through ``POST /retrieve``, the same
questions in plain text through ``POST /ask`` with the learned generator (streamed: the time to the first event is
measured against the final answer's), and without ``--quick`` MetaQA dev gold patterns (1, 2 and 3 hops) through
``/retrieve``. Each level runs ``--requests`` requests with that many concurrent clients (asyncio, one keep-alive
connection each): throughput, p50 / p99 latency, errors, the server's RSS growth. The same calls run in this
process (an Engine on the same KG) give the in-process p50. Then the explorer (headless Chromium) draws every page
of a 5,000-neighbour entity; ``--compare-draw`` times Cytoscape.js (canvas) and sigma.js (WebGL) on the same graph.

KGs: ``bench_serve_demo`` (the demo KG with its generator) and ``bench_serve_metaqa`` are loaded when missing and
kept for the next run (``--drop`` removes them); the 5,000-neighbour star KG is made and dropped each run.
The last line is one JSON object (also benchmarks/results/serve.json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, emit, parse_args, percentile, start_servers

DEMO = ROOT / "engine" / "data" / "demo"
METAQA = ROOT.parent / "shared" / "data" / "metaqa"
TARGETS = {"p50_ratio_at_1": 1.15, "errors_at_64": 0, "qps_8_over_1": 1.5, "rss_growth_mb": 50.0,
           "first_event_share": 1 / 3}


def unique(prefix: str) -> str:
    import uuid

    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def interleave(a: list[Any], b: list[Any]) -> list[Any]:
    return [x for i in range(max(len(a), len(b))) for x in (a[i % len(a)], b[i % len(b)])]


def engine_for(kg: str, neo: str, mil: str, embedder: Any = None) -> Any:
    from engine import Engine, EngineConfig, MilvusSettings, Neo4jSettings

    cfg = EngineConfig(kg=kg, neo4j=Neo4jSettings.from_env(uri=neo), milvus=MilvusSettings.from_env(uri=mil))
    return Engine(cfg, llm=False, embedder=embedder)


def ensure_demo(eng: Any) -> None:
    """The demo KG and its learned generator, as `isorag demo` makes them (skipped when there)."""
    from engine._engine import default_generator_path
    from engine.learned.train import GeneratorSettings

    if not eng.graph.stats()["entities"]:
        t0 = time.perf_counter()
        eng.load(DEMO / "kb.txt", progress=False)
        print(f"loaded the demo KG into {eng.kg!r} in {time.perf_counter() - t0:.1f} s", flush=True)
    if not default_generator_path(eng.kg).is_file():
        eng.train_generator([DEMO / "questions.jsonl", DEMO / "generator_questions.jsonl"],
                            settings=GeneratorSettings(), progress=False)


def ensure_metaqa(eng: Any, folder: Path) -> None:
    if not eng.graph.stats()["entities"]:
        t0 = time.perf_counter()
        eng.load(folder / "kb.txt", progress=False)
        print(f"loaded MetaQA into {eng.kg!r} in {time.perf_counter() - t0:.1f} s", flush=True)


def demo_workloads(limit: int | None = None) -> dict[str, list[dict[str, Any]]]:
    rows = [json.loads(x) for x in (DEMO / "questions.jsonl").read_text().splitlines() if x.strip()][:limit]
    gold = [{"pattern": r["pattern"]} for r in rows]
    text = [{"question": r["question"].replace("[", "").replace("]", ""), "route": "learned", "stream": True}
            for r in rows]
    return {"demo_gold_retrieve": gold, "demo_text_ask": text}


def metaqa_workload(folder: Path, per_hop: int) -> list[dict[str, Any]]:
    from engine.evaluation.metrics import read_items

    out = []
    for hop in (1, 2, 3):
        items = read_items(folder / f"{hop}-hop" / "qa_dev.txt", limit=per_hop)
        out += [{"pattern": it["pattern"]} for it in items if it.get("pattern")]
    return out


# -- the server and its clients ----------------------------------------------------------------------------------
class Server:
    def __init__(self, workers: int, tmp: Path, kgs: list[str]) -> None:
        from engine.service.keys import KeyStore

        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.key, _ = KeyStore(tmp / "keys.json").create(kgs, "read")
        env = {**os.environ, "ISORAG_KEYS": str(tmp / "keys.json"), "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "serve", "--port", str(self.port),
                                      "--workers", str(workers), "--state-dir", str(tmp / "state"), "--no-llm",
                                      "--log-level", "warning"], env=env, start_new_session=True,
                                     stdout=open(tmp / "serve.log", "ab"), stderr=subprocess.STDOUT)
        import httpx

        end = time.monotonic() + 180
        while time.monotonic() < end:
            try:
                if httpx.get(self.url + "/healthz", timeout=2).text == "ok":
                    return
            except httpx.HTTPError:
                time.sleep(0.3)
        raise RuntimeError("the server did not start: see " + str(tmp / "serve.log"))

    def rss_mb(self) -> float:
        import psutil

        p = psutil.Process(self.proc.pid)
        return sum(q.memory_info().rss for q in [p, *p.children(recursive=True)]) / 2 ** 20

    def stop(self) -> None:
        import signal

        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(30)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _one(client: Any, kg: str, kind: str, body: dict[str, Any]) -> tuple[float, float | None, bool]:
    """(latency s, first event s or None, ok) of one request."""
    route = "retrieve" if "retrieve" in kind else "ask"
    t0 = time.perf_counter()
    first = None
    if body.get("stream"):
        async with client.stream("POST", f"/v1/kgs/{kg}/ask", json=body) as r:
            ok = r.status_code == 200
            async for line in r.aiter_lines():
                if line.startswith("event: ") and first is None:
                    first = time.perf_counter() - t0
                if line == "event: error":
                    ok = False
        return time.perf_counter() - t0, first, ok
    r = await client.post(f"/v1/kgs/{kg}/{route}", json=body)
    return time.perf_counter() - t0, None, r.status_code == 200


async def run_level(srv: Server, mix: list[tuple[str, str, dict[str, Any]]], clients: int,
                    total: int) -> dict[str, Any]:
    import httpx

    lat: dict[str, list[float]] = {}
    firsts: list[tuple[float, float]] = []
    errors = 0
    next_i = 0

    async def worker() -> None:
        nonlocal next_i, errors
        async with httpx.AsyncClient(base_url=srv.url, timeout=120,
                                     headers={"Authorization": f"Bearer {srv.key}"}) as client:
            while next_i < total:
                kg, kind, body = mix[next_i % len(mix)]
                next_i += 1
                try:
                    s, first, ok = await _one(client, kg, kind, body)
                except httpx.HTTPError:
                    s, first, ok = 0.0, None, False
                errors += int(not ok)
                lat.setdefault(kind, []).append(s)
                if first is not None:
                    firsts.append((first, s))

    rss0 = srv.rss_mb()
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    wall = time.perf_counter() - t0
    every = [x for v in lat.values() for x in v]
    return {"clients": clients, "requests": total, "qps": round(total / wall, 2),
            "p50_ms": round(1000 * percentile(every, 50), 2), "p99_ms": round(1000 * percentile(every, 99), 2),
            "errors": errors, "rss_growth_mb": round(srv.rss_mb() - rss0, 1),
            "first_event_ms": round(1000 * percentile([f for f, _ in firsts], 50), 2) if firsts else None,
            "first_event_share": round(percentile([f / s for f, s in firsts], 50), 3) if firsts else None,
            "by_workload": {k: {"n": len(v), "p50_ms": round(1000 * percentile(v, 50), 2),
                                "p99_ms": round(1000 * percentile(v, 99), 2)} for k, v in lat.items()}}


def in_process(engines: dict[str, Any], mix: list[tuple[str, str, dict[str, Any]]], n: int) -> dict[str, Any]:
    """The same calls, one at a time, on an Engine in this process."""
    lat: dict[str, list[float]] = {}
    for i in range(n):
        kg, kind, body = mix[i % len(mix)]
        eng = engines[kg]
        t0 = time.perf_counter()
        if "retrieve" in kind:
            eng.retrieve(body["pattern"])
        else:
            eng.ask(body["question"], route="learned", raise_errors=False)
        lat.setdefault(kind, []).append(time.perf_counter() - t0)
    every = [x for v in lat.values() for x in v]
    return {"p50_ms": round(1000 * percentile(every, 50), 2),
            "by_workload": {k: round(1000 * percentile(v, 50), 2) for k, v in lat.items()}}


def paired(srv: Server, engines: dict[str, Any], mix: list[tuple[str, str, dict[str, Any]]], n: int) -> dict[str, Any]:
    """Each call of the mix over HTTP (one client, keep-alive, not streamed) and in this process, one after the
    other (the order alternating), so that both see the same load: this machine's load moves within seconds."""
    import httpx

    http: list[float] = []
    local: list[float] = []
    with httpx.Client(base_url=srv.url, timeout=120, headers={"Authorization": f"Bearer {srv.key}"}) as client:
        for i in range(n):
            kg, kind, body = mix[i % len(mix)]
            route = "retrieve" if "retrieve" in kind else "ask"
            one = {k: v for k, v in body.items() if k != "stream"}

            def over_http(kg: str = kg, route: str = route, one: dict[str, Any] = one) -> None:
                t0 = time.perf_counter()
                client.post(f"/v1/kgs/{kg}/{route}", json=one).raise_for_status()
                http.append(time.perf_counter() - t0)

            def here(kg: str = kg, kind: str = kind, body: dict[str, Any] = body) -> None:
                local.append(in_process(engines, [(kg, kind, body)], 1)["p50_ms"] / 1000)

            for step in ((over_http, here) if i % 2 == 0 else (here, over_http)):
                step()
    return {"n": n, "http_p50_ms": round(1000 * percentile(http, 50), 2),
            "inprocess_p50_ms": round(1000 * percentile(local, 50), 2)}


# -- the explorer in headless Chromium ---------------------------------------------------------------------------
def chromium() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (binary and driver):
        return None
    opts = Options()
    opts.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800",
                "--enable-unsafe-swiftshader"):
        opts.add_argument(arg)
    d = webdriver.Chrome(service=Service(driver), options=opts)
    d.set_script_timeout(300)
    return d


def star_kg(eng: Any, n: int, tmp: Path) -> Any:
    """A hub with ``n`` neighbours (one triple each); returns the hub's eid."""
    path = tmp / "star.txt"
    path.write_text("".join(f"Hub entity|relation_{i % 9}|Neighbour entity {i}\n" for i in range(n)))
    eng.load(path, progress=False)
    return eng.search_entities("Hub entity", limit=1)["entities"][0]["eid"]


def explorer_draw(d: Any, srv: Server, kg: str, hub: int, runs: int) -> dict[str, Any]:
    d.get(srv.url + "/")
    d.execute_script(f"sessionStorage.setItem('isorag-key', {json.dumps(srv.key)}); "
                     f"sessionStorage.setItem('isorag-kg', {json.dumps(kg)});")
    d.refresh()
    _wait(d, "return document.getElementById('kg-info').textContent.includes('version')")
    d.execute_script("document.querySelector('nav button[data-tab=explore]').click()")
    draws, frames, nodes = [], [], 0
    for _ in range(runs):
        got = d.execute_async_script(f"const cb = arguments[0]; window.explorer.browseAll({json.dumps(str(hub))})"
                                     ".then(cb).catch(e => cb({error: String(e)}))")
        if "error" in got:
            raise RuntimeError(got["error"])
        draws.append(got["ms"])
        nodes = got["nodes"]
        frames.append(d.execute_async_script("const cb = arguments[0]; window.explorer.zoomFrameMs(10).then(cb)"))
    return {"nodes": nodes, "draw_ms": round(statistics.median(draws), 1), "draws_ms": [round(x, 1) for x in draws],
            "zoom_frame_ms": round(statistics.median(frames), 1)}


def compare_draw(d: Any, n: int, runs: int) -> dict[str, Any]:
    d.get((ROOT / "benchmarks" / "draw_compare.html").as_uri())
    out: dict[str, Any] = {"nodes": n + 1}
    for name, fn in (("cytoscape_canvas", "runCytoscape"), ("sigma_webgl", "runSigma")):
        rs = [d.execute_async_script(f"const cb = arguments[0]; {fn}({n}).then(cb)") for _ in range(runs)]
        out[name] = {"draw_ms": round(statistics.median(r["draw"] for r in rs), 1),
                     "zoom_frame_ms": round(statistics.median(r["frame"] for r in rs), 1)}
    return out


def screenshot(d: Any, srv: Server, kg: str, path: Path) -> None:
    d.set_window_size(1280, 800)
    d.get(srv.url + "/")
    d.execute_script(f"sessionStorage.setItem('isorag-key', {json.dumps(srv.key)}); "
                     f"sessionStorage.setItem('isorag-kg', {json.dumps(kg)});")
    d.refresh()
    _wait(d, "return document.getElementById('kg-info').textContent.includes('version')")
    d.execute_script("document.getElementById('question').value = 'who acted in the films directed by Burt Lancaster';"
                     "document.querySelector('#ask-form button').click()")
    _wait(d, "return document.getElementById('answer-entities').textContent.includes('GSD')")
    time.sleep(0.5)
    path.parent.mkdir(parents=True, exist_ok=True)
    d.save_screenshot(str(path))


def _wait(d: Any, script: str, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not d.execute_script(script):
        if time.monotonic() > end:
            raise TimeoutError(script)
        time.sleep(0.1)


def measure(result: dict[str, Any], srv: Server, engines: dict[str, Any], mix: list[tuple[str, str, dict[str, Any]]],
            levels: list[int], per_level: int, rss_requests: int) -> None:
    """The levels of clients, the in-process and paired baselines, the RSS run: into ``result``."""
    asyncio.run(run_level(srv, mix, min(8, levels[-1]), min(len(mix), 80)))  # warm: models, caches, pools
    in_process(engines, mix, min(len(mix), 80))  # the in-process engines warm up the same way
    base = in_process(engines, mix, min(len(mix), per_level))
    pair = paired(srv, engines, mix, min(len(mix), per_level))
    result["paired_at_1"] = pair
    print(f"one client, each call over HTTP then in process: p50 {pair['http_p50_ms']} ms against "
          f"{pair['inprocess_p50_ms']} ms", flush=True)
    for c in levels:
        lvl = asyncio.run(run_level(srv, mix, c, per_level))
        lvl["inprocess_p50_ms"] = pair["inprocess_p50_ms"] if c == 1 else base["p50_ms"]
        if c == 1:
            lvl["paired_http_p50_ms"] = pair["http_p50_ms"]  # the same calls, not streamed, beside in-process
        result["levels"][str(c)] = lvl
        print(f"clients {c:>3}: {lvl['qps']:.1f} req/s, p50 {lvl['p50_ms']:.1f} ms (in process "
              f"{base['p50_ms']:.1f}), p99 {lvl['p99_ms']:.1f} ms, errors {lvl['errors']}, first event "
              f"{lvl['first_event_ms']} ms, RSS +{lvl['rss_growth_mb']} MB", flush=True)
    result["inprocess"] = base
    if rss_requests:
        r0 = srv.rss_mb()
        run = asyncio.run(run_level(srv, mix, 8, rss_requests))
        result["rss"] = {"requests": rss_requests, "start_mb": round(r0, 1), "end_mb": round(srv.rss_mb(), 1),
                         "growth_mb": run["rss_growth_mb"], "errors": run["errors"], "qps": run["qps"]}
        print(f"RSS over {rss_requests:,} requests: {r0:.0f} -> {srv.rss_mb():.0f} MB", flush=True)


def draw_phase(result: dict[str, Any], args: argparse.Namespace, srv: Server, star_kg: str, hub: int, star_n: int,
               demo_kg: str) -> None:
    """The explorer's draw time (and the libraries compared, the screenshot) in headless Chromium."""
    d = chromium()
    if d is None:
        print("no chromium / chromedriver: the draw time is not measured", flush=True)
        result["draw_5000_ms"] = None
    else:
        try:
            draw = explorer_draw(d, srv, star_kg, hub, 1 if args.smoke else 3)
            result["draw"] = draw
            result["draw_5000_ms"] = draw["draw_ms"] if star_n == 5_000 else None
            print(f"explorer: {draw['nodes']:,} nodes drawn in {draw['draw_ms']} ms (every page), zoom frame "
                  f"{draw['zoom_frame_ms']} ms", flush=True)
            if args.compare_draw:
                result["draw_compare"] = compare_draw(d, star_n, 3)
                print(f"draw compare: {result['draw_compare']}", flush=True)
            if args.screenshot and not args.smoke:
                screenshot(d, srv, demo_kg, args.screenshot)
                print(f"screenshot: {args.screenshot}", flush=True)
        finally:
            d.quit()


def targets(result: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets beside the figures of this run."""
    lv = result["levels"]
    pair = result["paired_at_1"]
    checks: dict[str, Any] = {"p50_ratio_at_1": round(pair["http_p50_ms"] / pair["inprocess_p50_ms"], 3)}
    if "8" in lv:
        checks["qps_8_over_1"] = round(lv["8"]["qps"] / lv["1"]["qps"], 2)
    if "64" in lv:
        checks["errors_at_64"] = lv["64"]["errors"]
    if "rss" in result:
        checks["rss_growth_mb"] = result["rss"]["growth_mb"]
    if lv["1"].get("first_event_share") is not None:
        checks["first_event_share"] = lv["1"]["first_event_share"]
    return {k: {"value": v, "target": TARGETS[k]} for k, v in checks.items()}


# -- the run --------------------------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="levels 1 and 8 on the demo KG")
    ap.add_argument("--levels", default=None, help="comma list of concurrencies (default 1,8,32,64)")
    ap.add_argument("--requests", type=int, default=None, help="requests per level (default 400; quick 200)")
    ap.add_argument("--rss-requests", type=int, default=None, help="requests of the RSS run (default 10000)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--star", type=int, default=None, help="neighbours of the drawn entity (default 5000)")
    ap.add_argument("--compare-draw", action="store_true", help="Cytoscape.js vs sigma.js on the same graph")
    ap.add_argument("--screenshot", type=Path, help="save the explorer after a demo question here (PNG)")
    ap.add_argument("--metaqa", type=Path, default=METAQA, help=f"MetaQA's folder (kb.txt, N-hop/qa_dev.txt; default "
                                                                 f"{METAQA}); missing: the demo KG alone")
    ap.add_argument("--metaqa-per-hop", type=int, default=200)
    ap.add_argument("--drop", action="store_true", help="drop the benchmark's KGs at the end")
    args = parse_args(ap, {"levels": "1,8", "requests": 20, "rss_requests": 0, "star": 200})
    quick, smoke = args.quick, args.smoke
    levels = [int(x) for x in (args.levels or ("1,8" if quick or smoke else "1,8,32,64")).split(",")]
    per_level = args.requests or (20 if smoke else 200 if quick else 400)
    rss_requests = args.rss_requests if args.rss_requests is not None else (0 if quick or smoke else 10_000)
    star_n = args.star or (200 if smoke else 5_000)
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at start", flush=True)

    neo, mil = start_servers()
    from engine.embeddings import load_embedder

    embedder = load_embedder()
    tmp = Path(tempfile.mkdtemp(prefix="isorag-bench-serve-"))
    demo_kg = unique("bench_serve_smoke") if smoke else "bench_serve_demo"
    engines = {demo_kg: engine_for(demo_kg, neo, mil, embedder)}
    if smoke:
        films = tmp / "films.txt"
        films.write_text("Heat|directed_by|Michael Mann\nCollateral|directed_by|Michael Mann\n"
                         "Heat|starred_actors|Al Pacino\nScarface|starred_actors|Al Pacino\n")
        engines[demo_kg].load(films, progress=False)
        work = {"demo_gold_retrieve": [{"pattern": {"triples": [["UNKNOWN 1", "directed_by", "Michael Mann"]]}},
                                       {"pattern": {"triples": [["UNKNOWN 1", "starred_actors", "Al Pacino"]]}}]}
    else:
        ensure_demo(engines[demo_kg])
        work = demo_workloads()
    mix = [(demo_kg, kind, body) for i in range(max(len(v) for v in work.values()))
           for kind, bodies in work.items() for body in bodies[i:i + 1]]
    if not (quick or smoke) and not (args.metaqa / "kb.txt").exists():
        print(f"no MetaQA at {args.metaqa} (--metaqa DIR): the demo KG alone", flush=True)
    if not (quick or smoke) and (args.metaqa / "kb.txt").exists():
        mq = "bench_serve_metaqa"
        engines[mq] = engine_for(mq, neo, mil, embedder)
        ensure_metaqa(engines[mq], args.metaqa)
        mq_work = metaqa_workload(args.metaqa, args.metaqa_per_hop)
        mix = interleave(mix, [(mq, "metaqa_gold_retrieve", b) for b in mq_work])
    star = engine_for(unique("bench_serve_star"), neo, mil, embedder)
    hub = star_kg(star, star_n, tmp)

    srv = Server(args.workers, tmp, [*engines, star.kg])
    result: dict[str, Any] = {"workers": args.workers, "mix": sorted({k for _, k, _ in mix}), "levels": {}}
    try:
        measure(result, srv, engines, mix, levels, per_level, rss_requests)
        draw_phase(result, args, srv, star.kg, hub, star_n, demo_kg)
    finally:
        srv.stop()
        star.drop()
        if smoke or args.drop:
            for e in engines.values():
                e.drop()
        for e in [*engines.values(), star]:
            e.close()
        shutil.rmtree(tmp, ignore_errors=True)
    result["targets"] = targets(result)
    end = os.getloadavg()
    result["load_average"] = {"start": [round(x, 2) for x in load], "end": [round(x, 2) for x in end]}
    emit("serve_smoke" if smoke else "serve_quick" if quick else "serve", result)


if __name__ == "__main__":
    main()
