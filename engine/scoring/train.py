"""Training the triple scorers from question-answer pairs (the SubgraphRAG and QSRAG recipes: binary cross-entropy per
triple, early stopping on recall).

:func:`train_scorer` runs the three steps:

1. **prepare**: the questions (:mod:`engine.scoring.qa`) become a
   :class:`~engine.scoring.prepared.PreparedSet`: neighbourhoods, labels and features, optionally kept in a cache
   file (:func:`~engine.scoring.prepared.prepare`).
2. **train** (:func:`train_model`): BCE with logits over every candidate triple (the mean per question, averaged
   over a batch of questions; optionally over sampled negatives, :func:`sample_edges`), Adam, seeds fixed; after
   each epoch the dev split's triple recall@K (K = 100, :func:`~engine.scoring.evaluate.dev_recall`) decides early
   stopping (``patience``, 5 by default), and the best weights are kept. Questions without a labelled triple are
   skipped, as SubgraphRAG does.
3. **save**: :func:`~engine.scoring.checkpoint.save_checkpoint` (model class, hyperparameters, weights, embedding
   model, KG and its relation vocabulary fingerprint).
"""

from __future__ import annotations

import copy
import math
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from engine._errors import ConfigError, InputError
from engine.scoring.evaluate import dev_recall
from engine.scoring.neighbourhood import DEFAULT_HOPS, DEFAULT_MAX_EDGES
from engine.scoring.prepared import PreparedSet, ScorerKG, prepare, train_pos
from engine.scoring.qa import QARecord, as_records

__all__ = [
    "DEFAULT_MODEL_CONFIG",
    "TrainSettings",
    "TrainResult",
    "seed_everything",
    "settings_record",
    "near_negatives",
    "sample_edges",
    "train_model",
    "split_dev",
    "train_scorer",
]

#: model settings train_scorer starts from (``model_config`` overrides them). DDE with s^(0), the topic
#: one-hot itself (the paper's formula; SubgraphRAG's code leaves it out): on a KG whose relations all point
#: one way (MetaQA: film -> person, film -> year) the propagated rounds alone cannot tell the topic film from
#: the other films around it, and the model learns nothing. On such a KG multi-hop questions also walk paths
#: that change direction (topic -> director <- film): the mixed DDE rounds and crossing QR-GAT stacks follow
#: them, and log-scaled DDE shares stay readable three hops out. On a KG that stores inverses (Freebase) they
#: add features the model may ignore. The gated DDE rounds add which relations lead from the topic to an entity;
#: the relation walk (engine.scoring.models.query_walk) where a walk of the question's relations from the topic ends,
#: and which triples it crosses, without DDE's division by degrees (a hub answer, a language or a genre, is
#: marked as clearly as a rare one). benchmarks/scorer.py measures exactly these settings.
#: Widths are chosen for CPU latency (at most 50 ms per question up to 10k triples on 2 cores); QR-GAT's
#: dropout is 0 so that its first layer runs by blocks in training too (half the cost of an epoch).
#: DDE+MLP takes 3 DDE rounds (the paper's default is 2): a 3-hop answer then carries a (gated) share of the
#: topic itself rather than only of its neighbour on the path.
DEFAULT_MODEL_CONFIG: dict[str, dict[str, Any]] = {
    "dde_mlp": {"hidden": 128, "include_initial": True, "dde_mixed": True, "dde_log": True, "dde_gated": True,
                "dde_rounds": 3, "walk": True},
    "qrgat": {"hidden": 64, "heads": 4, "num_layers": 2, "dropout": 0.0, "cross_directions": True,
              "dde_gated": True, "walk": True},
}


@dataclass
class TrainSettings:
    """How a scorer is trained. Adam at 1e-3 and early stopping on dev recall@100 as in SubgraphRAG's code, which
    waits 10 epochs without a gain; isorag waits ``patience`` = 5. Batches of questions for CPU throughput and a
    wall-clock budget."""

    epochs: int = 30
    patience: int = 5
    #: no early stop before this epoch (the wall-clock budget still applies). The dev figure is noisy in the
    #: first epochs: on MetaQA (--limit 1500, DDE+MLP) one run stopped at epoch 10 with its best at epoch 4
    #: (3-hop answer recall@100 0.946), another trained 27 epochs (0.967)
    min_epochs: int = 10
    #: early stopping and the choice of the kept weights judge the mean dev figure of the last ``smooth``
    #: epochs (1: the raw figure), so that one lucky epoch on a few hundred dev questions neither stops
    #: training nor is kept for its noise
    smooth: int = 3
    lr: float = 1e-3
    weight_decay: float = 0.0
    batch_questions: int = 8
    recall_k: int = 100
    seed: int = 42
    max_minutes: float | None = None
    dev_fraction: float = 0.1
    dev_max: int = 1000
    threads: int | None = None
    device: str = "auto"
    #: weight of a positive triple's BCE term (1: plain BCE). A 3-hop question has ~20 positives among
    #: thousands of candidates, so the unweighted loss is dominated by pushing negatives down.
    pos_weight: float = 1.0
    #: negatives per question and epoch (0: every triple of the neighbourhood is a candidate every epoch).
    #: With N > 0 an epoch scores the positives and N sampled negatives per question, stratified: up to
    #: ``near_share * N`` from the negatives that touch an entity of a positive triple (the other relations
    #: around the evidence, where the hubs are), the rest uniformly from the others; each stratum's terms
    #: are weighted by (its size / drawn), so the loss is an unbiased estimate of the full one.
    neg_samples: int = 0
    near_share: float = 0.5
    #: weight of the relation walk's auxiliary loss (:func:`~engine.scoring.models.query_walk.walk_answer_loss`: where
    #: the question's walk ends against the answers), for models built with ``walk=True``; 0 turns it off
    walk_aux: float = 1.0
    #: BCE target of a labelled triple that touches no answer (a bridge on the way: topic -> director, the
    #: director's films); 1 gives the plain labels. Below 1 the model ranks the triples that reach an answer
    #: first, bridges next, the rest last: answer recall@K then holds where a question has more labelled
    #: triples than K (a 3-hop question with 45 answers and 194 path triples, half of them bridges). MetaQA
    #: 3-hop answer recall@100, DDE+MLP: 0.943 with 1, 0.967 with 0.5 (relation-path triple recall@100 the same)
    bridge_target: float = 0.5

    def __post_init__(self) -> None:
        import math

        def number(name: str, lo: float, hi: float = math.inf, *, integer: bool = False, lo_open: bool = False,
                   optional: bool = False) -> None:
            v = getattr(self, name)
            if v is None and optional:
                return
            kind_ok = isinstance(v, int) if integer else isinstance(v, (int, float))
            if isinstance(v, bool) or not kind_ok or not math.isfinite(v) or v < lo or lo_open and v == lo or v > hi:
                raise ConfigError(f"training setting {name} must be {'an integer' if integer else 'a finite number'} "
                                  f"in {'(' if lo_open else '['}{lo:g}, {hi:g}], got {v!r}")

        for name in ("epochs", "patience", "min_epochs", "smooth", "batch_questions", "recall_k", "dev_max"):
            number(name, 1, integer=True)
        number("neg_samples", 0, integer=True)
        number("threads", 1, integer=True, optional=True)
        number("seed", 0, 2 ** 32 - 1, integer=True)
        number("lr", 0, lo_open=True)
        number("weight_decay", 0)
        number("max_minutes", 0, lo_open=True, optional=True)
        number("dev_fraction", 0, 1)
        number("pos_weight", 0, lo_open=True)
        number("near_share", 0, 1)
        number("walk_aux", 0)
        number("bridge_target", 0, 1)


@dataclass
class TrainResult:
    model: Any
    checkpoint: str | None
    history: list[dict[str, Any]]
    best_epoch: int
    best_dev_recall: float
    train_s: float
    prepare_s: float
    questions: int
    dev_questions: int
    skipped: dict[str, int]
    #: the training settings, the seed among them (:func:`settings_record`)
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint, "history": self.history, "best_epoch": self.best_epoch,
                "best_dev_recall": self.best_dev_recall, "train_s": round(self.train_s, 2),
                "prepare_s": round(self.prepare_s, 2), "questions": self.questions,
                "dev_questions": self.dev_questions, "skipped": self.skipped,
                "model_class": type(self.model).__name__, "config": self.model.config, "settings": self.settings}


def seed_everything(seed: int) -> None:
    """Seed every generator training draws from: Python's ``random``, numpy's global one and torch's (CPU and
    every GPU). The batch order and the negative samples have their own generators, seeded from the same
    number in :func:`train_model`."""
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def settings_record(s: TrainSettings) -> dict[str, Any]:
    """The training settings as plain data, kept in a checkpoint's ``info`` (with the seed): the command that
    made it can be run again for the same weights."""
    import dataclasses

    return dataclasses.asdict(s)


def _loss(model: Any, batch: Any, pos_weight: float = 1.0, sample: tuple[Any, Any] | None = None,
          walk_aux: float = 0.0, bridge_target: float = 1.0) -> Any:
    """BCE with logits, the mean per question, then over the batch. ``sample``: ``(edges, weights)``, the
    triples scored this step and the weight of each one's term (sampled negatives, :func:`sample_edges`);
    the per-question mean still divides by the question's full triple count. ``walk_aux``: weight of the
    relation walk's answer loss, added when the model has a walk and the batch its answers. ``bridge_target``:
    the target of a labelled triple touching no answer (:attr:`TrainSettings.bridge_target`; needs the
    batch's answers, ``node_labels``)."""
    import torch
    import torch.nn.functional as F

    if sample is None:
        logits = model(batch)
        labels, which = batch.labels, batch.triple_batch
        weight = None
        if pos_weight != 1.0:
            weight = torch.where(labels > 0, torch.as_tensor(pos_weight, dtype=logits.dtype, device=logits.device),
                                 torch.ones((), dtype=logits.dtype, device=logits.device))
    else:
        edges, w = sample
        logits = model(batch, edges=edges)
        labels, which = batch.labels.index_select(0, edges), batch.triple_batch.index_select(0, edges)
        weight = torch.where(labels > 0, torch.as_tensor(pos_weight, dtype=logits.dtype, device=logits.device),
                             w.to(logits.dtype))
    if bridge_target != 1.0 and batch.node_labels is not None:
        head, tail = batch.edge_index[0], batch.edge_index[1]
        if sample is not None:
            head, tail = head.index_select(0, sample[0]), tail.index_select(0, sample[0])
        touches = (batch.node_labels.index_select(0, head) > 0) | (batch.node_labels.index_select(0, tail) > 0)
        labels = torch.where((labels > 0) & ~touches, torch.as_tensor(bridge_target, dtype=labels.dtype,
                                                                       device=labels.device), labels)
    per = F.binary_cross_entropy_with_logits(logits, labels, weight=weight, reduction="none")
    # mean per question, then over the batch: a large neighbourhood does not outweigh a small one
    sums = torch.zeros(batch.num_graphs, device=per.device).index_add_(0, which, per)
    counts = torch.diff(batch.edge_ptr).clamp(min=1).to(per.dtype)
    loss = (sums / counts).mean()
    end = getattr(model, "walk_end", None)
    if walk_aux > 0 and end is not None and batch.node_labels is not None:
        from engine.scoring.models.query_walk import walk_answer_loss

        loss = loss + walk_aux * walk_answer_loss(end, batch)
    return loss


def near_negatives(data: PreparedSet, ex: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(positives, near negatives, other negatives)`` of an example (triple indices): near negatives touch
    an entity of a positive triple. Cached in the example (``_strata``)."""
    got = ex.get("_strata")
    if got is not None and got[0] is train_pos(ex):
        return got[1]
    nb = data.neighbourhoods[ex["nb"]]
    pos = np.asarray(train_pos(ex), dtype=np.int64)
    is_pos = np.zeros(nb.num_edges, bool)
    is_pos[pos] = True
    pos_nodes = np.unique(np.concatenate([nb.heads[pos], nb.tails[pos]])) if len(pos) else np.zeros(0, np.int64)
    near = (np.isin(nb.heads, pos_nodes) | np.isin(nb.tails, pos_nodes)) & ~is_pos
    strata = (np.flatnonzero(is_pos), np.flatnonzero(near), np.flatnonzero(~near & ~is_pos))
    ex["_strata"] = (train_pos(ex), strata)
    return strata


def sample_edges(data: PreparedSet, examples: Sequence[dict[str, Any]], n_neg: int, near_share: float,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Triples to score for a batch of ``examples`` (in batch order, indices into the batched triples) and
    the weight of each: positives (weight 1 here; the loss applies ``pos_weight``) and ``n_neg`` negatives
    per question drawn by stratum (see :attr:`TrainSettings.neg_samples`), weighted by stratum size / drawn."""
    edges, weights = [], []
    off = 0
    for ex in examples:
        pos, near, rest = near_negatives(data, ex)
        want_near = min(len(near), int(round(near_share * n_neg)))
        want_rest = min(len(rest), n_neg - want_near)
        want_near = min(len(near), n_neg - want_rest)  # what the other stratum cannot use
        parts = [pos]
        wparts = [np.ones(len(pos), np.float32)]
        for stratum, k in ((near, want_near), (rest, want_rest)):
            if k <= 0:
                continue
            pick = stratum if k >= len(stratum) else rng.choice(stratum, size=k, replace=False)
            parts.append(pick)
            wparts.append(np.full(len(pick), len(stratum) / len(pick), np.float32))
        edges.append(np.concatenate(parts) + off)
        weights.append(np.concatenate(wparts))
        off += data.neighbourhoods[ex["nb"]].num_edges
    return np.concatenate(edges), np.concatenate(weights)


def train_model(
    model: Any,
    train: PreparedSet,
    dev: PreparedSet | None,
    settings: TrainSettings | None = None,
    *,
    progress: bool = True,
    echo: Callable[[str], None] | None = None,
    on_epoch: Callable[[dict[str, Any], Any], None] | None = None,
) -> tuple[Any, list[dict[str, Any]], int, float]:
    """Train ``model`` in place on ``train``; early stopping on ``dev``'s triple recall@K, smoothed over
    ``settings.smooth`` epochs and never before ``settings.min_epochs``. Returns ``(model with the best
    weights, history, best epoch, best smoothed dev recall)``. ``on_epoch(entry, model)`` is called after each
    epoch's dev figure (e.g. to keep snapshots). With the same settings, data and seed, on CPU, two runs give
    the same weights bit for bit, unless the ``max_minutes`` budget (wall clock) ends one earlier.

    Kept whole: the epoch loop shares ``opt``, the two seeded generators (the bit-for-bit promise rests on the
    order of their draws), the ``out_of_time`` flag that ends both loops, and the early-stopping state (``raw``,
    ``best_state``, ``best_recall``, ``best_epoch``, ``bad``).
    """
    import torch
    from tqdm import tqdm

    from engine.scoring.device import resolve_device
    from engine.scoring.question_graph import batch_graphs

    s = settings or TrainSettings()
    say = echo or (lambda m: print(m, file=sys.stderr))
    if s.threads:
        torch.set_num_threads(s.threads)
    seed_everything(s.seed)
    device = resolve_device(s.device)
    model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=s.lr, weight_decay=s.weight_decay)
    usable = [i for i, ex in enumerate(train.examples) if len(train_pos(ex))]
    if not usable:
        raise InputError("no training question has a labelled triple (no path topic -> answer in its neighbourhood)")
    order_rng = random.Random(s.seed)
    sample_rng = np.random.default_rng(s.seed)
    history: list[dict[str, Any]] = []
    raw: list[float] = []  # the dev figure of each epoch (minus the loss without dev questions)
    best_state, best_recall, best_epoch, bad = None, -1.0, 0, 0
    deadline = time.monotonic() + s.max_minutes * 60.0 if s.max_minutes else None
    t_start = time.perf_counter()
    for epoch in range(1, s.epochs + 1):
        model.train()
        order = usable[:]
        order_rng.shuffle(order)
        losses = []
        bar = tqdm(range(0, len(order), s.batch_questions), desc=f"epoch {epoch}", unit="batch",
                   disable=not progress, file=sys.stderr, dynamic_ncols=True, leave=False)
        out_of_time = False
        for b0 in bar:
            exs = [train.examples[i] for i in order[b0:b0 + s.batch_questions]]
            batch = batch_graphs([train.graph(ex) for ex in exs], device=device)
            sample = None
            if s.neg_samples > 0:
                e, w = sample_edges(train, exs, s.neg_samples, s.near_share, sample_rng)
                sample = (torch.from_numpy(e).to(device), torch.from_numpy(w).to(device))
            loss = _loss(model, batch, s.pos_weight, sample, s.walk_aux, s.bridge_target)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
            if len(losses) % 20 == 0:
                bar.set_postfix(loss=f"{np.mean(losses[-20:]):.4f}")
            if deadline is not None and time.monotonic() > deadline:
                out_of_time = True
                break
        bar.close()
        recall = dev_recall(model, dev, s.recall_k, device) if dev is not None and dev.examples else math.nan
        entry = {"epoch": epoch, "loss": float(np.mean(losses)) if losses else math.nan,
                 f"dev_triple_recall@{s.recall_k}": recall, "elapsed_s": round(time.perf_counter() - t_start, 1)}
        raw.append(recall if not math.isnan(recall) else -entry["loss"])
        score = float(np.mean(raw[-s.smooth:]))
        entry["dev_smoothed"] = score
        history.append(entry)
        say(f"epoch {epoch}: loss {entry['loss']:.4f}  dev triple recall@{s.recall_k} {recall:.4f}"
            f" (mean of the last {min(s.smooth, len(raw))}: {score:.4f})  ({entry['elapsed_s']:.0f} s)")
        if on_epoch is not None:
            on_epoch(entry, model)
        if score > best_recall:
            best_state, best_recall, best_epoch, bad = copy.deepcopy(model.state_dict()), score, epoch, 0
        else:
            bad += 1
            if bad >= s.patience and epoch >= s.min_epochs:
                say(f"early stop: no better dev recall for {bad} epochs (best {best_recall:.4f} at epoch "
                    f"{best_epoch})")
                break
        if out_of_time:
            say(f"stopped: the {s.max_minutes:g}-minute budget is spent")
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    return model, history, best_epoch, best_recall


def split_dev(n: int, fraction: float, max_dev: int, seed: int) -> tuple[list[int], list[int]]:
    """Deterministic train/dev split of ``n`` examples."""
    idx = list(range(n))
    random.Random(seed).shuffle(idx)
    k = min(max_dev, int(round(n * fraction))) if n > 1 else 0
    return sorted(idx[k:]), sorted(idx[:k])


def train_scorer(
    engine: ScorerKG,
    qa: str | Path | Sequence[str | Path] | Sequence[QARecord],
    *,
    model: str = "dde_mlp",
    out: str | Path | None = None,
    dev: str | Path | Sequence[str | Path] | None = None,
    hops: int = DEFAULT_HOPS,
    max_edges: int = DEFAULT_MAX_EDGES,
    cache: str | Path | None = None,
    settings: TrainSettings | None = None,
    model_config: dict[str, Any] | None = None,
    limit: int | None = None,
    progress: bool = True,
    echo: Callable[[str], None] | None = None,
    extra_stopwords: Sequence[str] = (),
    kg_id: str | None = None,
) -> TrainResult:
    """Train a triple scorer for ``engine``'s KG from question files (or records) and save it to ``out``.

    ``dev``: separate dev questions; by default ``settings.dev_fraction`` of ``qa`` (at most ``dev_max``) is
    held out. ``cache``: the prepared data's cache file (dev data goes to ``<cache>.dev``). ``extra_stopwords``:
    the KG's domain words that entity linking skips (kept in the checkpoint; :mod:`engine.scoring.service`).
    ``kg_id``: the KG's identity, recorded in the checkpoint.
    """
    from engine.scoring.checkpoint import make_model, save_checkpoint

    s = settings or TrainSettings()
    say = echo or (lambda m: print(m, file=sys.stderr))
    extra_stopwords = [] if extra_stopwords is None else extra_stopwords
    if isinstance(extra_stopwords, str) or not all(isinstance(w, str) for w in extra_stopwords):
        raise ConfigError(f"extra_stopwords must be a list of words, got {extra_stopwords!r}")  # before the work
    records = as_records(qa, limit)
    t0 = time.perf_counter()
    data = prepare(engine, records, hops=hops, max_edges=max_edges, cache=cache, progress=progress, echo=echo)
    if dev is not None:
        dev_cache = None if cache is None else Path(str(cache) + ".dev")
        dev_data = prepare(engine, as_records(dev, None), hops=hops, max_edges=max_edges, cache=dev_cache,
                           progress=progress, echo=echo)
        train_data = data
    else:
        tr, dv = split_dev(len(data.examples), s.dev_fraction, s.dev_max, s.seed)
        train_data, dev_data = data.subset(tr), data.subset(dv)
    prepare_s = time.perf_counter() - t0
    labelled = sum(1 for e in train_data.examples if len(e["pos"]))
    say(f"training {model} on {len(train_data.examples):,} questions ({labelled:,} with a labelled triple), dev "
        f"{len(dev_data.examples):,}; data ready in {prepare_s:.1f} s")
    seed_everything(s.seed)
    net = make_model(model, engine.embedder.dim,
                     **{**DEFAULT_MODEL_CONFIG.get(model.lower(), {}), **(model_config or {})})
    t1 = time.perf_counter()
    net, history, best_epoch, best = train_model(net, train_data, dev_data, s, progress=progress, echo=echo)
    train_s = time.perf_counter() - t1
    path = None
    if out is not None:
        path = str(save_checkpoint(
            out, net.cpu(), kg=engine.kg, embedding_model=engine.config.embedding_model,
            embedding_slug=engine.embedder.slug, relation_types=data.relation_types, hops=hops, max_edges=max_edges,
            info={"questions": len(train_data.examples), "dev_questions": len(dev_data.examples),
                  "best_epoch": best_epoch, f"dev_triple_recall@{s.recall_k}": best, "train_s": round(train_s, 1),
                  "seed": s.seed, "settings": settings_record(s)},
            extra_stopwords=extra_stopwords, kg_id=kg_id))
        say(f"checkpoint written to {path}")
    return TrainResult(net, path, history, best_epoch, best, train_s, prepare_s, len(train_data.examples),
                       len(dev_data.examples), dict(data.meta.get("skipped", {})), settings_record(s))
