"""Generator files checked as they load: every field, a typed error naming the file and the field (never a KeyError
or a RuntimeError of torch); the bounded text cache the generator embeds question words through."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from engine._errors import CheckpointError
from engine.learned.compose import FEATURES, Composer
from engine.learned.generator import (GeneratorCheckpoint, TemplateClassifier, cached_encode, known_first,
                                      load_generator, question_texts, save_generator, skeleton_index)
from engine.linking.text import LinkModel
from engine.learned.templates import Template


def _data(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    import torch

    torch.manual_seed(0)
    tpls = [Template((("T1", "directed_by", "U1"),)), Template((("U1", "starred_actors", "T1"),))]
    model = TemplateClassifier(8, 2, buckets=64, hidden=4, shape_buckets=32, skeletons=skeleton_index(tpls))
    vocab = ["who", "directed", "who directed"]
    ckpt = GeneratorCheckpoint("kg_a", "slug", 8, tpls, model,
                               LinkModel(np.ones(9), {"who": 1.0}), 0.42, 7, score=(1.5, 0.5, -0.2), vocab=vocab,
                               vocab_vectors=np.arange(24, dtype=np.float32).reshape(3, 8),
                               composer=Composer(tuple(0.5 * i for i in range(len(FEATURES)))))
    path = save_generator(ckpt, tmp_path / "gen.pt")
    return path, torch.load(path, weights_only=True)


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    import torch

    out = tmp_path / "bad.pt"
    torch.save(data, out)
    return out


def test_the_score_map_round_trips_and_makes_probabilities(tmp_path: Path) -> None:
    path, data = _data(tmp_path)
    back = load_generator(path)
    assert back.score == (1.5, 0.5, -0.2)
    assert back.composer == Composer(tuple(0.5 * i for i in range(len(FEATURES))))
    data["composer"] = None  # a generator without a composer: the classifier's templates alone
    assert load_generator(_write(tmp_path, data)).composer is None
    # sigmoid(1.5 logit 0.9 + 0.5 logit 0.8 - 0.2)
    import math

    z = 1.5 * math.log(9) + 0.5 * math.log(4) - 0.2
    assert back.probability(0.9, 0.8) == pytest.approx(1 / (1 + math.exp(-z)))
    assert back.probability(0.0, 0.8) == 0.0
    back.score = None
    assert back.probability(0.9, 0.8) == pytest.approx(0.72)
    assert back.vocab == ["who", "directed", "who directed"] and back.question_vector == "words"
    assert back.vocab_vectors is not None and back.vocab_vectors.dtype == np.float32
    assert np.array_equal(back.vocab_vectors, np.arange(24, dtype=np.float32).reshape(3, 8))


BREAKS: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("kg", lambda d: d.pop("kg"), r"field 'kg' is missing"),
    ("kg", lambda d: d.update(kg=3), r"field 'kg' must be a KG name, not int"),
    ("emb_dim", lambda d: d.update(emb_dim="8"), r"field 'emb_dim' must be a number"),
    ("emb_dim", lambda d: d.update(emb_dim=0), r"field 'emb_dim' must lie in"),
    ("templates", lambda d: d.update(templates=[]), r"field 'templates' is empty"),
    ("templates", lambda d: d.update(templates={"a": 1}), r"field 'templates' must be a list"),
    ("templates[1]", lambda d: d["templates"][1].update(triples=[["T1", "x"]]), r"field 'templates\[1\]' is not a"),
    ("templates[0]", lambda d: d["templates"][0].pop("triples"), r"field 'templates\[0\]' is not a template"),
    ("relations", lambda d: d.update(relations=["other"]), r"field 'relations' does not list"),
    ("config.templates", lambda d: d["config"].update(templates=5), r"field 'config.templates' is 5"),
    ("config", lambda d: d["config"].update(colour="red"), r"field 'config' has unknown or missing"),
    ("config.skeletons", lambda d: d["config"].update(skeletons=[0, 0]), r"field 'config.skeletons' does not give"),
    ("state_dict.out.weight", lambda d: d["state_dict"].pop("out.weight"), r"field 'state_dict.out.weight' is missing"),
    ("state_dict.proj.bias", lambda d: d["state_dict"].update({"proj.bias": d["state_dict"]["proj.bias"][:2]}),
     r"field 'state_dict.proj.bias' has shape \(2,\), the model needs \(4,\)"),
    ("state_dict.proj.bias", lambda d: d["state_dict"]["proj.bias"].fill_(float("nan")), r"not finite"),
    ("state_dict.extra", lambda d: d["state_dict"].update(extra=d["state_dict"]["proj.bias"]), r"is no weight"),
    ("link", lambda d: d["link"].pop("weights"), r"field 'link' is not a linking model"),
    ("link.weights", lambda d: d["link"].update(weights=[1.0, 2.0]), r"field 'link.weights' must be 9 finite"),
    ("threshold", lambda d: d.update(threshold=1.5), r"field 'threshold' must lie in \[0.0, "),
    ("threshold", lambda d: d.update(threshold=None), r"field 'threshold' must be a number, not NoneType"),
    ("seed", lambda d: d.pop("seed"), r"field 'seed' is missing"),
    ("score", lambda d: d.update(score=[1.0, "x", 2.0]), r"field 'score' must be three finite numbers"),
    ("info", lambda d: d.update(info=[1]), r"field 'info' must be a mapping"),
    ("question_vector", lambda d: d.pop("question_vector"), r"field 'question_vector' is missing"),
    ("question_vector", lambda d: d.update(question_vector="tokens"),
     r"field 'question_vector' must be one of words, sentence, not 'tokens'"),
    ("vocab", lambda d: d.pop("vocab"), r"field 'vocab' is missing"),
    ("vocab", lambda d: d.update(vocab=["who", 3, "x"]), r"field 'vocab' must hold distinct texts"),
    ("vocab", lambda d: d.update(vocab=["who", "who", "x"]), r"field 'vocab' must hold distinct texts"),
    ("vocab_vectors", lambda d: d.update(vocab_vectors=d["vocab_vectors"][:2]),
     r"field 'vocab_vectors' has shape \(2, 8\), the vocabulary needs \(3, 8\)"),
    ("vocab_vectors", lambda d: d.update(vocab_vectors=[[0.0] * 8] * 3), r"field 'vocab_vectors' must be a tensor"),
    ("vocab_vectors", lambda d: d["vocab_vectors"].fill_(float("inf")), r"not finite"),
    ("composer", lambda d: d.pop("composer"), r"field 'composer' is missing"),
    ("composer", lambda d: d.update(composer=[1.0]), r"field 'composer' must be a mapping or null, not list"),
    ("composer", lambda d: d["composer"].update(features=["named"]), r"field 'composer' is not a path composer"),
    ("composer", lambda d: d["composer"].update(weights=[float("inf")] * 13), r"field 'composer' is not a path"),
]


@pytest.mark.parametrize("field,damage,message", BREAKS, ids=[f"{b[0]}-{i}" for i, b in enumerate(BREAKS)])
def test_each_damaged_field_is_named(tmp_path: Path, field: str, damage: Callable[[dict[str, Any]], None],
                                     message: str) -> None:
    _, data = _data(tmp_path)
    damage(data)
    bad = _write(tmp_path, data)
    with pytest.raises(CheckpointError, match=message) as got:
        load_generator(bad)
    assert str(bad) in str(got.value) and "train the generator again" in str(got.value)


def test_an_older_format_says_so(tmp_path: Path) -> None:
    _, data = _data(tmp_path)
    for old in ("isorag-generator/1", "isorag-generator/2"):  # /2: before the path composer
        data["format"] = old
        with pytest.raises(CheckpointError, match=rf"field 'format' is '{old}'.*older generator"):
            load_generator(_write(tmp_path, data))
    with pytest.raises(CheckpointError, match=r"field 'format' is None"):
        load_generator(_write(tmp_path, {"no": "format"}))


class EncodeCache(RuleBasedStateMachine):
    """``cached_encode`` against a plain dict: the same vectors as the encoder, never more than its size kept, and
    the encoder called only for texts the cache lost or never had."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.size = 4

        def encode(texts: list[str]) -> np.ndarray:
            self.calls.extend(texts)
            return np.array([[float(len(t)), float(sum(map(ord, t)))] for t in texts], dtype=np.float32)

        self.encode = encode
        self.cached = cached_encode(encode, size=self.size)
        self.model: list[str] = []  # texts in the cache, least recently added first

    @rule(texts=st.lists(st.sampled_from(["a", "bb", "ccc", "dd", "e", "ffff", "g"]), min_size=1, max_size=6))
    def encode_some(self, texts: list[str]) -> None:
        before = len(self.calls)
        got = self.cached(texts)
        want = np.array([[float(len(t)), float(sum(map(ord, t)))] for t in texts], dtype=np.float32)
        assert np.array_equal(got, want)
        missing = [t for t in dict.fromkeys(texts) if t not in self.model]
        assert self.calls[before:before + len(missing)] == missing
        for t in missing:
            self.model.append(t)
            if len(self.model) > self.size:
                self.model.pop(0)

    @invariant()
    def bounded(self) -> None:
        assert len(self.model) <= self.size


TestEncodeCache = EncodeCache.TestCase
TestEncodeCache.settings = settings(max_examples=60, stateful_step_count=20, deadline=None)


def test_known_texts_are_taken_from_the_vocabulary_and_only_the_others_embedded() -> None:
    calls: list[list[str]] = []

    def encode(texts: list[str]) -> np.ndarray:
        calls.append(list(texts))
        return np.full((len(texts), 2), 9.0, dtype=np.float32)

    vocab_vectors = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    run = known_first(encode, ["who", "directed"], vocab_vectors)
    got = run(["directed", "who", "directed"])
    assert calls == [] and np.array_equal(got, vocab_vectors[[1, 0, 1]])
    got = run(["who", "whom", "whom"])
    assert calls == [["whom"]] and np.array_equal(got, np.array([[1, 0], [9, 9], [9, 9]], dtype=np.float32))
    assert run([]).shape == (0, 2) and calls == [["whom"]]
    assert known_first(encode, [], None) is encode


def test_the_vocabulary_is_the_training_questions_words_and_pairs_most_frequent_first() -> None:
    masked = ["who directed X", "who directed X 's sequel", "which film director made X"]
    texts = question_texts(masked)
    assert texts[:2] == ["who", "directed"]  # in two questions each
    assert {"'s", "sequel", "film director", "director made", "which", "made"} <= set(texts)
    assert "x" not in texts and len(texts) == len(set(texts))
    assert question_texts(masked, cap=3) == texts[:3]
