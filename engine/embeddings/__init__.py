"""Text embeddings: the embedders, model sources, the ONNX build cache and ``load_embedder``."""

from engine.embeddings.embedders import Embedder, OnnxEmbedder, TorchEmbedder
from engine.embeddings.loading import AUTO_CPU_BACKEND, BACKENDS, load_embedder
from engine.embeddings.sources import BUNDLED_MODEL

__all__ = ["BACKENDS", "AUTO_CPU_BACKEND", "BUNDLED_MODEL", "Embedder", "TorchEmbedder", "OnnxEmbedder",
           "load_embedder"]
