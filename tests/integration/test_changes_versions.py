"""Versions a reader can trust, on the real Neo4j and Milvus: a process that reads the KG in a loop while another
applies change sets never keeps what it read before a change under a version stamp from after it. After an apply
returns, the reader's next answer and its caches (the scorer's entity vectors, the retriever's candidates from
Milvus) hold the new names and vectors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from engine.changes.ops import SetEntity
from engine.stores.graph import entity_id

from helpers import ROOT

N = 60

READER = r'''
import json, sys, time
from pathlib import Path
from engine import Engine
from engine._config import EngineConfig

kg, folder, n = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
from engine.stores.graph import entity_id
eids = [entity_id(kg, f"p{i}") for i in range(n)]
with Engine(EngineConfig.from_env().with_(kg=kg), llm=False) as eng:
    feats = eng.scorer_features
    rounds = 0
    while True:
        go = folder / "go"
        last = go.exists()
        eng.retrieve({"triples": [["hub", "member", "UNKNOWN person 1"]]}, k=1)
        feats.check_version()  # as the scorer does before it reads vectors
        vecs, ok = feats.entity_vectors(eids)
        rounds += 1
        (folder / "ready").touch()
        if last:
            probe = go.read_text(encoding="utf-8")
            found = eng.retrieve({"triples": [[probe, "member_of", "UNKNOWN group 1"]]}, k=1, k_node=1)
            out = {"rounds": rounds, "vectors": vecs.tolist(), "ok": ok.tolist(),
                   "probe": [[e.name for e in s.mapping.values()] for s in found.subgraphs],
                   "version": found.kg_version}
            (folder / "out.json").write_text(json.dumps(out), encoding="utf-8")
            break
'''


def text(i: int, round_: int) -> tuple[str, str | None]:
    return (f"person {i}", None) if round_ == 0 else (f"renamed {round_} member {i}", f"member number {i}")


def test_a_reader_in_another_process_holds_the_new_names_and_vectors(make_engine: Any, tmp_path: Path,
                                                                     neo4j_uri: str, milvus_uri: str) -> None:
    writer = make_engine(llm=False)
    kb = tmp_path / "kb.txt"
    kb.write_text("".join(f"hub|member|p{i}\np{i}|member_of|hub\n" for i in range(N)), encoding="utf-8")
    writer.load(kb, progress=False)
    writer.apply([SetEntity(f"p{i}", name=text(i, 0)[0]) for i in range(N)], progress=False)
    env = {**os.environ, "NEO4J_URI": neo4j_uri, "MILVUS_URI": milvus_uri, "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    for round_ in (1, 2):
        folder = tmp_path / f"round{round_}"
        folder.mkdir()
        script = tmp_path / "reader.py"
        script.write_text(READER, encoding="utf-8")
        with (folder / "stderr").open("w") as err:
            proc = subprocess.Popen([sys.executable, str(script), writer.kg, str(folder), str(N)], cwd=ROOT,
                                    env=env, stderr=err)
        try:
            deadline = time.monotonic() + 120
            while not (folder / "ready").exists():  # the reader has filled its caches once
                assert proc.poll() is None and time.monotonic() < deadline, (folder / "stderr").read_text()[-3000:]
                time.sleep(0.05)
            ops = [SetEntity(f"p{i}", name=text(i, round_)[0], description=text(i, round_)[1]) for i in range(N)]
            rep = writer.apply(ops, progress=False, batch_size=20)  # three batches, each caught up in turn
            assert rep.vectors_upserted == N
            (folder / "go").write_text(": ".join(x for x in text(7, round_) if x), encoding="utf-8")
            assert proc.wait(timeout=120) == 0, (folder / "stderr").read_text(encoding="utf-8")[-3000:]
        finally:
            if proc.poll() is None:
                proc.kill()
        out = json.loads((folder / "out.json").read_text(encoding="utf-8"))
        assert out["rounds"] >= 2 and all(out["ok"])
        want = writer.embedder.encode([": ".join(x for x in text(i, round_) if x) for i in range(N)])
        got = np.asarray(out["vectors"], dtype=np.float32)
        stale = [i for i in range(N) if float(np.linalg.norm(got[i] - want[i])) > 1e-4]
        assert stale == [], f"round {round_}: {len(stale)} of {N} cached vectors are from before the change"
        assert out["probe"] and text(7, round_)[0] in out["probe"][0]  # found by its new name's vector
        assert out["version"] == rep.version
        assert entity_id(writer.kg, "p7") in writer.vectors.get_vectors("entities", [entity_id(writer.kg, "p7")])
