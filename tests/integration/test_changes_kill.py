"""A change set killed with -9 midway and run again ends where an uninterrupted run ends: triples, entities (key,
name, description) and vectors compared one by one; the rerun resumes after the batches the killed one committed."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from engine._errors import KGLockedError
from engine.stores.graph import entity_id
from loaders._model import EntityRecord, TripleRecord
from loaders.bulk import BulkLoader, LoadSummary

from helpers import ROOT
from helpers.kg import kg_triples

RELS = ["directed_by", "starred_actors", "written_by", "has_genre", "release_year", "in_language"]
BATCH = 150


def base_records(rng: random.Random) -> tuple[list[Any], list[tuple[str, str, str]]]:
    triples = sorted({(f"n{rng.randrange(500)}", rng.choice(RELS), f"n{rng.randrange(500)}") for _ in range(2500)})
    recs: list[Any] = [EntityRecord(f"n{i}", f"name {i}", (), 0) for i in range(500)]
    return recs + [TripleRecord(h, r, t, 0) for h, r, t in triples], triples


def change_set(rng: random.Random, triples: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    for h, r, t in rng.sample(triples, 1200):
        ops.append({"op": "remove", "head": h, "relation": r, "tail": t})
    for _ in range(2400):  # some to entities that do not exist yet (embedded by the change set)
        ops.append({"op": "add", "head": f"n{rng.randrange(560)}", "relation": rng.choice(RELS + ["produced_by"]),
                    "tail": f"n{rng.randrange(560)}"})
    for i in rng.sample(range(500), 80):
        ops.append({"op": "set", "key": f"n{i}", "name": f"renamed {i}", "description": f"entity number {i}"})
    for i in rng.sample(range(500), 40):
        ops.append({"op": "remove_entity", "key": f"n{i}"})
    for _ in range(30):
        a, b = rng.sample(range(500), 2)
        ops.append({"op": "merge", "source": f"n{a}", "target": f"n{b}"})
    rng.shuffle(ops)
    return ops


def state(eng: Any) -> tuple[Any, ...]:
    g = eng.graph
    ents = g.read("MATCH (n:IsoragEntity {isorag_kg: $kg}) RETURN n.isorag_key AS k, n.isorag_name AS n, "
                  "n.isorag_description AS d", kg=eng.kg)
    rels = sorted(ri.name for ri in g.relation_catalog(refresh=True).values())
    return ({(e["k"], e["n"], e["d"]) for e in ents}, set(kg_triples(eng)), rels)


def vectors_by_key(eng: Any, keys: list[str]) -> dict[str, np.ndarray]:
    got = eng.vectors.get_vectors("entities", [entity_id(eng.kg, k) for k in keys])
    return {k: got[entity_id(eng.kg, k)] for k in keys if entity_id(eng.kg, k) in got}


def test_kill_9_midway_then_rerun_equals_a_clean_run(make_engine: Any, embedder: Any, tmp_path: Path,
                                                     neo4j_uri: str, milvus_uri: str) -> None:
    rng = random.Random(15)
    recs, triples = base_records(rng)
    path = tmp_path / "changes.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in change_set(rng, triples)), encoding="utf-8")
    clean, killed = make_engine(llm=False), make_engine(llm=False)
    for eng in (clean, killed):
        BulkLoader(eng.graph, eng.vectors, embedder, progress=False).load_records(recs, LoadSummary())

    ref = clean.apply(path, progress=False, batch_size=BATCH)
    assert ref.batches >= 20 and ref.removed > 0 and ref.merged > 0 and ref.entities_removed > 0

    env = {**os.environ, "NEO4J_URI": neo4j_uri, "MILVUS_URI": milvus_uri, "ISORAG_LOCK_TTL_S": "3",
           "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "apply", str(path), "--kg", killed.kg,
                             "--batch-size", str(BATCH), "--quiet"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    committed = 0
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            rows = killed.graph.read_named("changes_state", kg=killed.kg)
            committed = int(rows[0]["cs_batches"] or 0) if rows else 0
            if committed >= 4:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the change set ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    mid = state(killed)
    assert mid != state(clean)  # killed midway: not all of it is there

    deadline = time.monotonic() + 30
    while True:
        try:
            rerun = killed.apply(path, progress=False, batch_size=7)  # the batches are cut as the first run cut them
            break
        except KGLockedError:  # the killed run's lease: it runs out after ISORAG_LOCK_TTL_S
            assert time.monotonic() < deadline
            time.sleep(0.5)
    assert rerun.batches_resumed >= committed >= 4 and rerun.version == ref.version
    assert state(killed) == state(clean)
    keys = sorted(k for k, _, _ in state(clean)[0])
    want, got = vectors_by_key(clean, keys), vectors_by_key(killed, keys)
    assert sorted(got) == sorted(want) == keys
    assert all(float(np.abs(got[k] - want[k]).max()) < 1e-5 for k in keys)
    for kind in ("relations", "types"):
        assert killed.vectors.count(kind) == clean.vectors.count(kind)
    assert killed.stats()["agree"] and killed.check(progress=False).ok
    # and a third run of the same change set changes nothing
    third = killed.apply(path, progress=False)
    assert third.already_applied and state(killed) == state(clean)
