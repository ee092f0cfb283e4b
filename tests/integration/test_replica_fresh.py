"""Freshness of the in-process graph read replica (engine.retrieval.replica): a replica of an older KG version is never
used. Two processes (one applies change sets, the other asks), and a model-based test of the replica cache against a
plain-Python model of the KG through change sets, process restarts (the replica loaded from its file) and lost files.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from engine.changes.ops import AddTriple, RemoveTriple
from engine.retrieval.replica import drop_replica_files, forget_replica, replica_dir
from loaders._model import TripleRecord
from loaders.bulk import BulkLoader, LoadSummary

from helpers.kg import unique_kg

pytestmark = pytest.mark.long  # minutes of work: `make test` deals this file out first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]

#: the writer: change set i replaces (Topic, has_value, V<i-1>) by (Topic, has_value, V<i>), then records i. After
#: every QUIET-th it waits (at most 10 s) until the reader had an answer from a replica of that version: a quiet spell
#: in which a rebuild can catch up however loaded the machine is (on CI's a 0.1 s pause alone once let the replica
#: serve 12 answers of 1,000)
QUIET = 10
WRITER = r"""
import os, sys, time
from engine._config import EngineConfig, MilvusSettings, Neo4jSettings
from engine._engine import Engine
from engine.changes.ops import AddTriple, RemoveTriple
kg, neo, mil, out, n, quiet = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
eng = Engine(EngineConfig(kg=kg, neo4j=Neo4jSettings(uri=neo), milvus=MilvusSettings(uri=mil)), llm=False)

def replica_at():
    try:
        with open(out + ".replica") as f:
            return int(f.read() or -1)
    except (OSError, ValueError):
        return -1

for i in range(1, n + 1):
    if os.path.exists(out + ".stop"):
        break
    eng.apply([RemoveTriple("Topic", "has_value", f"V{i - 1}"), AddTriple("Topic", "has_value", f"V{i}")],
              progress=False)
    with open(out + ".tmp", "w") as f:
        f.write(str(i))
    os.replace(out + ".tmp", out)
    time.sleep(0.1)  # a pause, so that some questions come after a rebuild caught up
    end = time.monotonic() + 10
    while i % quiet == 0 and replica_at() < i and time.monotonic() < end and not os.path.exists(out + ".stop"):
        time.sleep(0.02)
eng.close()
"""


def _filler(n: int) -> list[Any]:
    """Triples that make the KG big enough for its replica to take a moment to build."""
    return [TripleRecord(f"Item {i}", "part_of", f"Group {i % 40}", i) for i in range(n)]


def test_two_processes_no_stale_answer(tmp_path: Path, make_engine: Any) -> None:
    """One process applies change sets; this one asks 1,000 times. Before each question it reads how many change
    sets the writer had finished; the answer must be at least that recent (never from a stale replica), and the
    replica never answers with nothing (a replica built from a read that saw a change set's batch in part once did:
    the Topic's relationship removed, its new one not yet there).

    Every QUIET-th change set the writer waits until this process had an answer from a replica of it, so that the
    replica's rebuilds catch up however loaded the machine is (they race a writer that never stops otherwise).

    A Cypher path reads Neo4j while the writer commits, and Neo4j's reads are not snapshots: a statement that runs
    as a batch is applied can see its removal and not yet its addition, and find no answer. That is no answer of
    an older version (it is counted and printed, not failed on); an older value from any path fails the test."""
    eng = make_engine()
    recs = [TripleRecord("Topic", "has_value", "V0", 0)] + _filler(3000)
    BulkLoader(eng.graph, eng.vectors, eng.embedder, progress=False).load_records(recs, LoadSummary())
    done = tmp_path / "done"
    done.write_text("0")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, eng.kg, eng.graph.uri, eng.vectors.uri, str(done), "1000000", str(QUIET)],
        env=env, cwd=ROOT)
    pat = {"triples": [["Topic", "has_value", "UNKNOWN value 1"]]}
    stale, served, seen = 0, {"replica": 0, "statement": 0, "expand": 0}, set()
    empty: dict[str, int] = {}
    wrong: list[str] = []
    try:
        eng.retrieve(pat, k=1, k_node=1, k_rel=1)
        tries = 0
        while tries < 1000 and writer.poll() is None:
            committed = int(done.read_text() or 0)
            res = eng.retrieve(pat, k=1, k_node=1, k_rel=1)
            tries += 1
            value = int(res.answers[0].entity.name[1:]) if res.answers else -1
            seen.add(value)
            via = res.stats["graph_path"]
            served[via] += 1
            if via == "replica" and value >= 0:
                (tmp_path / "done.replica").write_text(str(value))
            if value < 0:
                empty[via] = empty.get(via, 0) + 1
            if (0 <= value < committed) or (value < 0 and via == "replica"):
                stale += 1
                if len(wrong) < 5:
                    wrong.append(f"asked after {committed}: {value} by {via} on {res.kg_version} "
                                 f"(replica {res.stats.get('replica')})")
        assert tries == 1000, f"the writer stopped after {done.read_text()} change sets, {tries} questions asked"
    finally:
        (tmp_path / "done.stop").write_text("")
        writer.wait(timeout=120)
    print(f"served {served}, {len(seen)} distinct answers, {done.read_text()} change sets, no answer {empty}")
    assert stale == 0, wrong
    assert len(seen) >= 5  # the answers moved while it asked
    # both kinds of answer were given: from a fresh replica, and from Cypher while a newer one was built
    assert served["replica"] >= 50 and served["statement"] >= 5, served


def test_a_replica_is_saved_and_a_new_process_loads_it(make_engine: Any) -> None:
    eng = make_engine()
    BulkLoader(eng.graph, eng.vectors, eng.embedder, progress=False).load_records(
        [TripleRecord("Topic", "has_value", "V0", 0)] + _filler(200), LoadSummary())
    pat = {"triples": [["Topic", "has_value", "UNKNOWN value 1"]]}
    first = eng.retrieve(pat, k=1, k_node=1, k_rel=1, graph="replica")
    assert first.stats["replica"]["from"] == "neo4j" and list(replica_dir(eng.kg).glob("*.npz"))
    forget_replica(eng.graph)  # as a new process would start
    again = eng.retrieve(pat, k=1, k_node=1, k_rel=1, graph="replica")
    assert again.stats["replica"]["from"] == "file" and again.answers[0].entity.name == "V0"
    eng.apply([RemoveTriple("Topic", "has_value", "V0"), AddTriple("Topic", "has_value", "V1")], progress=False)
    after = eng.retrieve(pat, k=1, k_node=1, k_rel=1, graph="replica")
    assert after.stats["replica"]["from"] == "neo4j" and after.answers[0].entity.name == "V1"
    # the older version's file went (the table of name vectors kept beside a replica has a file of its own)
    assert len([p for p in replica_dir(eng.kg).glob("*.npz") if ".names." not in p.name]) == 1
    eng.drop()
    assert not replica_dir(eng.kg).exists()


def test_the_memory_guard_sends_queries_to_one_statement(make_engine: Any) -> None:
    eng = make_engine(graph_cache_mb=0)
    BulkLoader(eng.graph, eng.vectors, eng.embedder, progress=False).load_records(
        [TripleRecord("Topic", "has_value", "V0", 0)], LoadSummary())
    res = eng.retrieve({"triples": [["Topic", "has_value", "UNKNOWN value 1"]]}, k=1, graph="replica")
    assert res.stats["graph_path"] == "statement" and res.stats["replica"] == {"state": "off"}
    import engine.retrieval.replica as replica

    small = make_engine(kg=eng.kg, graph_cache_mb=1)
    saved = replica.EST_RELATIONSHIP_BYTES
    replica.EST_RELATIONSHIP_BYTES = 2**21  # one relationship estimated over 1 MB
    try:
        res = small.retrieve({"triples": [["Topic", "has_value", "UNKNOWN value 1"]]}, k=1, graph="replica")
    finally:
        replica.EST_RELATIONSHIP_BYTES = saved
    assert res.stats["graph_path"] == "statement" and res.stats["replica"]["state"] == "too large"
    assert res.answers[0].entity.name == "V0"


# ---------------------------------------------------------------------------------------------------------------
# model-based: the replica cache against a plain-Python model of the KG
# ---------------------------------------------------------------------------------------------------------------
PEOPLE = ["Alice Moreau", "Bruno Keller", "Chiara Rossi", "Dmitri Volkov", "Esther Cohen", "Farid Haddad"]
RELATIONS = ["mentor of", "sibling of", "employer of"]


class ReplicaCache(RuleBasedStateMachine):
    """Random change sets, process restarts (the replica forgotten: loaded from its file) and lost files (built from
    Neo4j again); after every step a question through the replica (waiting for a fresh one) answers what the model
    says, and so does the expansion path."""

    eng: Any = None

    @initialize()
    def start(self) -> None:
        eng = self.eng
        self.triples: set[tuple[str, str, str]] = set()
        first = [(PEOPLE[i], RELATIONS[i % len(RELATIONS)], PEOPLE[(i + 1) % len(PEOPLE)]) for i in range(len(PEOPLE))]
        present = {(h, r, t) for h, r, t in eng_triples(eng)}
        ops = [RemoveTriple(h, r, t) for h, r, t in sorted(present - set(first))]
        ops += [AddTriple(h, r, t) for h, r, t in first if (h, r, t) not in present]
        if ops:
            eng.apply(ops, progress=False)
        self.triples = set(first)

    @rule(h=st.sampled_from(PEOPLE), r=st.sampled_from(RELATIONS), t=st.sampled_from(PEOPLE))
    def add(self, h: str, r: str, t: str) -> None:
        self.eng.apply([AddTriple(h, r, t)], progress=False)
        self.triples.add((h, r, t))

    @precondition(lambda self: len(self.triples) > 2)
    @rule(i=st.integers(0, 10_000))
    def remove(self, i: int) -> None:
        h, r, t = sorted(self.triples)[i % len(self.triples)]
        self.eng.apply([RemoveTriple(h, r, t)], progress=False)
        self.triples.discard((h, r, t))

    @rule()
    def restart(self) -> None:
        forget_replica(self.eng.graph)

    @rule()
    def lose_files(self) -> None:
        drop_replica_files(self.eng.graph)

    @invariant()
    def answers_follow_the_model(self) -> None:
        if not hasattr(self, "triples"):
            return
        used = {r for _, r, _ in self.triples}
        linked = {x for h, _, t in self.triples for x in (h, t)}
        # a relation no triple uses any more leaves the catalog (its text then names the nearest other relation),
        # and an entity without triples may leave the KG: only what the model still has is asked about
        for who in [p for p in PEOPLE[:3] if p in linked]:
            for rel in [r for r in RELATIONS if r in used]:
                want = {t for h, r, t in self.triples if h == who and r == rel}
                want |= {h for h, r, t in self.triples if t == who and r == rel}
                pat = {"triples": [[who, rel, "UNKNOWN person 1"]]}
                for path in ("replica", "expand"):
                    res = self.eng.retrieve(pat, k=50, k_node=1, k_rel=1, injective="none", graph=path)
                    assert res.stats["graph_path"] == path
                    got = {s.mapping["UNKNOWN person 1"].name for s in res.subgraphs}
                    assert got == want, (path, who, rel, got, want)


def eng_triples(eng: Any) -> list[tuple[str, str, str]]:
    from helpers.kg import kg_triples

    return kg_triples(eng, relation="name")


@pytest.fixture(scope="module")
def model_kg(neo4j_uri: str, milvus_uri: str, embedder: Any) -> Any:
    from engine._config import EngineConfig, MilvusSettings, Neo4jSettings
    from engine._engine import Engine

    eng = Engine(EngineConfig(kg=unique_kg("fresh"), neo4j=Neo4jSettings(uri=neo4j_uri),
                              milvus=MilvusSettings(uri=milvus_uri)), embedder=embedder, llm=False)
    recs = [TripleRecord(PEOPLE[i], RELATIONS[i % len(RELATIONS)], PEOPLE[(i + 1) % len(PEOPLE)], i)
            for i in range(len(PEOPLE))]
    BulkLoader(eng.graph, eng.vectors, embedder, progress=False).load_records(recs, LoadSummary())
    yield eng
    eng.drop()
    eng.close()


def test_replica_cache_follows_the_model(model_kg: Any) -> None:
    ReplicaCache.eng = model_kg
    run = ReplicaCache.TestCase
    run.settings = settings(max_examples=8, stateful_step_count=8, deadline=None,
                            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    run().runTest()
    time.sleep(0)
