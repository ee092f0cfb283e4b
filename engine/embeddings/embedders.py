"""Embedders: names and queries -> L2-normalized float32 vectors.

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

Texts are deduplicated, sorted by token length and cut into batches that bound both the number of rows
and the padded token count, so short names pay no padding for long ones. On ONNX, ``threads`` batches
run at once, one thread each (the caller and helpers): a thread kept off its core by another process
then delays only its own batch, where ONNX Runtime's intra-op threads all wait at every operator.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from engine._errors import ConfigError

#: Upper bound on rows x padded length of one ONNX batch (bounds the attention's memory on long texts).
_TOKEN_BUDGET = 8192
#: a call of fewer tokens than this runs as one batch on the caller's thread, however many threads the embedder has:
#: handing half of a question's few strings to another thread cost more than it saved on a busy 2-core machine
#: (load average 6: two strings 10.4 ms p50 on one thread, 14.1 ms split over two; four strings 12.2 / 14.4 ms,
#: eight 23.6 / 24.2 ms; sixteen strings, 84 tokens, 65 / 55 ms)
SPLIT_MIN_TOKENS = 64


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
        # Busy-waiting worker threads lose badly when another process wants the other core of a 2-core machine
        # (measured: benchmarks/embed.py).
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
        if int(lens.sum()) < SPLIT_MIN_TOKENS:  # a question's few strings: one batch on the caller's thread
            w = 1
        if w > 1:  # at least one batch per worker
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
