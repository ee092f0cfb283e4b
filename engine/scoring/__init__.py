"""The GNN triple scorers (DDE+MLP, QR-GAT): networks, training data, training, checkpoints, evaluation, the service."""

from __future__ import annotations

from engine.scoring.checkpoint import ScorerCheckpoint, load_checkpoint, make_model, save_checkpoint
from engine.scoring.device import WITH_CUDA, resolve_device
from engine.scoring.extract import answer_candidates
from engine.scoring.features import FeatureStore
from engine.scoring.labels import bfs_distances, path_labels_with_fallback, relation_path_labels, shortest_path_labels
from engine.scoring.metrics import answer_recall_at_k, triple_recall_at_k
from engine.scoring.models.dde import DDE, QueryGatedDDE
from engine.scoring.models.dde_mlp import DDEMLP
from engine.scoring.models.qrgat import QRGAT, QRGATConv
from engine.scoring.models.query_walk import QueryWalk, walk_answer_loss
from engine.scoring.models.triple_scorer import TripleScorer
from engine.scoring.neighbourhood import Neighbourhood, NeighbourhoodReport, fetch_neighbourhood
from engine.scoring.qa import QARecord, read_qa
from engine.scoring.question_graph import BatchedGraphs, QuestionGraph, batch_graphs
from engine.scoring.select import adaptive_top_p, top_k
from engine.scoring.service import LinkedEntity, ScoredAnswer, ScoredTriple, ScoringResult, ScoringService
from engine.scoring.train import TrainResult, TrainSettings, train_scorer

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
