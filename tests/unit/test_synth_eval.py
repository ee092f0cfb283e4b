"""isorag eval's metrics, hand-computed; the synthesizer's tree helpers; reading PathQuestion and MetaQA files.
Sampling and evaluating on a small KG in the real stores: tests/integration/test_synth_eval.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.evaluation.metrics import (aggregate, answer_f1, answer_recall, hit, hits1_lenient, hits1_strict,
                                       read_items, triple_prf)
from engine.evaluation.synth import isomorphism_type, subtree_edges


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
