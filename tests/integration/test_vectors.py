"""Integration tests of engine.stores.vectors.VectorStore on the real local Milvus (no mocks).

Each test uses its own KG name (so its own collections) and drops it at the end.  The local
server (engine.servers.milvus, default home/port) is started if needed and left running.
"""

from __future__ import annotations

import time
import uuid

import numpy as np
import pytest

from engine._errors import ConfigError, SchemaMismatchError, StoreError, StoreUnavailableError
from engine.servers.milvus import LocalMilvus
from engine.stores.vectors import KINDS, VectorStore, collection_name, slug

from helpers.marks import withPackage

DIM = 384


def _unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def milvus_uri() -> str:
    return LocalMilvus().start()


@pytest.fixture
def store(milvus_uri: str):
    vs = VectorStore(milvus_uri, kg=f"t_{uuid.uuid4().hex[:10]}")
    try:
        yield vs
    finally:
        vs.drop()
        vs.close()


def test_names_are_sanitized() -> None:
    assert slug("sentence-transformers/all-MiniLM-L6-v2") == "sentence_transformers_all_MiniLM_L6_v2"
    assert slug("3kg") == "m_3kg"
    name = collection_name("meta_qa", "sentence-transformers/all-MiniLM-L6-v2", "entities")
    assert name == "meta_qa__all_MiniLM_L6_v2__entities"
    with pytest.raises(ConfigError):  # a KG name is never sanitized: it would stop being one-to-one
        collection_name("meta qa", "m", "entities")
    for kind in KINDS:
        n = collection_name("kg", "m", kind)
        assert n[0].isalpha() and all(c.isalnum() or c == "_" for c in n)


def test_upsert_finalize_search_matches_numpy(store: VectorStore) -> None:
    rng = np.random.default_rng(7)
    n = 3000
    x = _unit(rng, n)
    ids = np.arange(100, 100 + n)
    store.ensure_collections()
    store.upsert("entities", ids, x)
    store.finalize("entities")
    assert store.count("entities") == n

    targets = rng.choice(n, size=5, replace=False)
    q = x[targets] + 0.02 * rng.standard_normal((5, DIM)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    res = store.search("entities", q, 10)
    assert len(res) == 5
    by_id = dict(zip(ids.tolist(), x))
    for qi, hits in enumerate(res):
        assert len(hits) == 10
        dists = [d for _, d in hits]
        assert dists == sorted(dists)
        # the nearest neighbour is the perturbed stored vector
        assert hits[0][0] == int(ids[targets[qi]])
        brute = np.linalg.norm(x - q[qi], axis=1)
        assert hits[0][1] == pytest.approx(float(brute.min()), abs=1e-4)
        for pk, d in hits:
            assert d == pytest.approx(float(np.linalg.norm(by_id[pk] - q[qi])), abs=1e-4)

    # a single 1-d query vector is accepted; limit 0 gives nothing
    one = store.search("entities", q[0], 3)
    assert len(one) == 1 and one[0][0][0] == int(ids[targets[0]])
    assert store.search("entities", q[:2], 0) == [[], []]


def test_upsert_is_idempotent_by_pk(store: VectorStore) -> None:
    rng = np.random.default_rng(11)
    x = _unit(rng, 1500)
    store.ensure_collections()
    store.upsert("entities", range(1500), x)
    store.upsert("entities", range(1500), x)
    assert store.count("entities") == 1500
    # replacing part of the rows with new vectors keeps the count and changes the vectors
    y = _unit(rng, 500)
    store.upsert("entities", range(1000, 1500), y)
    store.upsert("entities", [7, 7], np.stack([y[0], y[1]]))  # a pk twice in one call: last wins
    assert store.count("entities") == 1500
    # half old, half new pks in one call
    z = _unit(rng, 200)
    store.upsert("entities", range(1400, 1600), z)
    assert store.count("entities") == 1600
    np.testing.assert_allclose(store.get_vectors("entities", [1450])[1450], z[50], atol=1e-6)
    store.upsert("entities", range(1500, 1600), y[:100])  # restore 1500.. for the checks below
    store.upsert("entities", range(1400, 1500), y[400:500])
    got = store.get_vectors("entities", [0, 7, 1000, 1499])
    np.testing.assert_allclose(got[0], x[0], atol=1e-6)
    np.testing.assert_allclose(got[7], y[1], atol=1e-6)
    np.testing.assert_allclose(got[1000], y[0], atol=1e-6)
    np.testing.assert_allclose(got[1499], y[499], atol=1e-6)
    assert store.count("entities") == 1600
    store.finalize("entities")
    hit = store.search("entities", y[10], 1)[0][0]
    assert hit[0] == 1010 and hit[1] == pytest.approx(0.0, abs=1e-3)
    store.finalize("entities")  # safe to call again


def test_existing_ids(store: VectorStore) -> None:
    rng = np.random.default_rng(3)
    store.ensure_collections()
    assert store.existing_ids("entities", [1, 2, 3]) == set()
    store.upsert("entities", range(0, 200, 2), _unit(rng, 100))
    assert store.existing_ids("entities", range(10)) == {0, 2, 4, 6, 8}
    assert store.existing_ids("entities", []) == set()
    # a second store on the same collections (a resumed load) sees the same rows
    other = VectorStore(store.uri, kg=store.kg)
    try:
        assert other.existing_ids("entities", [198, 199, 200]) == {198}
    finally:
        other.close()


def test_rows_another_store_wrote_after_the_load_are_upserted_not_stored_twice(store: VectorStore) -> None:
    """The store that created a collection trusts its own record of the pks written only until the load that made
    it is finalized: after that another process (here another store) writes rows it never saw, and inserting such a
    pk again stored it twice, after which Milvus 2.3 returned fewer rows than asked for (other pks of the same query
    too: a change set killed and resumed lost entity vectors so)."""
    rng = np.random.default_rng(17)
    store.upsert("entities", range(100), _unit(rng, 100))
    store.finalize()  # the end of the load
    with VectorStore(store.uri, kg=store.kg) as other:  # e.g. a change set applied by another process
        other.upsert("entities", range(100, 110), _unit(rng, 10))
    assert store.existing_ids("entities", [99, 100, 109, 110]) == {99, 100, 109}
    new = _unit(rng, 10)
    store.upsert("entities", range(100, 110), new)  # the same pks again, from the first store
    assert store.count("entities") == 110 and store.excess_rows("entities") == 0
    got = store.get_vectors("entities", range(110))
    assert sorted(got) == list(range(110))
    np.testing.assert_allclose(np.stack([got[i] for i in range(100, 110)]), new, atol=1e-6)


def test_a_collection_a_read_loaded_is_not_trusted_after_the_writer_ends(store: VectorStore) -> None:
    """The same when the store made a collection that a read loaded before the writer ended (a change set that made
    the alias collection and read it in its catch-up): ``ensure_ready``, its end, finalizes nothing there but drops
    the record all the same."""
    rng = np.random.default_rng(19)
    store.upsert("entities", range(20), _unit(rng, 20))
    assert len(store.get_vectors("entities", [0])) == 1  # loads the collection (an index made on first use)
    store.ensure_ready()
    with VectorStore(store.uri, kg=store.kg) as other:
        other.upsert("entities", [20, 21], _unit(rng, 2))
    store.upsert("entities", [20, 21], _unit(rng, 2))
    assert store.count("entities") == 22 and store.excess_rows("entities") == 0
    assert sorted(store.get_vectors("entities", range(22))) == list(range(22))


def test_get_vectors(store: VectorStore) -> None:
    rng = np.random.default_rng(5)
    x = _unit(rng, 300)
    store.upsert("entities", range(300), x)
    got = store.get_vectors("entities", [5, 299, 10_000])
    assert set(got) == {5, 299}
    assert got[5].dtype == np.float32 and got[5].shape == (DIM,)
    np.testing.assert_allclose(got[5], x[5], atol=1e-6)
    np.testing.assert_allclose(got[299], x[299], atol=1e-6)


def test_relations_and_types_carry_names(store: VectorStore) -> None:
    rng = np.random.default_rng(9)
    r = _unit(rng, 40)
    t = _unit(rng, 12)
    store.ensure_collections()
    store.upsert("relations", range(40), r, [f"rel_{i}" for i in range(40)])
    store.upsert("types", range(12), t, [f"type {i}" for i in range(12)])
    store.finalize()
    res = store.search_names("relations", r[[3, 17]], 4)
    assert [h[0][:2] for h in res] == [(3, "rel_3"), (17, "rel_17")]
    assert res[0][0][2] == pytest.approx(0.0, abs=1e-3)
    assert all(len(h) == 4 for h in res)
    res_t = store.search_names("types", t[5], 2)
    assert res_t[0][0][:2] == (5, "type 5")
    with pytest.raises(ValueError):
        store.upsert("relations", [1], r[:1])  # names are required
    assert store.count("types") == 12


def test_dimension_mismatch_is_reported(store: VectorStore) -> None:
    store.ensure_collections()
    other = VectorStore(store.uri, kg=store.kg, dim=64)
    try:
        with pytest.raises(SchemaMismatchError) as info:
            other.ensure_collections()
        msg = str(info.value)
        assert store.names["entities"] in msg and "384" in msg and "64" in msg
    finally:
        other.close()


def test_missing_collection_is_a_store_error(milvus_uri: str) -> None:
    vs = VectorStore(milvus_uri, kg=f"t_{uuid.uuid4().hex[:10]}")
    try:
        assert vs.count("entities") == 0
        assert vs.existing_ids("entities", [1]) == set()
        with pytest.raises(StoreError):
            vs.search("entities", np.zeros(DIM, dtype=np.float32), 3)
        with pytest.raises(ValueError):
            vs.search("nodes", np.zeros(DIM, dtype=np.float32), 3)
    finally:
        vs.drop()
        vs.close()


def test_unreachable_server_fails_fast() -> None:
    t0 = time.monotonic()
    with pytest.raises(StoreUnavailableError) as info:
        VectorStore("http://127.0.0.1:1", timeout=2)
    assert time.monotonic() - t0 < 8
    assert "127.0.0.1:1" in str(info.value)


def test_unreachable_server_default_timeout() -> None:
    t0 = time.monotonic()
    with pytest.raises(StoreUnavailableError):
        VectorStore("http://127.0.0.1:1")
    assert time.monotonic() - t0 < 10


@withPackage("milvus_lite")
def test_milvus_lite_file_uri(tmp_path) -> None:
    rng = np.random.default_rng(13)
    x = _unit(rng, 200)
    vs = VectorStore(str(tmp_path / "vectors.db"), kg="lite")
    try:
        assert vs.lite and vs.index["index_type"] == "FLAT"
        vs.ensure_collections()
        vs.upsert("entities", range(200), x)
        vs.upsert("types", range(3), x[:3], ["a", "b", "c"])
        vs.finalize()
        hits = vs.search("entities", x[[4, 9]], 2)
        assert [h[0][0] for h in hits] == [4, 9]
        assert vs.search_names("types", x[2], 1)[0][0][:2] == (2, "c")
        assert vs.count("entities") == 200
    finally:
        vs.drop()
        vs.close()
