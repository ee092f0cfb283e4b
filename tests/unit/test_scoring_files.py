"""The scorer's files and settings without a database: checkpoints and prepared-data caches hold plain data (no
pickled class, so files written before a module move still load), and entity linking's stopwords (the engine's
generic list, the KG's own words from the checkpoint)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from engine import ConfigError
from engine.scoring.checkpoint import FORMAT, LEGACY_EXTRA_STOPWORDS, load_checkpoint, make_model, save_checkpoint
from engine.scoring.neighbourhood import Neighbourhood, NeighbourhoodReport
from engine.scoring.prepared import CACHE_FORMAT, PreparedSet
from engine.scoring.service import STOPWORDS, ScoringService, question_ngrams

# the service's components: these tests only read its stopwords, so none is used
_PARTS = dict(graph=None, vectors=None, embedder=None, features=None, settings=None)

METAQA_WORDS = ("movie", "movies", "film", "films")


def tiny_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return make_model("dde_mlp", 8, hidden=8)


def save(path: Path, **kw) -> Path:
    return save_checkpoint(path, tiny_model(), kg="t", embedding_model="m", embedding_slug="m-slug",
                           relation_types=["r"], hops=2, max_edges=100, **kw)


def test_engine_stopwords_are_generic_english() -> None:
    assert not STOPWORDS & set(METAQA_WORDS)
    assert {"the", "of", "which", "who"} <= STOPWORDS
    q = "what movies did Tom Hanks star in"
    assert "movies" in question_ngrams(q)
    got = question_ngrams(q, stopwords=STOPWORDS | set(METAQA_WORDS))
    assert got == ["Tom Hanks star", "Tom Hanks", "Hanks star", "Tom", "Hanks", "star"]


def test_checkpoint_keeps_the_kgs_stopwords_and_the_service_uses_them(tmp_path: Path) -> None:
    ck = load_checkpoint(save(tmp_path / "a.ckpt", extra_stopwords=["Movie", "films"]))
    assert ck.extra_stopwords == ["films", "movie"]
    svc = ScoringService(ck, **_PARTS)
    assert svc.stopwords == STOPWORDS | {"movie", "films"}
    assert ScoringService(ck, **_PARTS, extra_stopwords=[]).stopwords == STOPWORDS
    assert ScoringService(ck, **_PARTS, extra_stopwords=["Film"]).stopwords == STOPWORDS | {"film"}
    with pytest.raises(ConfigError, match="extra_stopwords"):
        save(tmp_path / "b.ckpt", extra_stopwords="movie")
    # without any: the engine's list alone
    assert ScoringService(load_checkpoint(save(tmp_path / "c.ckpt")), **_PARTS).stopwords == STOPWORDS


def test_checkpoint_from_before_the_stopwords_and_the_module_moves_loads(tmp_path: Path) -> None:
    """A checkpoint written by an earlier version (no ``extra_stopwords`` key, the models then in other modules)
    names its class, never pickles it, so it still loads, and its entity linking is unchanged."""
    model = tiny_model()
    payload = {"format": FORMAT, "model_class": "DDEMLP", "config": model.config,
               "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()}, "kg": "t",
               "embedding_model": "m", "embedding_slug": "m-slug", "emb_dim": 8, "relation_types": ["r"],
               "relation_fingerprint": "x", "hops": 2, "max_edges": 100, "info": {}}
    torch.save(payload, tmp_path / "old.ckpt")
    ck = load_checkpoint(tmp_path / "old.ckpt")
    assert type(ck.model).__name__ == "DDEMLP"
    # it links as it did: with the domain words the engine's stopword list held when it was written
    assert ck.extra_stopwords == sorted(METAQA_WORDS) == sorted(LEGACY_EXTRA_STOPWORDS)
    assert ScoringService(ck, **_PARTS).stopwords == STOPWORDS | set(METAQA_WORDS)
    assert all(torch.equal(ck.model.state_dict()[k], v) for k, v in payload["state_dict"].items())
    # a file written now reads back with weights_only=True: nothing but plain data and tensors in it
    path = save(tmp_path / "new.ckpt", extra_stopwords=["movie"])
    assert torch.load(path, map_location="cpu", weights_only=True)["extra_stopwords"] == ["movie"]


def test_prepared_cache_holds_plain_data_only(tmp_path: Path) -> None:
    n = 4
    nb = Neighbourhood(kg="t", nodes=np.arange(10, 10 + n), heads=np.array([0, 1, 2]), tails=np.array([1, 2, 3]),
                       rels=np.zeros(3, np.int64), relation_types=("r",), anchors=np.array([0]),
                       distance=np.arange(n), nameless=np.zeros(n, bool), report=NeighbourhoodReport(hops=2,
                                                                                                    max_edges=100))
    ex = {"q": 0, "nb": "k", "topic": np.array([0]), "answers": np.array([3]), "n_answers": 1, "n_gold": 1,
          "pos": np.array([0, 1, 2]), "source": "qa.txt:1", "hops": 2, "train_pos": np.array([2])}
    data = PreparedSet({"k": nb}, [ex], ["who [x]"], np.ones((1, 4), np.float32), np.arange(10, 10 + n),
                       np.ones((n, 4), np.float32), np.ones(n, bool), ("r",), np.ones((1, 4), np.float32),
                       meta={"build": {"kg": "t"}}, q_walk_emb=np.zeros((1, 4), np.float32))
    path = data.save(tmp_path / "cache.pt")
    raw = torch.load(path, map_location="cpu", weights_only=True)  # refuses any pickled class
    assert raw["format"] == CACHE_FORMAT
    back = PreparedSet.load(path)
    assert back.meta == data.meta and back.questions == data.questions
    assert back.examples[0]["pos"].tolist() == [0, 1, 2] and "train_pos" not in back.examples[0]
    assert back.neighbourhoods["k"].heads.tolist() == [0, 1, 2] and back.q_walk_emb is not None
