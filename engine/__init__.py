"""isorag: exact top-k subgraph retrieval over Neo4j + Milvus for knowledge-graph RAG."""

from __future__ import annotations

from engine._errors import *  # noqa: F401,F403
from engine._errors import __all__ as _errors_all

__version__ = "0.1.0"

__all__ = ["__version__", *_errors_all]
