"""GNN triple scorers over a question's fetched neighbourhood (DESIGN §5): pure modelling, no database.

- :class:`DDEMLP`: SubgraphRAG's MLP over text embeddings + Directional Distance Encoding (paper 000).
- :class:`QRGAT`: QSRAG's query-relational graph attention scorer (paper 004).
- :class:`QueryWalk`: the question's relation walk from the topic entities, a structural feature of both.
- :func:`adaptive_top_p` / :func:`top_k`: which scored triples become evidence.
- :func:`shortest_path_labels`: weak supervision; :func:`triple_recall_at_k`, :func:`answer_recall_at_k`.

With the stores (DESIGN §5): :func:`fetch_neighbourhood` (Cypher, one query per hop, capped with PPR-style
pruning), :class:`FeatureStore` (Milvus vectors, LRU-cached), :func:`train_scorer` and the checkpoint files
(:func:`save_checkpoint`, :func:`load_checkpoint`), :class:`ScoringService` (the scorer inside ``Engine.ask``).
"""

from __future__ import annotations

from engine.scoring.models.dde import DDE, QueryGatedDDE
from engine.scoring.models.dde_mlp import DDEMLP
from engine.scoring.device import WITH_CUDA, resolve_device
from engine.scoring.question_graph import BatchedGraphs, QuestionGraph, TripleScorer, batch_graphs
from engine.scoring.labels import bfs_distances, path_labels_with_fallback, relation_path_labels, shortest_path_labels
from engine.scoring.metrics import answer_recall_at_k, triple_recall_at_k
from engine.scoring.models.qrgat import QRGAT, QRGATConv
from engine.scoring.select import adaptive_top_p, top_k
from engine.scoring.models.query_walk import QueryWalk, walk_answer_loss
from engine.scoring.neighbourhood import Neighbourhood, NeighbourhoodReport, fetch_neighbourhood
from engine.scoring.features import FeatureStore
from engine.scoring.checkpoint import ScorerCheckpoint, load_checkpoint, make_model, save_checkpoint
from engine.scoring.extract import answer_candidates
from engine.scoring.train import QARecord, TrainSettings, TrainResult, read_qa, train_scorer
from engine.scoring.service import LinkedEntity, ScoredAnswer, ScoredTriple, ScoringResult, ScoringService

__all__ = [
    "QuestionGraph",
    "BatchedGraphs",
    "batch_graphs",
    "TripleScorer",
    "DDE",
    "QueryGatedDDE",
    "QueryWalk",
    "walk_answer_loss",
    "DDEMLP",
    "QRGAT",
    "QRGATConv",
    "adaptive_top_p",
    "top_k",
    "shortest_path_labels",
    "bfs_distances",
    "relation_path_labels",
    "path_labels_with_fallback",
    "triple_recall_at_k",
    "answer_recall_at_k",
    "resolve_device",
    "WITH_CUDA",
    "Neighbourhood",
    "NeighbourhoodReport",
    "fetch_neighbourhood",
    "FeatureStore",
    "ScorerCheckpoint",
    "load_checkpoint",
    "save_checkpoint",
    "make_model",
    "answer_candidates",
    "QARecord",
    "TrainSettings",
    "TrainResult",
    "read_qa",
    "train_scorer",
    "LinkedEntity",
    "ScoredAnswer",
    "ScoredTriple",
    "ScoringResult",
    "ScoringService",
]
