"""GNN triple scorers over a question's fetched neighbourhood (DESIGN §5): pure modelling, no database.

- :class:`DDEMLP`: SubgraphRAG's MLP over text embeddings + Directional Distance Encoding (paper 000).
- :class:`QRGAT`: QSRAG's query-relational graph attention scorer (paper 004).
- :func:`adaptive_top_p` / :func:`top_k`: which scored triples become evidence.
- :func:`shortest_path_labels`: weak supervision; :func:`triple_recall_at_k`, :func:`answer_recall_at_k`.
"""

from __future__ import annotations

from engine.scoring.dde import DDE
from engine.scoring.dde_mlp import DDEMLP
from engine.scoring.device import WITH_CUDA, resolve_device
from engine.scoring.graph import BatchedGraphs, QuestionGraph, TripleScorer, batch_graphs
from engine.scoring.labels import bfs_distances, shortest_path_labels
from engine.scoring.metrics import answer_recall_at_k, triple_recall_at_k
from engine.scoring.qrgat import QRGAT, QRGATConv
from engine.scoring.select import adaptive_top_p, top_k

__all__ = [
    "QuestionGraph",
    "BatchedGraphs",
    "batch_graphs",
    "TripleScorer",
    "DDE",
    "DDEMLP",
    "QRGAT",
    "QRGATConv",
    "adaptive_top_p",
    "top_k",
    "shortest_path_labels",
    "bfs_distances",
    "triple_recall_at_k",
    "answer_recall_at_k",
    "resolve_device",
    "WITH_CUDA",
]
