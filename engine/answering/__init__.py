"""Answers and verdicts over retrieved subgraphs: the pipeline's stages, its drivers, results and the no-LLM rule."""

from engine.answering.drivers import adrive, astream, averify_many, claim_args, drive, stream, verify_many
from engine.answering.pipeline import SCORED_HEADER, TEXT_TIE, Flow, Pipeline
from engine.answering.results import (
    LABELS,
    NOT_ENOUGH_INFO,
    REFUTED,
    SUPPORTED,
    Answer,
    AnswerEvent,
    PatternEvent,
    ScoredEvent,
    SubgraphsEvent,
    TokenEvent,
    Verdict,
)
from engine.answering.verification import judge_claim
from engine.llm import NO_LLM_HELP

__all__ = [
    "LABELS",
    "NOT_ENOUGH_INFO",
    "REFUTED",
    "SUPPORTED",
    "Answer",
    "AnswerEvent",
    "PatternEvent",
    "ScoredEvent",
    "SubgraphsEvent",
    "TokenEvent",
    "Verdict",
    "NO_LLM_HELP",
    # the pipeline, its drivers and the no-LLM rule, for callers that assemble their own
    "Flow",
    "Pipeline",
    "SCORED_HEADER",
    "TEXT_TIE",
    "adrive",
    "astream",
    "averify_many",
    "claim_args",
    "drive",
    "judge_claim",
    "stream",
    "verify_many",
]
