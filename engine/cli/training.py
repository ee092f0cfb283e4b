"""Training commands: ``train-scorer`` (a GNN triple scorer) and ``train-generator`` (the KG's learned pattern
generator)."""

from __future__ import annotations

import argparse
from typing import Any, Callable, Sequence

from engine._errors import ConfigError, InputError
from engine.cli.arguments import SEED_MAX, WORKERS_MAX, device_type, float_type, in_file, int_type, \
    key_value_type, kg_type, out_file, text_type
from engine.cli.common import done, open_engine
from engine.cli.output import print_json

__all__ = ["add_commands", "cmd_train_generator", "cmd_train_scorer"]


def _read_questions(paths: Sequence[str], limit: int | None, relation_paths: Sequence[str] | None) -> list[Any]:
    from engine.scoring.qa import read_qa

    out = []
    for i, path in enumerate(paths):
        rows = read_qa(path, limit=limit, relation_paths=relation_paths[i] if relation_paths else None)
        if not rows:
            raise InputError(f"{path}: no questions in it")
        out.extend(rows)
    return out


def cmd_train_scorer(args: argparse.Namespace) -> int:
    """Train a triple scorer (DDE+MLP or QR-GAT) on question-answer files and write its checkpoint."""
    from engine.scoring.checkpoint import check_model_config
    from engine.scoring.device import resolve_device
    from engine.scoring.train import TrainSettings

    if args.relation_paths and len(args.relation_paths) != len(args.qa):
        raise ConfigError("train-scorer: give one --relation-paths file per --qa file")
    config = dict(args.set or [])
    check_model_config(args.model, config)
    resolve_device(args.device)  # cuda asked for where there is none: said now, not after the data is ready
    settings = TrainSettings(epochs=args.epochs, patience=args.patience, lr=args.lr, batch_questions=args.batch,
                             recall_k=args.recall_k, seed=args.seed, max_minutes=args.max_minutes,
                             threads=args.threads, device=args.device, pos_weight=args.pos_weight,
                             neg_samples=args.neg_samples, near_share=args.near_share, walk_aux=args.walk_aux,
                             bridge_target=args.bridge_target, min_epochs=args.min_epochs, smooth=args.smooth)
    # the questions are read (and checked) before anything starts
    qa = _read_questions(args.qa, args.limit, args.relation_paths)
    dev = _read_questions(args.dev, None, None) if args.dev else None
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    with open_engine(args) as eng:
        res = eng.train_scorer(qa, model=args.model, out=args.out, dev=dev, hops=args.hops,
                               max_edges=args.max_edges, cache=args.cache, settings=settings, model_config=config,
                               progress=not args.quiet, extra_stopwords=args.extra_stopwords)
    if args.json:
        print_json(res.to_dict())
    else:
        print(f"trained {type(res.model).__name__} on {res.questions:,} questions in {res.train_s:.1f} s "
              f"(data {res.prepare_s:.1f} s); best dev triple recall@{args.recall_k} {res.best_dev_recall:.4f} "
              f"(mean of up to {args.smooth} epochs) at epoch {res.best_epoch} (seed {args.seed})")
        print(f"checkpoint: {res.checkpoint}  (use it with ISORAG_SCORER={res.checkpoint})")
    return done()


def cmd_train_generator(args: argparse.Namespace) -> int:
    """Train the KG's pattern generator (plain-text questions -> patterns, no LLM) and write its file."""
    from engine.learned.train import GeneratorSettings, read_records, threshold_line

    settings = GeneratorSettings(epochs=args.epochs, patience=args.patience, seed=args.seed, precision=args.precision,
                                 question_vector=args.question_vector)
    records = [r for path in args.qa for r in read_records(path, limit=args.limit)]  # checked before anything starts
    with open_engine(args) as eng:
        res = eng.train_generator(records, out=args.out, settings=settings, progress=not args.quiet)
    if args.json:
        print_json(res.to_dict())
    else:
        print(f"trained the pattern generator of KG {eng.kg!r} on {res.questions:,} questions ({res.templates} "
              f"templates) in {res.train_s:.1f} s; held out {res.dev_questions:,}: linking {res.linking_acc:.4f}, "
              f"pattern {res.pattern_acc:.4f}; question vector {res.question_vector}; seed {res.seed}")
        print(threshold_line(res.calibration))
        print(f"generator: {res.checkpoint}")
    return done()


def _add_train_scorer(command: Callable[..., argparse.ArgumentParser]) -> None:
    """The ``train-scorer`` command: many options, one per training setting
    (:class:`engine.scoring.train.TrainSettings`)."""
    positive, natural = int_type(1), int_type(0)
    s = command("train-scorer", help="train a triple scorer (DDE+MLP or QR-GAT) from question-answer pairs")
    s.add_argument("--qa", nargs="+", type=in_file, required=True,
                   help="MetaQA files ('question [topic]<TAB>a1|a2') or JSON Lines "
                        "{question, topics, answers, triples?}")
    s.add_argument("--model", choices=["dde_mlp", "qrgat"], default="dde_mlp",
                   help="dde_mlp (SubgraphRAG's DDE+MLP, the default) or qrgat (QSRAG's QR-GAT)")
    s.add_argument("--relation-paths", nargs="+", type=in_file, metavar="FILE",
                   help="per --qa file, its questions' relation paths, one line each (relation names separated "
                        "by commas or spaces; blank: none): training labels are then the triples on walks along "
                        "the path instead of every shortest path topic -> answer")
    s.add_argument("--pos-weight", type=float_type(0, lo_open=True), default=1.0,
                   help="BCE weight of a positive triple (default 1)")
    s.add_argument("--neg-samples", type=natural, default=0,
                   help="negatives sampled per question and epoch (default 0: every triple every epoch); "
                        "cheaper epochs, an unbiased estimate of the full loss")
    s.add_argument("--near-share", type=float_type(0, 1), default=0.5,
                   help="share of the sampled negatives drawn from those touching an entity of a positive triple")
    s.add_argument("--walk-aux", type=float_type(0), default=1.0,
                   help="weight of the relation walk's answer loss (where the question's walk ends against the "
                        "answers; default 1, 0 turns it off); models built with walk=true, the default")
    s.add_argument("--bridge-target", type=float_type(0, 1), default=0.5,
                   help="BCE target of a labelled triple that touches no answer (a bridge on the way; default 0.5; "
                        "1: plain labels): below 1 the triples reaching an answer rank first")
    s.add_argument("--out", type=out_file, required=True, help="checkpoint file to write")
    s.add_argument("--kg", type=kg_type, default=None, help="the KG (default $ISORAG_KG or 'default')")
    s.add_argument("--dev", nargs="+", type=in_file, help="dev questions for early stopping (default: 10%% of --qa)")
    s.add_argument("--hops", type=positive, default=2, help="neighbourhood depth (default 2)")
    s.add_argument("--max-edges", type=positive, default=10_000, help="neighbourhood cap in triples (default 10000)")
    s.add_argument("--cache", type=out_file, help="prepared-data cache file: reruns and epochs skip Neo4j and Milvus")
    s.add_argument("--limit", type=positive, help="read at most this many questions per file")
    s.add_argument("--epochs", type=positive, default=30, help="training epochs at most (default 30)")
    s.add_argument("--patience", type=positive, default=5,
                   help="stop after this many epochs without a better (smoothed) dev recall (default 5)")
    s.add_argument("--min-epochs", type=positive, default=10, help="no early stop before this epoch (default 10)")
    s.add_argument("--smooth", type=positive, default=3,
                   help="early stopping and the kept weights judge the mean dev recall of the last N epochs "
                        "(default 3; 1: the raw figure)")
    s.add_argument("--lr", type=float_type(0, lo_open=True), default=1e-3, help="learning rate (default 0.001)")
    s.add_argument("--batch", type=positive, default=8, help="questions per optimizer step")
    s.add_argument("--recall-k", type=positive, default=100, help="K of the dev triple recall@K (early stopping)")
    s.add_argument("--seed", type=int_type(0, SEED_MAX), default=42,
                   help="seed of the weights, batch order and negative samples, kept in the checkpoint: the same "
                        "command and seed give the same checkpoint on CPU (default 42)")
    s.add_argument("--max-minutes", type=float_type(0, lo_open=True),
                   help="stop training after this many minutes (best weights kept; a wall-clock limit: a run it "
                        "ends is not reproducible)")
    s.add_argument("--threads", type=int_type(1, WORKERS_MAX), help="torch threads")
    s.add_argument("--device", type=device_type, default="auto", help="auto, cpu, cuda, cuda:N")
    s.add_argument("--set", action="append", type=key_value_type, metavar="KEY=VALUE",
                   help="model hyperparameter, e.g. --set hidden=128 --set heads=4 (repeatable)")
    s.add_argument("--extra-stopwords", nargs="+", type=text_type, default=[], metavar="WORD",
                   help="the KG's domain words that entity linking skips besides the generic English ones, kept in "
                        "the checkpoint (MetaQA: movie movies film films)")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.add_argument("--json", action="store_true", help="print the training's result as JSON")
    s.set_defaults(func=cmd_train_scorer)


def add_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    _add_train_scorer(command)
    positive = int_type(1)
    s = command("train-generator", help="train the KG's pattern generator (plain-text questions -> patterns, "
                                        "no LLM) from question-answer pairs")
    s.add_argument("--qa", nargs="+", type=in_file, required=True,
                   help="MetaQA files ('question [topic]<TAB>a1|a2') or JSON Lines {question, topics (or seeds), "
                        "answers, pattern?} such as `isorag synth` output; without a pattern, the relation path "
                        "is found in the KG")
    s.add_argument("--out", type=out_file, help="generator file (default: $ISORAG_HOME/generators/<kg>.pt, "
                                                "where ask finds it)")
    s.add_argument("--kg", type=kg_type, default=None, help="the KG (default $ISORAG_KG or 'default')")
    s.add_argument("--limit", type=positive, help="read at most this many questions per file")
    s.add_argument("--epochs", type=positive, default=60, help="training epochs at most (default 60)")
    s.add_argument("--patience", type=positive, default=8,
                   help="stop after this many epochs without a better held-out score (default 8)")
    s.add_argument("--seed", type=int_type(0, SEED_MAX), default=42,
                   help="seed of the split, the weights and the batch order (default 42)")
    s.add_argument("--precision", type=float_type(0, 1, lo_open=True), default=0.99,
                   help="the router keeps a learned pattern whose probability is at least the threshold at which "
                        "held-out patterns are right this often (default 0.99)")
    s.add_argument("--question-vector", choices=["auto", "words", "sentence"], default="auto",
                   help="the question's vector: the mean of its words' (no embedding call for a question of known "
                        "words), its sentence embedding (one call a question; carries a generator trained on "
                        "`isorag synth` questions to people's wordings), or auto (default): sentence when most "
                        "questions are synth's, else words")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.add_argument("--json", action="store_true", help="print the training's result as JSON")
    s.set_defaults(func=cmd_train_generator)
