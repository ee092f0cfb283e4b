"""Training the pattern generator from question-answer pairs (``isorag train-generator``).

Each training question gives: its plain text (MetaQA's ``[brackets]`` removed), the spans of its topics in that
text (the linking gold) and its template (:mod:`engine.learned.templates`): from the record's gold pattern where it
has one (``isorag synth`` records, the demo's questions, ``"pattern"`` in JSON Lines), else chosen among the
relation paths that join its topic to its answers in the KG. Then, with the seed fixed
(:func:`engine.scoring.train.seed_everything`) and recorded in the file:

1. the linking acceptance (:func:`engine.linking.text.fit_link_model`) on the training questions' candidates;
2. **the paths of question-answer pairs** (:func:`choose_paths`). Several relation paths often join a topic to
   its answers (the director of a film also wrote it; a film's language is also that of the films of its director),
   and one question alone cannot tell which one it asks. Across the training set it can: the classifier is trained
   to put its probability on *any* of each question's paths (the marginal likelihood ``log sum_{t in paths(q)} w_t
   p(t | q)``, ``w_t`` the F1 of path ``t`` against the question's answers: the share of them it reaches and the
   share of what it reaches that they are, times how well the question's words name its relations). Questions worded
   alike share one prediction, so the path that explains all of them gets the mass and a path that reaches one
   question's answers by coincidence does not. Each question then takes its most probable path (the path most
   questions worded exactly as it is took, where at least three are and most agree: its own answers may favour
   another path where the KG lacks a triple), and the templates no question took are dropped;
3. the template classifier (:class:`engine.learned.generator.TemplateClassifier`): cross-entropy, Adam, early
   stopping on the held-out questions' likelihood; its *none* class on questions about relations the KG
   lacks (:mod:`engine.learned.unanswerable`: asked in a few frames, and the training questions themselves with
   the words that name a relation replaced, one half of the words);
4. **the router's threshold** (:func:`calibrate`): on the held-out questions, run end to end (linking included),
   and a fifth as many questions the KG cannot answer (the other half of the words), a pattern's probability is
   fitted from its template's and its linking confidence (:func:`fit_score`: their weights, so that it is the
   probability of being right), then the threshold is the lowest pattern probability at
   which the 95% lower confidence bound of the precision of the patterns kept (a pattern for an unanswerable
   question is never right) reaches ``precision``. It is never 0: a question with no fitting template
   (probability 0) is never kept.
"""

from __future__ import annotations

import math
import random
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine._errors import ConfigError, InputError, MalformedInputError, PatternError
from engine.learned.generator import (GeneratorCheckpoint, PatternGenerator, RelationAligner, TemplateClassifier,
                                      NAMES, QUESTION_VECTORS, TemplateRelations, alignment, cached_encode,
                                      featurize, ngram_ids, question_texts, question_vectors,
                                      save_generator, shape_ids, skeleton_index)
from engine.linking.text import exact_candidates, fit_link_model, mask, unbracket, word_ngrams
from engine.learned.compose import Composer, PathInputs, chain_steps, fit_composer, synonym_examples
from engine.learned.templates import PathHit, Template, path_reach, reaching_paths
from engine.learned.unanswerable import reworded_questions, unanswerable_questions, usable_words
from engine.retrieval.pattern import Pattern
from engine.retrieval.retriever import normalize_name

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import GraphReader, TextEmbedder, VectorIndex

__all__ = ["Calibration", "GeneratorRecord", "GeneratorSettings", "TrainedGenerator", "calibrate", "choose_paths",
           "derive_candidates", "fit_score", "make_record", "read_records", "threshold_line", "train_generator",
           "wilson_lower"]

#: a training question longer than this (characters) is left out
MAX_QUESTION_CHARS = 2_000
#: the share of the composer's held-out questions fitted on again with one relation named by a weak synonym
#: (engine.learned.compose.synonym_examples)
SYNONYM_SHARE = 0.5


@dataclass
class GeneratorRecord:
    """One training question: plain ``text``, its topics (names, in the text's order) with their spans where
    found, the answers (names or keys) and the template, when the data gives one; else ``candidates``, the
    relation paths from the topic to the answers with the share of the answers each reaches (from the KG)."""

    text: str
    topics: list[str]
    answers: list[str] = field(default_factory=list)
    template: Template | None = None
    spans: list[tuple[int, int]] = field(default_factory=list)
    source: str = ""
    candidates: list[tuple[Template, float]] = field(default_factory=list)
    #: the template was chosen among relation paths of the KG (no gold pattern)
    derived: bool = False
    #: a question ``isorag synth`` made from the KG (its row has synth's ``seeds``), not one a person asked
    synthetic: bool = False


@dataclass(frozen=True)
class GeneratorSettings:
    epochs: int = 60
    patience: int = 8
    lr: float = 1e-2
    batch: int = 128
    seed: int = 42
    dev_fraction: float = 0.1
    dev_max: int = 1000
    #: the router's threshold keeps the learned pattern where the lower confidence bound of its held-out precision
    #: reaches this
    precision: float = 0.99
    #: the confidence of that bound (one-sided)
    confidence: float = 0.95
    #: templates seen fewer times are left out
    min_count: int = 1
    #: at most this many templates (the most frequent)
    max_templates: int = 5_000
    #: questions the KG cannot answer, per answerable training question, for the none class and for calibration
    unanswerable_share: float = 0.1
    #: epochs of the path choice (question-answer pairs without a pattern)
    path_epochs: int = 20
    #: what the question's vector e(q) is (engine.learned.generator): ``words``, the mean of its words' vectors (no
    #: embedding call for a question of known words), ``sentence``, its sentence embedding (one call a new
    #: question), or ``auto``: ``sentence`` when most training questions are ``isorag synth``'s (it carries a model
    #: trained on synthetic wordings to people's: MetaQA 1-hop Hits@1 0.945 against 0.82), else ``words`` (on
    #: people's own questions the two answer alike)
    question_vector: str = "auto"
    #: fit the composer (:mod:`engine.learned.compose`): one-topic questions are answered from the relation paths at
    #: their topic, ranked by how the question's words name them and by the classifier, templates seen or not.
    #: None: when most training questions are ``isorag synth``'s (a sample of the KG's paths, few of them those
    #: people ask)
    compose: bool | None = None

    def __post_init__(self) -> None:
        for name in ("epochs", "patience", "batch", "dev_max", "min_count", "max_templates", "path_epochs"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"generator {name} must be a positive integer, got {v!r}")
        if not 0 < self.lr < 1:
            raise ConfigError(f"generator lr must lie in (0, 1), got {self.lr!r}")
        if not 0 <= self.dev_fraction < 1:
            raise ConfigError(f"generator dev_fraction must lie in [0, 1), got {self.dev_fraction!r}")
        if not 0 < self.precision <= 1:
            raise ConfigError(f"generator precision must lie in (0, 1], got {self.precision!r}")
        if not 0.5 <= self.confidence < 1:
            raise ConfigError(f"generator confidence must lie in [0.5, 1), got {self.confidence!r}")
        if self.question_vector not in ("auto", *QUESTION_VECTORS):
            raise ConfigError(f"generator question_vector must be auto, {' or '.join(QUESTION_VECTORS)}, got "
                              f"{self.question_vector!r}")
        if not 0 <= self.unanswerable_share <= 1:
            raise ConfigError(f"generator unanswerable_share must lie in [0, 1], got {self.unanswerable_share!r}")


@dataclass
class TrainedGenerator:
    checkpoint: str
    questions: int
    dev_questions: int
    templates: int
    skipped: dict[str, int]
    linking_acc: float
    template_acc: float
    pattern_acc: float
    threshold: float
    seed: int
    train_s: float
    #: the router's calibration (:class:`Calibration` as a dict): precision at the threshold, its lower bound...
    calibration: dict[str, Any] = field(default_factory=dict)
    #: question-answer pairs whose relation path was chosen among several (0 when every record had a pattern)
    paths_chosen: int = 0
    #: what the question's vector is (``words`` or ``sentence``: GeneratorSettings.question_vector)
    question_vector: str = "words"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# ---------------------------------------------------------------------------------------------------------
# records
# ---------------------------------------------------------------------------------------------------------


def _find_spans(text: str, topics: Sequence[str]) -> list[tuple[int, int]]:
    out = []
    low = text.casefold()
    for t in topics:
        m = re.search(r"(?<!\w)" + re.escape(t.casefold()) + r"(?!\w)", low)
        if m is None:
            return []
        out.append((m.start(), m.end()))
    return out


def make_record(question: str, topics: Sequence[str] | None = None, answers: Sequence[str] = (),
                pattern: Any = None, source: str = "") -> GeneratorRecord:
    """A record from a question (``[topic]`` brackets mark its topics when ``topics`` is None) and an optional
    gold pattern (a :class:`Pattern` or what :meth:`Pattern.from_json` takes)."""
    text, found = unbracket(question)
    if topics is None:
        topics = [t for _, _, t in found]
    topics = list(topics)
    spans = [(a, b) for a, b, _ in found] if found else _find_spans(text, topics)
    order = sorted(range(len(topics)), key=lambda i: spans[i][0]) if len(spans) == len(topics) else range(len(topics))
    topics = [topics[i] for i in order]
    spans = [spans[i] for i in order] if len(spans) == len(topics) else []
    tpl = None
    if pattern is not None:
        pat = pattern if isinstance(pattern, Pattern) else Pattern.from_json(pattern)
        tpl = Template.from_pattern(pat, topics)
    return GeneratorRecord(text, topics, list(answers), tpl, spans, source)


def _wordings(row: dict[str, Any], path: Path, lineno: int) -> list[str]:
    """A JSON row's question and its other wordings (synth's ``questions``, an LLM's ``paraphrased_question``)."""
    more = row.get("questions") or []
    if not isinstance(more, list) or not all(isinstance(q, str) for q in more):
        raise MalformedInputError(path, lineno, '"questions" must be a list of strings')
    para = row.get("paraphrased_question")
    return list(dict.fromkeys([row["question"], *more, *([para] if isinstance(para, str) and para else [])]))


def read_records(path: str | Path, *, limit: int | None = None) -> list[GeneratorRecord]:
    """Training questions from a file: MetaQA lines (``question [topic]<TAB>a1|a2``), or JSON Lines with
    ``question`` (and more wordings of it in ``questions``) and ``topics`` (or synth's ``seeds``), ``answers`` and
    optionally ``pattern``; each wording is one record."""
    from engine.datasets.questions import JSONL_SUFFIXES, question_rows

    path = Path(path)
    if not path.is_file():
        raise InputError(f"no question file at {path}")
    jsonl = path.suffix.lower() in JSONL_SUFFIXES
    out: list[GeneratorRecord] = []
    for lineno, row in question_rows(path, jsonl=jsonl, limit=limit):
        src = f"{path.name}:{lineno}"
        try:
            if isinstance(row, dict):
                topics = row.get("topics") or row.get("seeds") or ([row["topic"]] if row.get("topic") else None)
                if topics is not None and (not isinstance(topics, list) or not all(isinstance(t, str) for t in topics)):
                    raise MalformedInputError(path, lineno, '"topics" must be a list of strings')
                answers = row.get("answers") or []
                if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
                    raise MalformedInputError(path, lineno, '"answers" must be a list of strings')
                for q in _wordings(row, path, lineno):
                    rec = make_record(q, topics, answers, row.get("pattern"), src)
                    rec.synthetic = "seeds" in row
                    out.append(rec)
            else:
                q, answers = row[0], row[1]
                if "[" not in q:
                    raise MalformedInputError(path, lineno, "no [topic entity] in the question")
                out.append(make_record(q, None, answers, None, src))
        except PatternError as e:
            raise MalformedInputError(path, lineno, f"pattern: {e}") from e
    if not out:
        raise InputError(f"{path}: no questions in it")
    return out


#: relation paths kept per question-answer pair for the training to choose among
MAX_CANDIDATES = 12
#: a path whose F1 against the answers is under this share of the best path's is no candidate
MIN_F1 = 0.2
#: a relation path's precision is measured on at most this many of the training questions it reaches answers of
PRECISION_SAMPLE = 20
#: questions worded alike that a question-answer pair's path follows when most of them agree
CONSENSUS_SUPPORT = 3
#: how much a candidate path's weight follows how well the question's words name its relations
NAMING = 3.0


def derive_candidates(graph: GraphReader, records: Sequence[GeneratorRecord], *, progress: bool = False) -> int:
    """Give each record without a template the relation paths from its first topic to its answers, each weighed by
    its F1 against them; returns how many records have neither. Recall is the question's own (the share of its
    answers the path reaches, :func:`~engine.learned.templates.reaching_paths`); precision, the share of what the
    path reaches that are answers, is the path's: measured once on up to :data:`PRECISION_SAMPLE` questions it
    reaches answers of (:func:`~engine.learned.templates.path_reach`), a read per question and path being the
    costliest part of the training otherwise."""
    from engine.scoring.qa import resolve_entities

    todo = [r for r in records if r.template is None and not r.candidates and r.topics and r.answers]
    if not todo:
        return sum(r.template is None and not r.candidates for r in records)
    ids = resolve_entities(graph, [x for r in todo for x in [r.topics[0], *r.answers]])
    names = {ri.type: ri.name for ri in graph.relation_catalog().values()}
    from tqdm import tqdm

    seen: dict[tuple[int, tuple[int, ...]], list[PathHit]] = {}
    hits: list[tuple[GeneratorRecord, int, list[PathHit]]] = []
    for r in tqdm(todo, desc="relation paths from the KG", unit="q", disable=not progress):
        topic = ids.get(r.topics[0]) or []
        answers = tuple(sorted({e for a in r.answers for e in ids.get(a, [])}))
        if not topic or not answers:
            continue
        key = (topic[0], answers)
        if key not in seen:  # one question asked in several wordings
            seen[key] = reaching_paths(graph, topic[0], answers, names=names)
        if seen[key]:
            hits.append((r, topic[0], seen[key]))
    precision = _path_precision(graph, [(topic, h) for _, topic, hs in hits for h in hs], progress)
    for r, _, hs in hits:
        f1 = [2 * h.recall * precision[h.template] / (h.recall + precision[h.template]) for h in hs]
        best = max(f1)
        ranked = sorted(((w, h) for w, h in zip(f1, hs) if w >= MIN_F1 * best and w > 0),
                        key=lambda x: (-x[0], len(x[1].types), x[1].template.key()))
        r.candidates = [(h.template, w) for w, h in ranked[:MAX_CANDIDATES]]
        if r.candidates:
            r.topics, r.spans, r.derived = r.topics[:1], r.spans[:1], True
    return sum(r.template is None and not r.candidates for r in records)


def _path_precision(graph: GraphReader, found: Sequence[tuple[int, PathHit]], progress: bool) -> dict[Template, float]:
    """Per relation path, the mean share of what it reaches that are answers, on up to PRECISION_SAMPLE topics."""
    from tqdm import tqdm

    sample: dict[Template, list[tuple[int, PathHit]]] = {}
    for topic, h in found:
        got = sample.setdefault(h.template, [])
        if len(got) < PRECISION_SAMPLE:
            got.append((topic, h))
    by_topic: dict[int, list[PathHit]] = {}
    for pairs in sample.values():
        for topic, h in pairs:
            by_topic.setdefault(topic, []).append(h)
    shares: dict[Template, list[float]] = {}
    for topic, hs in tqdm(by_topic.items(), desc="precision of the paths", unit="topic", disable=not progress):
        for h, reach in zip(hs, path_reach(graph, topic, hs)):
            shares.setdefault(h.template, []).append(h.reached / max(reach, h.reached))
    return {t: float(np.mean(v)) for t, v in shares.items()}


# ---------------------------------------------------------------------------------------------------------
# the classifier's data and its fitting
# ---------------------------------------------------------------------------------------------------------


@dataclass
class _Data:
    """Features of a set of masked questions: sentence embeddings, n-gram ids, word-relation cosines."""

    emb: Any  # torch.Tensor [N, dim]
    ids: list[list[int]]
    shapes: list[list[int]]
    sims: list[np.ndarray]  # per question [words, relations]

    def rows(self, idx: Sequence[int], rel: TemplateRelations) -> tuple[Any, ...]:
        import torch

        i, o = featurize([self.ids[j] for j in idx])
        si, so = featurize([self.shapes[j] for j in idx])
        align, contrast, cover = alignment([self.sims[j] for j in idx], rel)
        return (self.emb[list(idx)], i, o, si, so, torch.as_tensor(align), torch.as_tensor(contrast),
                torch.as_tensor(cover))


def composes(s: GeneratorSettings, records: Sequence[GeneratorRecord]) -> bool:
    """Whether the training fits the path composer (``GeneratorSettings.compose``; None: when most of the records
    are synthetic). Trained on people's questions the classifier's templates answer as well without it (MetaQA,
    gold patterns: Hits@1 within one question of 180) and a question costs no embedding call, where the composer
    embeds each new question."""
    return s.compose if s.compose is not None else 2 * sum(r.synthetic for r in records) > len(records)


def question_vector_of(s: GeneratorSettings, records: Sequence[GeneratorRecord]) -> str:
    """The ``e(q)`` a generator is trained with (``GeneratorSettings.question_vector``; ``auto``: ``sentence`` when
    most of the records are synthetic, else ``words``)."""
    if s.question_vector != "auto":
        return s.question_vector
    return "sentence" if 2 * sum(r.synthetic for r in records) > len(records) else "words"


def _features(masked: Sequence[str], embedder: TextEmbedder, aligner: RelationAligner, kind: str,
              progress: bool) -> _Data:
    import torch

    # (a sentence embedding through the model itself, not the bounded cache: each masked question is new)
    encode = embedder.encode if kind == "sentence" else aligner.encode
    emb = torch.as_tensor(question_vectors(masked, encode, embedder.dim, kind, progress=progress))
    return _Data(emb, [ngram_ids(m) for m in masked], [shape_ids(m) for m in masked],
                 aligner.word_sims(masked, progress=progress))


Targets = list[tuple[list[int], list[float]]]  # per question: its template indices and their weights


def _fit(data: _Data, targets: Targets, dev: _Data, dev_targets: Targets, align_m: TemplateRelations, *,
         templates: Sequence[Template], epochs: int, patience: int, s: GeneratorSettings, rng: random.Random,
         progress: bool, desc: str) -> tuple[Any, float, int]:
    """A classifier trained on the marginal likelihood of each question's templates (cross-entropy when each has
    one), early-stopped on that likelihood on the held-out questions. Returns the model, the held-out share whose
    most probable class is one of theirs (at the best epoch) and the epochs run."""
    import torch
    from tqdm import tqdm

    model = TemplateClassifier(data.emb.shape[1], len(templates), skeletons=skeleton_index(templates))
    dense = [p for n, p in model.named_parameters() if not n.startswith(("bag.", "shape."))]
    opts = [torch.optim.Adam(dense, lr=s.lr),
            torch.optim.SparseAdam([*model.bag.parameters(), *model.shape.parameters()], lr=s.lr)]
    best_loss, best_acc, best_state, bad, epoch = math.inf, -1.0, None, 0, 0
    dev_rows = dev.rows(range(len(dev.ids)), align_m) if dev.ids else None
    bar = tqdm(range(1, epochs + 1), desc=desc, unit="epoch", disable=not progress)
    for epoch in bar:  # noqa: B007 - the epochs run are returned
        model.train()
        order = list(range(len(targets)))
        rng.shuffle(order)
        for k in range(0, len(order), s.batch):
            batch = order[k:k + s.batch]
            loss = _marginal_nll(model(*data.rows(batch, align_m)), [targets[j] for j in batch])
            for opt in opts:
                opt.zero_grad()
            loss.backward()
            for opt in opts:
                opt.step()
        model.eval()
        if dev_rows is None:
            best_state = None
            continue
        with torch.no_grad():
            logits = model(*dev_rows)
            dev_loss = float(_marginal_nll(logits, dev_targets))
            top = logits.argmax(-1).tolist()
        acc = float(np.mean([t in cls for t, (cls, _) in zip(top, dev_targets)]))
        bar.set_postfix(acc=f"{acc:.4f}", loss=f"{dev_loss:.4f}")
        # stopped on the held-out likelihood, not the accuracy: the probabilities are what the router reads, and
        # they keep improving after every held-out question is right
        if dev_loss < best_loss - 1e-4:
            best_loss, best_acc, bad = dev_loss, acc, 0
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            bad += 1
        if bad >= patience:
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    return model, (best_acc if dev_rows is not None else -1.0), epoch


def _marginal_nll(logits: Any, targets: Targets) -> Any:
    """``-mean log sum_{t in targets} w_t p(t | q)``: cross-entropy when a question has one template."""
    import torch

    logp = torch.log_softmax(logits, -1)
    lw = torch.full_like(logp, -math.inf)
    for b, (cls, w) in enumerate(targets):
        lw[b, cls] = torch.log(torch.as_tensor(w, dtype=logp.dtype))
    return -torch.logsumexp(logp + lw, -1).mean()


def choose_paths(model: Any, data: _Data, candidates: Sequence[Sequence[tuple[int, float]]],
                 align_m: TemplateRelations) -> list[int]:
    """Per question, the index of its most probable template among its candidates (probability times the path's
    F1 against the answers), under ``model`` (trained on the marginal likelihood, see the module
    docstring)."""
    import torch

    out: list[int] = []
    with torch.no_grad():
        for k in range(0, len(candidates), 1024):
            idx = list(range(k, min(k + 1024, len(candidates))))
            logp = torch.log_softmax(model(*data.rows(idx, align_m)), -1).numpy()
            for b, j in enumerate(idx):
                out.append(max(candidates[j], key=lambda c: logp[b, c[0]] + math.log(c[1]))[0])
    return out


# ---------------------------------------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------------------------------------


def train_generator(graph: GraphReader, vectors: VectorIndex, embedder: TextEmbedder,
                    records: Sequence[GeneratorRecord], *, kg: str, out: str | Path,
                    settings: GeneratorSettings | None = None, progress: bool = True,
                    echo: Callable[[str], None] | None = None, kg_id: str | None = None) -> TrainedGenerator:
    """Train a generator for ``kg`` (``kg_id``: its identity, recorded in the file) on ``records`` and write it to
    ``out`` (see the module docstring)."""
    import torch

    s = settings or GeneratorSettings()
    threads = torch.get_num_threads()
    # one thread: the model is small, and a second thread contending for a busy core made steps 10x slower here
    torch.set_num_threads(1)
    try:
        return _train(graph, vectors, embedder, records, kg=kg, out=out, s=s, progress=progress,
                      say=echo or (lambda m: print(m, file=sys.stderr)), kg_id=kg_id)
    finally:
        torch.set_num_threads(threads)


@dataclass
class _Split:
    """The usable questions, their template candidates (over ``templates``), and the held-out ones."""

    train: list[GeneratorRecord]
    dev: list[GeneratorRecord]
    templates: list[Template]
    skipped: Counter[str]


def _usable(graph: GraphReader, records: Sequence[GeneratorRecord], s: GeneratorSettings, rng: random.Random,
            progress: bool) -> _Split:
    skipped: Counter[str] = Counter()
    kept = []
    for r in records:
        if len(r.text) > MAX_QUESTION_CHARS:
            skipped["too_long"] += 1
        else:
            kept.append(r)
    missing = derive_candidates(graph, kept, progress=progress)
    if missing:
        skipped["no_template"] = missing
    usable: list[GeneratorRecord] = []
    for r in kept:
        if r.template is None and not r.candidates:
            continue
        if len(r.spans) != len(r.topics) or not r.spans:
            skipped["topic_not_in_text"] += 1
            continue
        if r.template is not None:
            r.candidates = [(r.template, 1.0)]
        elif len(r.candidates) == 1:
            r.template = r.candidates[0][0]
        usable.append(r)
    support: Counter[Template] = Counter(t for r in usable for t, _ in r.candidates)
    templates = sorted(support, key=lambda t: (-support[t], t.key()))[:s.max_templates]
    allowed = set(templates)
    before = len(usable)
    for r in usable:
        r.candidates = [(t, w) for t, w in r.candidates if t in allowed]
    usable = [r for r in usable if r.candidates]
    if before > len(usable):
        skipped["rare_template"] = before - len(usable)
    if not usable:
        raise InputError("no training question has both a template (a gold pattern or a relation path in the KG) "
                         "and its topics in its text: nothing to train the generator on")
    # held out by sample: the wordings of one question (one line of the file) stay on one side
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(usable):
        groups.setdefault(r.source or f"#{i}", []).append(i)
    keys = list(groups)
    rng.shuffle(keys)
    n_dev = min(s.dev_max, int(len(usable) * s.dev_fraction)) if len(usable) >= 10 else 0
    dev_idx: list[int] = []
    for k in keys:
        if len(dev_idx) >= n_dev:
            break
        dev_idx += groups[k]
    held = set(dev_idx)
    return _Split([r for i, r in enumerate(usable) if i not in held], [usable[i] for i in dev_idx], templates,
                  skipped)


def _train(graph: GraphReader, vectors: VectorIndex, embedder: TextEmbedder, records: Sequence[GeneratorRecord], *,
           kg: str, out: str | Path, s: GeneratorSettings, progress: bool,
           say: Callable[[str], None], kg_id: str | None = None) -> TrainedGenerator:
    """The steps of the module docstring, each a call (``kg_id``: the identity of the KG, which the file records)."""
    from engine.scoring.train import seed_everything

    t_start = time.perf_counter()
    seed_everything(s.seed)
    rng = random.Random(s.seed)
    sp = _usable(graph, records, s, rng, progress)
    say(f"generator: {len(sp.train):,} training and {len(sp.dev):,} held-out questions, {len(sp.templates)} "
        f"candidate templates" + (f", skipped {dict(sp.skipped)}" if sp.skipped else ""))
    masked = [mask(r.text, r.spans) for r in sp.train]
    link = _link_model(graph, sp, masked)  # 1.
    # questions the KG cannot answer: one half of the words for training, the other for calibration
    relations = sorted({rel for t in sp.templates for rel in t.relations})
    encode = cached_encode(embedder.encode)
    aligner = RelationAligner(relations, encode)
    words = usable_words(relations, {w for m in masked for w in m.lower().split()}, encode)
    topics = sorted({t for r in sp.train for t in r.topics})
    names = _names_relation(aligner)
    n_neg = int(round(len(sp.train) * s.unanswerable_share))
    negatives = [mask(text, [span]) for text, _, span in
                 unanswerable_questions(words, topics, n_neg - n_neg // 2, 0, rng)
                 + reworded_questions([(r.text, r.spans) for r in sp.train], names, words, n_neg // 2, 0, rng)]
    kind = question_vector_of(s, records)
    data = _features(masked + negatives, embedder, aligner, kind, progress)
    dev_data = _features([mask(r.text, r.spans) for r in sp.dev], embedder, aligner, kind, False)
    chosen = _choose_templates(sp, data, dev_data, len(negatives), relations, s, rng, progress, say)  # 2.
    train, dev, templates = chosen.train, chosen.dev, chosen.templates
    index = {t: i for i, t in enumerate(templates)}
    align_m = TemplateRelations.of(templates, relations)
    targets = [([index[r.template]], [1.0]) for r in train if r.template] + [([len(templates)], [1.0])] * len(negatives)
    dev_t = [([index[r.template]], [1.0]) for r in dev if r.template]
    model, best_acc, epoch = _fit(chosen.data, targets, chosen.dev_data, dev_t, align_m, templates=templates,
                                  epochs=s.epochs, patience=s.patience, s=s, rng=rng, progress=progress,
                                  desc="generator epochs")  # 3.
    # 4. end to end on the held-out questions and unanswerable ones: linking, pattern accuracy, the threshold
    # (the relations' names too: the alignment embeds them when the generator first scores a question)
    vocab = list(dict.fromkeys([*aligner.names,
                                *question_texts(masked + negatives + [mask(r.text, r.spans) for r in sp.dev])]))
    ckpt = GeneratorCheckpoint(kg, embedder.slug, int(embedder.dim), templates, model, link, 1.0, s.seed,
                               kg_id=kg_id, question_vector=kind, vocab=vocab,
                               vocab_vectors=np.asarray(encode(vocab), dtype=np.float32))
    gen = PatternGenerator(ckpt, graph=graph, vectors=vectors, embedder=embedder, encode=encode)
    # 3b. the composer, on the held-out questions (the classifier's probabilities there are honest)
    if composes(s, records):
        ckpt.composer, fitted = _fit_composer(gen, dev, s.seed)
        if ckpt.composer is not None:
            say(f"generator: path composer fitted on {fitted:,} held-out questions")
    n_cal = max(len(dev) // 5, 20 if dev else 0)
    unanswerable = [q for q, _, _ in unanswerable_questions(words, topics, n_cal - n_cal // 2, 1, rng)
                    + reworded_questions([(r.text, r.spans) for r in dev], names, words, n_cal // 2, 1, rng)]
    linked_ok, pattern_ok, rows = _held_out(gen, dev, unanswerable, progress)
    ckpt.score = fit_score(rows)
    cal = calibrate([(ckpt.probability(pt, c) if pt > 0 else 0.0, ok) for pt, c, ok in rows], s.precision,
                    s.confidence, unanswerable=len(unanswerable))
    ckpt.threshold = cal.threshold
    n = max(len(dev), 1)
    ckpt.info = {"questions": len(train), "dev_questions": len(dev), "templates": len(templates),
                 "epochs": epoch, "template_acc": round(best_acc, 4) if dev else None,
                 "linking_acc": round(linked_ok / n, 4) if dev else None,
                 "pattern_acc": round(pattern_ok / n, 4) if dev else None, "precision": s.precision,
                 "calibration": cal.to_dict(), "paths_chosen": chosen.chosen, "unanswerable_words": len(words),
                 "skipped": dict(sp.skipped), "question_vector": kind,
                 "trained_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    path = save_generator(ckpt, out)
    return TrainedGenerator(str(path), len(train), len(dev), len(templates), dict(sp.skipped),
                            round(linked_ok / n, 4), round(max(best_acc, 0.0), 4), round(pattern_ok / n, 4),
                            ckpt.threshold, s.seed, round(time.perf_counter() - t_start, 2), cal.to_dict(),
                            chosen.chosen, kind)


def _fit_composer(gen: PatternGenerator, records: Sequence[GeneratorRecord], seed: int) -> tuple[Composer | None, int]:
    """The composer's weights (:func:`engine.learned.compose.fit_composer`) on the one-topic chain questions among
    ``records`` whose topic the generator links right and whose gold path is among the paths at it, each read as
    :meth:`PatternGenerator.propose` reads it, and on :data:`SYNONYM_SHARE` of them again with one relation named by
    a weak synonym (:func:`engine.learned.compose.synonym_examples`). Returns the composer (None with no such
    question) and how many questions it was fitted on."""
    examples: list[tuple[PathInputs, int]] = []
    for r in records:
        if r.template is None or len(r.topics) != 1 or chain_steps(r.template) is None:
            continue
        readings = gen.readings(r.text)
        if not readings:
            continue
        i, p, ok, _ = gen._joint(r.text, readings)
        linked = readings[i]
        if [normalize_name(t.name) for t in linked] != [normalize_name(r.topics[0])]:
            continue
        got = gen.path_inputs(r.text, linked, np.where(ok, p[:-1], 0.0))
        if got is None or r.template not in got[0]:
            continue
        examples.append((got[1], got[0].index(r.template)))
    rows = [(inputs.features(), g) for inputs, g in examples]
    return fit_composer(rows + synonym_examples(examples, SYNONYM_SHARE, seed), seed=seed), len(examples)


def _names_relation(aligner: RelationAligner) -> Callable[[Sequence[str]], list[bool]]:
    """Whether each word names one of the relations (cosine at least NAMES to its name)."""
    def names(tokens: Sequence[str]) -> list[bool]:
        sims = aligner.word_sims(list(tokens))
        return [bool(len(x)) and float(x.max()) >= NAMES for x in sims]

    return names


def _link_model(graph: GraphReader, sp: _Split, masked: Sequence[str]) -> Any:
    """The linking acceptance fitted on the training questions (their topics the gold)."""
    seen: Counter[str] = Counter()
    for m in masked:
        seen.update(word_ngrams(m))
    rate = {g: round(c / len(sp.train), 5) for g, c in seen.items() if c >= 2}
    cands = exact_candidates([r.text for r in sp.train], graph)
    max_topics = max(len(r.topics) for r in sp.train + sp.dev)
    return fit_link_model([(r.text, c, r.topics) for r, c in zip(sp.train, cands)], rate, max_topics)


@dataclass
class _Chosen:
    """The questions with one template each (train, dev), the templates, their features, and how many
    question-answer pairs had their path chosen among several."""

    train: list[GeneratorRecord]
    dev: list[GeneratorRecord]
    templates: list[Template]
    data: _Data
    dev_data: _Data
    chosen: int


def _choose_templates(sp: _Split, data: _Data, dev_data: _Data, negatives: int, relations: Sequence[str],
                      s: GeneratorSettings, rng: random.Random, progress: bool, say: Callable[[str], None]) -> _Chosen:
    """Step 2: one template per question (a pair's path chosen across the training set), the templates no question
    took dropped; ``data`` holds the training questions, then ``negatives`` unanswerable ones."""
    train, dev, templates = sp.train, sp.dev, sp.templates
    index = {t: i for i, t in enumerate(templates)}
    chosen = sum(len(r.candidates) > 1 for r in train + dev)
    if chosen:
        align_m = TemplateRelations.of(templates, relations)
        _named_paths(train, data, align_m, index)
        _named_paths(dev, dev_data, align_m, index)
        none = [([len(templates)], [1.0])] * negatives
        targets = [([index[t] for t, _ in r.candidates], [w for _, w in r.candidates]) for r in train] + none
        dev_t = [([index[t] for t, _ in r.candidates], [w for _, w in r.candidates]) for r in dev]
        model, _, _ = _fit(data, targets, dev_data, dev_t, align_m, templates=templates, epochs=s.path_epochs,
                           patience=max(2, s.patience // 2), s=s, rng=rng, progress=progress,
                           desc="choosing relation paths")
        picks = choose_paths(model, data, [[(index[t], w) for t, w in r.candidates] for r in train], align_m)
        picks += choose_paths(model, dev_data, [[(index[t], w) for t, w in r.candidates] for r in dev], align_m)
        for r, j in zip(train + dev, picks):
            r.template = templates[j]
    relabelled = _consensus(train + dev)
    if relabelled:
        say(f"generator: {relabelled:,} question-answer pairs take the path of the questions worded as they are")
    counts = Counter(r.template for r in train + dev if r.template is not None)
    kept = _hinted([t for t in sorted(counts, key=lambda t: (-counts[t], t.key())) if counts[t] >= s.min_count],
                   train + dev)
    if len(kept) < len(templates):
        say(f"generator: {len(kept)} templates kept"
            + (f" after choosing the relation paths of {chosen:,} question-answer pairs" if chosen else ""))
    index = {t: i for i, t in enumerate(kept)}
    keep = [i for i, r in enumerate(train) if r.template in index]
    keep_dev = [i for i, r in enumerate(dev) if r.template in index]
    return _Chosen([train[i] for i in keep], [dev[i] for i in keep_dev], kept,
                   _subset(data, keep + list(range(len(train), len(train) + negatives))), _subset(dev_data, keep_dev),
                   chosen)


def _named_paths(records: Sequence[GeneratorRecord], data: _Data, rel: TemplateRelations,
                 index: Mapping[Template, int]) -> None:
    """Weigh each pair's candidate paths also by how well the question's words name their relations (``v`` of
    :mod:`engine.learned.generator`, ``exp(NAMING (v - max v))``): where two paths explain the answers equally
    (one person directed and wrote), the one the question names wins."""
    for k in range(0, len(records), 1024):
        idx = list(range(k, min(k + 1024, len(records))))
        _, _, cover = alignment([data.sims[j] for j in idx], rel)
        for b, j in enumerate(idx):
            r = records[j]
            if len(r.candidates) > 1:
                v = [float(cover[b, index[t]]) for t, _ in r.candidates]
                top = max(v)
                r.candidates = [(t, w * math.exp(NAMING * (x - top))) for (t, w), x in zip(r.candidates, v)]


def _consensus(records: Sequence[GeneratorRecord], support: int = CONSENSUS_SUPPORT) -> int:
    """Give each question-answer pair the path most of the pairs worded exactly as it is (topics masked) took, where
    at least ``support`` of them are and most agree; returns how many changed. Its own answers may favour another
    path where the KG lacks a triple its question needs: the wording says which path it asks, as a gold pattern
    would."""
    by: dict[str, Counter[Template]] = {}
    for r in records:
        if r.derived and r.template is not None:
            by.setdefault(mask(r.text, r.spans).casefold(), Counter())[r.template] += 1
    changed = 0
    for r in records:
        got = by.get(mask(r.text, r.spans).casefold()) if r.derived else None
        if not got:
            continue
        (top, n), total = got.most_common(1)[0], sum(got.values())
        if total >= support and 2 * n > total and r.template != top:
            r.template = top
            changed += 1
    return changed


def _hinted(templates: Sequence[Template], records: Sequence[GeneratorRecord]) -> list[Template]:
    """The templates with the type hints their questions most often had."""
    hints: dict[Template, Counter[tuple[tuple[str, str], ...]]] = {}
    for r in records:
        if r.template is not None:
            hints.setdefault(r.template, Counter())[tuple(sorted(r.template.types.items()))] += 1
    return [Template(t.triples, dict(hints[t].most_common(1)[0][0])) if t in hints else t for t in templates]


def _subset(data: _Data, idx: Sequence[int]) -> _Data:
    return _Data(data.emb[list(idx)], [data.ids[i] for i in idx], [data.shapes[i] for i in idx],
                 [data.sims[i] for i in idx])


def _held_out(gen: PatternGenerator, dev: Sequence[GeneratorRecord], unanswerable: Sequence[str],
              progress: bool) -> tuple[int, int, list[tuple[float, float, bool]]]:
    """Held-out questions end to end: how many are linked right, how many get their template, and per question
    (its top template's probability, the linking confidence, right) for the calibration; an unanswerable question
    is never right."""
    from tqdm import tqdm

    linked_ok, pattern_ok, rows = 0, 0, []
    for r in tqdm(dev, desc="calibrating", unit="q", disable=not progress):
        prop = gen.propose(r.text, beam=1)
        lok = [normalize_name(t.name) for t in prop.linked] == [normalize_name(t) for t in r.topics]
        pok = lok and bool(prop.templates) and prop.templates[0] == r.template
        linked_ok += lok
        pattern_ok += pok
        rows.append((prop.template_probabilities[0] if prop.beam else 0.0, prop.link_confidence, pok))
    for q in unanswerable:
        prop = gen.propose(q, beam=1)
        rows.append((prop.template_probabilities[0] if prop.beam else 0.0, prop.link_confidence, False))
    return linked_ok, pattern_ok, rows


def fit_score(rows: Sequence[tuple[float, float, bool]], l2: float = 1e-2) -> tuple[float, float, float] | None:
    """``(w_t, w_l, b)`` of ``P(right) = sigmoid(w_t logit p_t + w_l logit c + b)`` on held-out ``(p_t, c, right)``
    (logistic regression; Platt scaling with the linking confidence as a second score); None when the rows hold
    no right and no wrong pattern to tell apart."""
    import torch

    data = [(pt, c, ok) for pt, c, ok in rows if pt > 0 and c > 0]
    if not any(ok for *_, ok in data) or all(ok for *_, ok in data):
        return None

    def logit(p: float) -> float:
        p = min(max(p, 1e-6), 1 - 1e-6)
        return math.log(p / (1 - p))

    x = torch.as_tensor([[logit(pt), logit(c), 1.0] for pt, c, _ in data], dtype=torch.float64)
    # Platt's targets: (n+ + 1) / (n+ + 2) and 1 / (n- + 2), not 1 and 0, so that held-out questions that are all
    # told apart do not drive the weights (and the probabilities) to the extremes
    pos = sum(1 for *_, ok in data if ok)
    neg = len(data) - pos
    y = torch.as_tensor([(pos + 1) / (pos + 2) if ok else 1 / (neg + 2) for *_, ok in data], dtype=torch.float64)
    w = torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w], lr=0.5, max_iter=200, line_search_fn="strong_wolfe")

    def closure() -> Any:
        opt.zero_grad()
        loss: Any = torch.nn.functional.binary_cross_entropy_with_logits(x @ w, y) + l2 * (w[:2] ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)  # type: ignore[no-untyped-call]
    w_t, w_l, b = (float(v) for v in w.detach())
    return (w_t, w_l, b) if all(math.isfinite(v) for v in (w_t, w_l, b)) else None


# ---------------------------------------------------------------------------------------------------------
# the router's threshold
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Calibration:
    """The router's threshold and what it rests on: the held-out patterns at or above it (``kept`` of
    ``questions``, ``unanswerable`` of which the KG cannot answer), their observed precision and its lower
    confidence bound; ``certified`` when that bound reaches the precision asked for (else the threshold is the
    one with the highest bound: too few held-out questions to certify more)."""

    threshold: float
    precision: float
    lower_bound: float
    kept: int
    questions: int
    unanswerable: int
    target: float
    confidence: float
    certified: bool

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in self.__dict__.items()}


def threshold_line(cal: Mapping[str, Any]) -> str:
    """The router's threshold and its held-out precision in one line (what ``isorag train-generator`` prints)."""
    if not cal or not cal.get("kept"):
        return (f"router threshold {cal.get('threshold', 1.0):.3f}: no held-out pattern to calibrate it on, so the "
                f"learned pattern is used only when forced (route=learned)")
    unanswerable = f", {cal['unanswerable']} of them about relations the KG lacks" if cal.get("unanswerable") else ""
    verdict = ("" if cal.get("certified") else
               f"; too few held-out questions to show {100 * cal['target']:.0f}% at {100 * cal['confidence']:.0f}% "
               f"confidence, the threshold with the highest bound is used")
    return (f"router threshold {cal['threshold']:.3f}: held-out patterns at or above it are right "
            f"{100 * cal['precision']:.1f}% of the time (lower {100 * cal['confidence']:.0f}% bound "
            f"{100 * cal['lower_bound']:.1f}%; {cal['kept']:,} kept of {cal['questions']:,} held-out questions"
            f"{unanswerable}){verdict}")


def wilson_lower(right: int, n: int, confidence: float) -> float:
    """The one-sided Wilson lower confidence bound of a proportion ``right / n``."""
    if n <= 0:
        return 0.0
    z = statistics.NormalDist().inv_cdf(confidence)
    p = right / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + z * z / n))


def calibrate(scored: Sequence[tuple[float, bool]], precision: float, confidence: float = 0.95,
              unanswerable: int = 0) -> Calibration:
    """The lowest probability ``t > 0`` such that the lower confidence bound of the precision of the held-out patterns
    at or above it reaches ``precision``; when none does, the ``t`` with the highest bound. Never 0 (a pattern of
    probability 0, no template fitting, is never kept); 1.0 when no held-out pattern has a probability.
    ``scored``: (probability, right) per held-out question, ``unanswerable`` of them about what the KG lacks."""
    ranked = sorted(((p, ok) for p, ok in scored if p > 0), key=lambda x: -x[0])
    best: tuple[float, float, float, int] | None = None  # (lowest kept probability, precision, bound, kept)
    top: tuple[float, float, float, int] | None = None
    right = 0
    for i, (p, ok) in enumerate(ranked, start=1):
        right += ok
        if i < len(ranked) and ranked[i][0] == p:
            continue  # ties are kept together
        lb = wilson_lower(right, i, confidence)
        here = (p, right / i, lb, i)
        if lb >= precision:
            best = here
        if top is None or lb >= top[2]:
            top = here
    chosen = best or top
    if chosen is None:
        return Calibration(1.0, 0.0, 0.0, 0, len(scored), unanswerable, precision, confidence, False)
    low, prec, lb, kept = chosen
    # the top of the gap between the lowest kept probability and the highest left out: the held-out questions the
    # KG cannot answer are made by the training and easier to tell than a user's, so no room is given below
    return Calibration(float(low), prec, lb, kept, len(scored), unanswerable, precision, confidence,
                       best is not None)
