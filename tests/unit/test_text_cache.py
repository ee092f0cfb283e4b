"""The Retriever's cache of pattern-text embeddings under concurrent queries."""

from __future__ import annotations

import hashlib
import random
import threading
from typing import Any, Sequence

import numpy as np

from engine._config import MatchSettings
from engine.retrieval.retriever import TEXT_CACHE_SIZE, Retriever


class HashEmbedder:
    """Deterministic vectors from each text's digest: the cache must hand back exactly these."""

    def encode(self, texts: Sequence[str]) -> Any:
        return np.stack([np.frombuffer(hashlib.sha256(t.encode()).digest(), dtype=np.uint8).astype("float32")
                         for t in texts])


def test_default_size() -> None:
    r = Retriever(None, None, HashEmbedder(), MatchSettings())
    assert r.text_cache_size == TEXT_CACHE_SIZE == 50_000
    assert r.encode([]) is None


def test_least_recently_used_goes_first() -> None:
    r = Retriever(None, None, HashEmbedder(), MatchSettings(), text_cache_size=2)
    r.encode(["a", "b"])
    r.encode(["a"])  # a is now more recent than b
    r.encode(["c"])
    assert list(r._text_cache) == ["a", "c"]


def test_eight_threads_with_constant_eviction() -> None:
    """Past the limit one thread evicts while others read (it used to clear the dict: KeyError)."""
    emb = HashEmbedder()
    r = Retriever(None, None, emb, MatchSettings(), text_cache_size=5)
    vocab = [f"text {i}" for i in range(40)]
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def hammer(seed: int) -> None:
        rng = random.Random(seed)
        start.wait()
        try:
            for _ in range(2_000):
                texts = rng.choices(vocab, k=rng.randint(1, 6))  # repeats within a call included
                got = r.encode(texts)
                assert np.array_equal(got, emb.encode(texts)), texts
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, repr(errors[0])
    assert len(r._text_cache) <= 5
