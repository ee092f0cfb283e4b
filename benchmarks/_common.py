"""Helpers shared by the benchmarks: the ``--smoke`` mode, servers, KGs, results, memory.

Every benchmark declares ``--smoke`` the same way, through :func:`parse_args`: a mapping from its options to the
tiny values a smoke run takes (a few questions, a few hundred triples, the bundled demo data, KG names of its own
that are dropped at the end). A smoke run takes under a minute, needs nothing but the servers (a fresh machine:
no KG loaded before, no dataset outside the repository) and ends, as every run does, with its JSON line; its
results file is ``benchmarks/results/<name>.smoke.json``, beside the real run's, never over it. ``make
bench-smoke`` runs every benchmark's smoke mode.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
DEMO = ROOT / "engine" / "data" / "demo"
#: the datasets (MetaQA, PathQuestion): $ISORAG_DATA, else shared/data beside the repository
DATA = Path(os.environ.get("ISORAG_DATA") or ROOT.parent / "shared" / "data")
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

#: whether this run is a smoke run (set by :func:`parse_args`)
SMOKE = False


def parse_args(ap: argparse.ArgumentParser, smoke: Mapping[str, Any], argv: list[str] | None = None
               ) -> argparse.Namespace:
    """The arguments, with ``--smoke`` declared: ``smoke`` maps option names (their ``dest``) to the values a smoke
    run takes; an option given on the command line still wins. A value may be a function of the parsed arguments
    (called after parsing: data a smoke run writes, such as :func:`smoke_metaqa`'s)."""
    global SMOKE
    shown = ", ".join(f"{k}={v}" for k, v in smoke.items() if not callable(v))
    ap.add_argument("--smoke", action="store_true",
                    help=f"a tiny run to check the benchmark works, under a minute ({shown})")
    first, _ = ap.parse_known_args(argv)
    if first.smoke:
        SMOKE = True
        ap.set_defaults(**{k: v for k, v in smoke.items() if not callable(v)})
    args = ap.parse_args(argv)
    if args.smoke:
        for k, v in smoke.items():
            if callable(v) and getattr(args, k) == ap.get_default(k):
                setattr(args, k, v(args))
    return args


def drop_kg(eng: Any) -> None:
    """Drop the engine's KG if it exists (a KG in neither store is no error here: a fresh machine has none)."""
    from engine import KGNotFoundError

    try:
        eng.drop()
    except KGNotFoundError:
        pass


def smoke_dir() -> Path:
    """A folder for what a smoke run writes (its data, its files), removed at exit."""
    import atexit
    import shutil
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="isorag-smoke-"))
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    return d


@functools.lru_cache(maxsize=None)
def smoke_metaqa(per_hop: int = 4, distractors: int = 300) -> Path:
    """A tiny MetaQA folder made from the bundled demo: ``kb.txt`` (the triples on the gold paths of the first
    ``per_hop`` demo questions of each hop, and ``distractors`` more lines of the demo KB) and
    ``{1,2,3}-hop/qa_dev.txt`` with ``qa_dev_qtype.txt`` (those questions). Returns the folder."""
    from engine.datasets.metaqa import relation_path

    out = smoke_dir() / "metaqa"
    lines = (DEMO / "kb.txt").read_text(encoding="utf-8").splitlines()
    by_end: dict[tuple[str, str], list[str]] = {}
    for line in lines:
        h, r, t = line.split("|")
        by_end.setdefault((h, r), []).append(line)
        by_end.setdefault((t, r), []).append(line)
    questions = [json.loads(x) for x in (DEMO / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    keep: dict[str, None] = dict.fromkeys(lines[:distractors])
    for hop in (1, 2, 3):
        chosen = [q for q in questions if q["hops"] == hop][:per_hop]
        folder = out / f"{hop}-hop"
        folder.mkdir(parents=True)
        (folder / "qa_dev.txt").write_text("".join(f"{q['question']}\t{'|'.join(q['answers'])}\n" for q in chosen),
                                           encoding="utf-8")
        (folder / "qa_dev_qtype.txt").write_text("".join(q["qtype"] + "\n" for q in chosen), encoding="utf-8")
        for q in chosen:  # the walk along the question's relation path, every triple on it
            current = {q["topic"]}
            for rel in relation_path(q["qtype"]):
                reached: set[str] = set()
                for e in current:
                    for line in by_end.get((e, rel), []):
                        keep.setdefault(line, None)
                        h, _, t = line.split("|")
                        reached.add(t if h == e else h)
                current = reached - {q["topic"]}
    (out / "kb.txt").write_text("\n".join(keep) + "\n", encoding="utf-8")
    return out


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
    """Write benchmarks/results/<name>.json (a smoke run: <name>.smoke.json) and print the figures as one JSON
    line, last."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    if SMOKE:
        result = {"smoke": True, **result}
    (RESULTS / f"{name}{'.smoke' if SMOKE else ''}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, separators=(",", ":")))


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    i = min(len(s) - 1, max(0, int(round(q / 100.0 * (len(s) - 1)))))
    return s[i]


def smoke_pathquestion(people: int = 24) -> Path:
    """A tiny PathQuestion folder (``{2,3}H-kb.txt``, ``PQ-{2,3}H.txt``) of a made-up world: each person has a
    spouse, who was born in a city, which lies in a country; a question asks the spouse's birthplace (2H) or its
    country (3H), in two wordings. Returns the folder."""
    out = smoke_dir() / "pathquestion"
    out.mkdir()
    cities = [f"city_{c}" for c in "abcdefgh"]
    kb = [f"{c}\tlocated_in\t{'north' if i % 2 else 'south'}_land" for i, c in enumerate(cities)]
    q2, q3 = [], []
    for i in range(people):
        p, spouse, city = f"person_{i}", f"person_{i + 100}", cities[i % len(cities)]
        country = "north_land" if (i % len(cities)) % 2 else "south_land"
        kb += [f"{p}\tspouse\t{spouse}", f"{spouse}\tplace_of_birth\t{city}"]
        walk2 = f"{p}#spouse#{spouse}#place_of_birth#{city}#<end>#{city}"
        walk3 = f"{p}#spouse#{spouse}#place_of_birth#{city}#located_in#{country}#<end>#{country}"
        form2 = ("where was {} 's couple born ?", "what is the place of birth of {} 's spouse ?")[i % 2]
        form3 = ("which country was {} 's couple born in ?", "the land of the birthplace of {} 's spouse ?")[i % 2]
        q2.append(f"{form2.format(p)}\t{city}({city}/)\t{walk2}")
        q3.append(f"{form3.format(p)}\t{country}({country}/)\t{walk3}")
    for hop in ("2H", "3H"):
        (out / f"{hop}-kb.txt").write_text("\n".join(kb) + "\n", encoding="utf-8")
    (out / "PQ-2H.txt").write_text("\n".join(q2) + "\n", encoding="utf-8")
    (out / "PQ-3H.txt").write_text("\n".join(q3) + "\n", encoding="utf-8")
    return out
