"""isorag synth (ground-truth sampling) and isorag eval (metrics), on a small KG in the real stores."""

from __future__ import annotations

import json
from itertools import permutations
from pathlib import Path

import pytest

from engine.evaluate import (aggregate, answer_f1, answer_recall, hit, hits1_lenient, hits1_strict,
                             plot_breakdown, read_items, triple_prf)
from engine.synth import SHAPES, isomorphism_type, subtree_edges

# a small KG with a few hubs, chains and shared neighbours (names unique)
TRIPLES = [
    ("Alice Moreno", "works for", "Northwind Logistics"), ("Bob Okafor", "works for", "Northwind Logistics"),
    ("Carla Jensen", "works for", "Vega Foods"), ("Dan Ito", "works for", "Vega Foods"),
    ("Northwind Logistics", "is based in", "Port Elmwood"), ("Vega Foods", "is based in", "Lake Ardent"),
    ("Port Elmwood", "lies in", "Corvania"), ("Lake Ardent", "lies in", "Corvania"),
    ("Alice Moreno", "was born in", "Lake Ardent"), ("Bob Okafor", "was born in", "Port Elmwood"),
    ("Carla Jensen", "was born in", "Port Elmwood"), ("Dan Ito", "was born in", "Brightwater"),
    ("Brightwater", "lies in", "Delmora"), ("Alice Moreno", "is married to", "Bob Okafor"),
    ("Vega Foods", "supplies parts to", "Northwind Logistics"), ("Northwind Logistics", "owns", "Vega X200"),
    ("Vega Foods", "owns", "Orbit Kettle"), ("Carla Jensen", "designed", "Orbit Kettle"),
    ("Dan Ito", "designed", "Vega X200"), ("Alice Moreno", "designed", "Orbit Kettle"),
    ("Eve Castillo", "works for", "Northwind Logistics"), ("Eve Castillo", "was born in", "Brightwater"),
    ("Eve Castillo", "designed", "Vega X200"), ("Delmora", "borders", "Corvania"),
]


def brute_answers(sample_rec: dict, triples: list[tuple[str, str, str]]) -> set[str]:
    """Every injective, directed binding of the record's gold pattern, computed in Python."""
    pat = sample_rec["pattern"]["triples"]
    nodes = list(dict.fromkeys(x for h, _, t in pat for x in (h, t)))
    unknown = [n for n in nodes if n.startswith("UNKNOWN")]
    answer = max(unknown, key=lambda n: int(n.split()[-1]))
    ents = sorted({x for h, _, t in triples for x in (h, t)})
    kg = set(triples)
    known = [n for n in nodes if n not in unknown]
    out = set()
    for combo in permutations([e for e in ents if e not in known], len(unknown)):
        bind = dict(zip(unknown, combo))
        bind.update({n: n for n in known})
        if all((bind[h], r, bind[t]) in kg for h, r, t in pat):
            out.add(bind[answer])
    return out


@pytest.fixture
def small_kg(make_engine):
    from loaders._model import Triple
    from loaders.bulk import BulkLoader, LoadSummary

    eng = make_engine(llm=False)
    records = [Triple(h, r, t, i + 1) for i, (h, r, t) in enumerate(TRIPLES)]
    BulkLoader(eng.graph, eng.vectors, eng.embedder, progress=False).load_records(records, LoadSummary(kg=eng.kg))
    return eng


def test_synth_shapes_complete_answers_and_corruptions(small_kg, tmp_path: Path) -> None:
    from engine.synth import Synthesizer, write_jsonl

    syn = Synthesizer(small_kg.graph, seed=3)
    recs = list(syn.generate(30, SHAPES))
    shapes = {r["shape"] for r in recs}
    assert shapes == set(SHAPES), (shapes, syn.dropped)
    expect_iso = {"path1": "(1)", "path2": "(2)", "path3": "(3)", "star": "((1)(1))", "conj2": "(1)(1)",
                  "conj3": "(1)(1)(1)"}
    kg = set(TRIPLES)
    for r in recs:
        assert r["isomorphism"] == expect_iso[r["shape"]]
        assert set(r["answers"]) == brute_answers(r, TRIPLES), r
        assert r["answer"] in r["answers"]
        assert all(tuple(t) in kg for t in r["triples"])
        assert {tuple(t) for t in r["triples"]} <= {tuple(t) for t in r["full_triples"]}
        assert not set(r["seeds"]) & set(r["answers"])
        for c in r["corrupted"]:
            assert c["label"] == "REFUTED" and c["claim"] != r["claim"]
            assert c["pattern"]["triples"] != r["claim_pattern"]["triples"]
            assert tuple(c["pattern"]["triples"][c["swapped"]["triple"]]) not in kg
    assert any(r["corrupted"] for r in recs)
    out = tmp_path / "synth.jsonl"
    write_jsonl(recs, out)
    items = read_items(out)
    assert len(items) == len(recs) and items[0]["pattern"] == recs[0]["pattern"]


def test_redundancy_marked(small_kg) -> None:
    from engine.synth import Synthesizer

    recs = list(Synthesizer(small_kg.graph, seed=1).generate(24, ["conj2", "conj3", "star"]))
    for r in recs:
        if r["redundant"]:
            assert len(r["minimal_seeds"]) < len(r["seeds"]) and r["minimal_isomorphism"]


def test_eval_end_to_end_and_png(small_kg, tmp_path: Path) -> None:
    from engine.evaluate import evaluate
    from engine.synth import Synthesizer, write_jsonl

    recs = list(Synthesizer(small_kg.graph, seed=5).generate(12, SHAPES))
    f = tmp_path / "s.jsonl"
    write_jsonl(recs, f)
    res = evaluate(small_kg, read_items(f), k=3, directed=True)
    s = res["summary"]
    assert s["overall"]["n"] == len(recs)
    assert s["overall"]["hit"] > 0.5  # gold patterns on the KG they came from
    assert s["overall"]["verify_accuracy"] is not None
    png = plot_breakdown(s, tmp_path / "b.png")
    assert png.stat().st_size > 5000


def test_metric_functions_hand_computed() -> None:
    assert hits1_lenient("The answer is Port Elmwood.", ["port elmwood"]) == 1.0
    assert hits1_lenient("Lake Ardent", ["Port Elmwood"]) == 0.0
    assert hits1_strict(["Port  Elmwood", "x"], ["port elmwood"]) == 1.0
    assert hits1_strict(["x", "Port Elmwood"], ["Port Elmwood"]) == 0.0
    assert hit(["x", "Port Elmwood"], ["Port Elmwood"]) == 1.0
    # pred {a, b, c}, gold {a, d}: P = 1/3, R = 1/2, F1 = 2 * (1/6) / (5/6) = 0.4
    assert answer_f1(["a", "b", "c"], ["a", "d"]) == pytest.approx(0.4)
    # retrieved 3 triples (one reversed), GT 2 triples: TP 2 (direction-agnostic), P 2/3, R 1, F1 0.8
    p, r, f1 = triple_prf([("A", "r", "B"), ("C", "s", "B"), ("A", "q", "D")], [("B", "r", "A"), ("C", "s", "B")])
    assert (p, r, f1) == (pytest.approx(2 / 3), 1.0, pytest.approx(0.8))
    assert answer_recall([("A", "r", "B")], ["B", "Z"]) == 0.5
    items = [{"shape": "path1", "hops": 1, "metrics": {"hit": 1.0, "macro_f1": 0.4}},
             {"shape": "path2", "hops": 2, "metrics": {"hit": 0.0, "macro_f1": 1.0}},
             {"shape": "path2", "hops": 2, "metrics": {"hit": 1.0, "macro_f1": 0.0}}]
    agg = aggregate(items)
    assert agg["overall"]["hit"] == pytest.approx(0.6667) and agg["overall"]["macro_f1"] == pytest.approx(0.4667)
    assert agg["by_shape"]["path2"]["hit"] == 0.5 and agg["by_hops"]["1"]["macro_f1"] == 0.4
    assert agg["overall"]["verify_accuracy"] is None


def test_tree_helpers() -> None:
    e = [(1, "T", "a", 0), (0, "T", "b", 2), (0, "T", "c", 3)]
    assert isomorphism_type(4, e, 3) == "((1)(1))"
    assert subtree_edges(4, e, 3, [1]) == [0, 2]
    assert isomorphism_type(4, [(0, "T", "a", 1), (1, "T", "b", 2), (3, "T", "c", 2)], 2) == "(2)(1)"


def test_read_pathquestion_and_metaqa(tmp_path: Path) -> None:
    pq = tmp_path / "PQ-2H.txt"
    pq.write_text("which nationality is x 's couple ?\tunited_kingdom(united_kingdom/uk)\t"
                  "x#spouse#y#nationality#united_kingdom#<end>#united_kingdom\n")
    (it,) = read_items(pq)
    assert it["pattern"]["triples"] == [["x", "spouse", "UNKNOWN 1"], ["UNKNOWN 1", "nationality", "UNKNOWN 2"]]
    assert it["answers"] == ["united_kingdom", "uk"] and it["hops"] == 2
    d = tmp_path / "1-hop"
    d.mkdir()
    (d / "qa_dev.txt").write_text("who directed [Inception]\tChristopher Nolan\n")
    (it,) = read_items(d / "qa_dev.txt")
    assert it["answers"] == ["Christopher Nolan"] and it["hops"] == 1
    json.dumps(it)


def test_synth_is_reproducible_by_seed(small_kg) -> None:
    """The same seed samples the same records (the seed pool is drawn by the seeded generator, not rand())."""
    from engine.synth import Synthesizer

    def sample(seed: int) -> list[tuple]:
        recs = Synthesizer(small_kg.graph, seed=seed).generate(12, SHAPES)
        return [(r["shape"], tuple(r["seeds"]), tuple(sorted(r["answers"])), r["question"]) for r in recs]

    first = sample(11)
    assert len(first) == 12 and sample(11) == first
    assert sample(12) != first
