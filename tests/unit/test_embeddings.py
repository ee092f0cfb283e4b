"""engine.embeddings: shapes, normalization, determinism, the per-process cache, fidelity of the ONNX backends."""

from __future__ import annotations

import os

import numpy as np
import pytest

from engine._errors import ConfigError
from engine.embeddings import AUTO_CPU_BACKEND, OnnxEmbedder, load_embedder
from engine.embeddings.embedders import _batches
from engine.embeddings.loading import _cuda_available
from engine.embeddings.onnx_build import ensure_build
from engine.embeddings.sources import resolve_source

# Short KB-style names (titles, people, years, tags, relations), like MetaQA's entities.
NAMES = [
    "The Matrix", "The Matrix Reloaded", "Kismet", "Gert Fröbe", "Richard Brooks", "German", "1971", "bd-r",
    "Crouching Tiger, Hidden Dragon", "2001: A Space Odyssey", "Amélie", "Ōkami", "北京", "Blade Runner",
    "Ridley Scott", "Harrison Ford", "directed_by", "starred_actors", "release_year", "has_tags",
    "Pirates of the Caribbean: The Curse of the Black Pearl", "Johnny Depp", "Orlando Bloom", "Keira Knightley",
    "Dr. Strangelove or: How I Learned to Stop Worrying and Love the Bomb", "Stanley Kubrick", "Peter Sellers",
    "The Good, the Bad and the Ugly", "Sergio Leone", "Clint Eastwood", "Ennio Morricone", "Italian", "1966",
    "Spirited Away", "Hayao Miyazaki", "Japanese", "animation", "anime", "Studio Ghibli", "Howl's Moving Castle",
    "Le Fabuleux Destin d'Amélie Poulain", "Jean-Pierre Jeunet", "Audrey Tautou", "French", "2001",
    "The Seventh Seal", "Ingmar Bergman", "Max von Sydow", "Swedish", "chess", "death", "Bergman",
    "Jules and Jim", "François Truffaut", "Jeanne Moreau", "nouvelle vague", "black and white", "imdb top 250",
    "M", "Fritz Lang", "Peter Lorre", "1931", "crime", "thriller", "film noir", "Lang",
    "what films did the director of Blade Runner direct?",
]


@pytest.fixture(scope="module")
def torch_emb():
    return load_embedder(backend="torch")


@pytest.fixture(scope="module")
def onnx_emb():
    return load_embedder(backend="onnx")


@pytest.fixture(scope="module")
def q8_emb():
    return load_embedder(backend="onnx-q8")


@pytest.fixture(scope="module")
def default_emb():
    return load_embedder()


@pytest.fixture(scope="module")
def reference(torch_emb):
    return torch_emb.encode(NAMES)


@pytest.mark.parametrize("which", ["torch", "onnx", "onnx-q8"])
def test_shape_dtype_normalized(which, request):
    emb = request.getfixturevalue({"torch": "torch_emb", "onnx": "onnx_emb", "onnx-q8": "q8_emb"}[which])
    v = emb.encode(NAMES[:7])
    assert v.shape == (7, 384) == (7, emb.dim)
    assert v.dtype == np.float32 and v.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    one = emb.encode_one("The Matrix")
    assert one.shape == (384,) and one.dtype == np.float32
    if which == "onnx-q8":  # dynamic int8: activation scales per batch, so a text's vector depends on its batch
        assert float(one @ v[0]) > 0.98
    else:
        np.testing.assert_allclose(one, v[0], atol=1e-5)
    assert emb.name == "all-MiniLM-L6-v2" and emb.backend == which


@pytest.mark.parametrize("which", ["torch", "onnx"])
def test_empty_input(which, request):
    emb = request.getfixturevalue({"torch": "torch_emb", "onnx": "onnx_emb"}[which])
    v = emb.encode([])
    assert v.shape == (0, 384) and v.dtype == np.float32
    assert emb.encode(iter([])).shape == (0, 384)


def test_deterministic_and_order_independent(onnx_emb):
    a = onnx_emb.encode(NAMES)
    b = onnx_emb.encode(NAMES)
    assert np.array_equal(a, b)
    # Another order and batch size changes the batches (and padding) a text lands in, not its vector.
    rev = onnx_emb.encode(NAMES[::-1], batch_size=3)[::-1]
    np.testing.assert_allclose(rev, a, atol=2e-6)


def test_parallel_batches_match_one_thread(onnx_emb):
    from engine.embeddings import OnnxEmbedder

    texts = [f"{a} {b}" for a in NAMES[:30] for b in ("", "(1999)", "and friends")]
    one = OnnxEmbedder(onnx_emb.build_dir, name="x", slug="x", backend="onnx", threads=1)
    two = OnnxEmbedder(onnx_emb.build_dir, name="x", slug="x", backend="onnx", threads=2)
    intra = OnnxEmbedder(onnx_emb.build_dir, name="x", slug="x", backend="onnx", threads=2, parallel="intra")
    ref = one.encode(texts, batch_size=7)
    np.testing.assert_allclose(two.encode(texts, batch_size=7, progress=True), ref, atol=2e-6)
    np.testing.assert_allclose(two.encode(texts[:3]), ref[:3], atol=2e-6)
    np.testing.assert_allclose(intra.encode(texts), ref, atol=2e-6)


def test_duplicates_and_blank_texts(onnx_emb, torch_emb):
    v = onnx_emb.encode(["Kismet", "", "Kismet", "  "])
    assert np.array_equal(v[0], v[2])
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    t = torch_emb.encode(["Kismet", "", "Kismet", "  "])
    assert (v * t).sum(axis=1).min() > 0.9999


def test_type_errors(onnx_emb):
    with pytest.raises(TypeError):
        onnx_emb.encode("The Matrix")  # a str is a sequence of characters: refuse it
    with pytest.raises(TypeError):
        onnx_emb.encode(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        onnx_emb.encode_one(["The Matrix"])  # type: ignore[arg-type]


def test_cache_same_object(default_emb):
    assert load_embedder() is default_emb
    assert load_embedder("all-MiniLM-L6-v2") is default_emb
    assert load_embedder("sentence-transformers/all-MiniLM-L6-v2", device="auto", backend="auto") is default_emb
    assert load_embedder(backend="torch") is load_embedder(backend="torch")
    assert load_embedder(backend="torch") is not load_embedder(backend="onnx")


def test_auto_backend_and_slugs(default_emb, torch_emb, onnx_emb, q8_emb):
    if _cuda_available():
        assert default_emb.backend == "torch" and default_emb.device.startswith("cuda")
    else:
        assert default_emb.backend == AUTO_CPU_BACKEND
    # fp32 ONNX computes torch's function (cos > 0.9999): same slug; int8 does not: a slug of its own.
    assert torch_emb.slug == onnx_emb.slug == "minilm_l6_v2"
    assert q8_emb.slug == "minilm_l6_v2_onnx_q8"
    assert len({torch_emb.slug, q8_emb.slug}) == 2


def test_fidelity_default_vs_torch(default_emb, reference):
    cos = (default_emb.encode(NAMES) * reference).sum(axis=1)
    assert cos.min() > 0.99, cos.min()


def test_fidelity_onnx_fp32(onnx_emb, reference):
    cos = (onnx_emb.encode(NAMES) * reference).sum(axis=1)
    assert cos.min() > 0.9999, cos.min()


def test_fidelity_onnx_q8(q8_emb, reference):
    cos = (q8_emb.encode(NAMES) * reference).sum(axis=1)
    assert cos.min() > 0.95 and cos.mean() > 0.98, (cos.min(), cos.mean())


def test_truncation_matches_torch(onnx_emb, torch_emb):
    long = " ".join(["kismet", "matrix", "bergman", "kubrick"] * 150)  # ~600 tokens > max_seq_length 256
    assert onnx_emb.max_seq_length == torch_emb.max_seq_length == 256
    a, b = onnx_emb.encode([long, "Kismet"]), torch_emb.encode([long, "Kismet"])
    assert (a * b).sum(axis=1).min() > 0.9999


def test_unknown_model_is_config_error():
    with pytest.raises(ConfigError, match="does not exist"):
        load_embedder("/no/such/model/dir")
    with pytest.raises(ConfigError, match="no-such-org/no-such-model"):
        load_embedder("no-such-org/no-such-model", backend="torch")
    if os.environ.get("HF_HUB_OFFLINE") == "1":  # else the hub lookup may wait on the network
        with pytest.raises(ConfigError, match="no-such-org/no-such-model"):
            load_embedder("no-such-org/no-such-model")


@pytest.mark.parametrize(
    "kwargs", [{"backend": "tensorrt"}, {"device": "gpu"}, {"threads": 0}, {"backend": "onnx", "device": "cuda"}]
)
def test_bad_arguments_are_config_errors(kwargs):
    with pytest.raises(ConfigError):
        load_embedder(**kwargs)


def test_build_is_reused(onnx_emb):
    assert isinstance(onnx_emb, OnnxEmbedder)
    build = onnx_emb.build_dir
    mtime = (build / "model.onnx").stat().st_mtime_ns
    again = ensure_build(resolve_source("all-MiniLM-L6-v2"), "onnx", "minilm_l6_v2")
    assert again == build and (build / "model.onnx").stat().st_mtime_ns == mtime
    assert build.parent.name == "minilm_l6_v2" and (build / "tokenizer.json").exists()


def test_batches_cover_everything_within_limits():
    rng = np.random.default_rng(0)
    lens = rng.integers(3, 300, size=1000)
    order = np.argsort(lens, kind="stable")
    seen = []
    for idx in _batches(order, lens, batch_size=64, budget=4096):
        assert 1 <= len(idx) <= 64
        assert len(idx) == 1 or len(idx) * lens[idx].max() <= 4096
        seen.extend(idx.tolist())
    assert seen == order.tolist()


def test_local_directory_slug_and_alias_resolution(tmp_path):
    bundled = resolve_source("sentence-transformers/all-MiniLM-L6-v2")
    assert bundled.name == "all-MiniLM-L6-v2" and bundled.slug == "minilm_l6_v2" and bundled.path.is_dir()
    local = resolve_source(str(bundled.path))
    assert local.path == bundled.path.resolve()
    # A local directory's slug names it and its location: two copies never share a collection.
    assert local.slug.startswith("model_") and local.slug != bundled.slug
    assert resolve_source("sentence-transformers/all-mpnet-base-v2").slug == "all_mpnet_base_v2"
    assert resolve_source("BAAI/bge-small-en-v1.5").slug == "baai_bge_small_en_v1_5"
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(ConfigError, match="not a model directory"):
        load_embedder(str(tmp_path / "f.txt"))


def test_pipeline_the_onnx_backend_cannot_run_is_config_error(tmp_path, monkeypatch):
    import json

    monkeypatch.setenv("ISORAG_HOME", str(tmp_path / "home"))
    tmp_path = tmp_path / "model"
    tmp_path.mkdir()
    src = resolve_source("all-MiniLM-L6-v2").path
    for f in src.iterdir():  # a copy of the model whose pipeline has a Dense layer after pooling
        (tmp_path / f.name).symlink_to(f)
    (tmp_path / "modules.json").unlink()
    modules = json.loads((src / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ConfigError, match="cannot run on backend 'onnx'.*Dense"):
        load_embedder(str(tmp_path), backend="onnx")
