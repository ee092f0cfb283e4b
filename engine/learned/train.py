"""Training the pattern generator from question-answer pairs (``isorag train-generator``).

Each training question gives: its plain text (MetaQA's ``[brackets]`` removed), the spans of its topics in that
text (the linking gold) and its template (:mod:`engine.learned.templates`): from the record's gold pattern where it
has one (``isorag synth`` records, the demo's questions, ``"pattern"`` in JSON Lines), else derived from the KG
(the shortest relation path from the topic that reaches most answers). Then, with the seed fixed
(:func:`engine.scoring.train.seed_everything`) and recorded in the file:

1. the linking acceptance (:func:`engine.linking.text.fit_link_model`) on the training questions' candidates;
2. the template classifier (:class:`engine.learned.generator.TemplateClassifier`): cross-entropy, Adam, early
   stopping on the held-out questions' template accuracy;
3. the router's threshold: on the held-out questions, run end to end (linking included), the lowest pattern
   probability above which the top pattern is right at least ``precision`` of the time.
"""

from __future__ import annotations

import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine._errors import ConfigError, InputError, MalformedInputError, PatternError
from engine.learned.generator import (GeneratorCheckpoint, PatternGenerator, TemplateClassifier, featurize,
                                      ngram_ids, save_generator)
from engine.linking.text import exact_candidates, fit_link_model, mask, unbracket, word_ngrams
from engine.learned.templates import Template, derive_template
from engine.retrieval.pattern import Pattern
from engine.retrieval.retriever import normalize_name

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import GraphReader, TextEmbedder, VectorIndex

__all__ = ["GeneratorRecord", "GeneratorSettings", "TrainedGenerator", "read_records", "train_generator"]


@dataclass
class GeneratorRecord:
    """One training question: plain ``text``, its topics (names, in the text's order) with their spans where
    found, the answers (names or keys) and the template, when the data gives one."""

    text: str
    topics: list[str]
    answers: list[str] = field(default_factory=list)
    template: Template | None = None
    spans: list[tuple[int, int]] = field(default_factory=list)
    source: str = ""


@dataclass(frozen=True)
class GeneratorSettings:
    epochs: int = 60
    patience: int = 8
    lr: float = 1e-2
    batch: int = 128
    seed: int = 42
    dev_fraction: float = 0.1
    dev_max: int = 1000
    #: the router's threshold keeps the learned pattern where it is right this often on held-out questions
    precision: float = 0.99
    #: templates seen fewer times are left out
    min_count: int = 1

    def __post_init__(self) -> None:
        for name in ("epochs", "patience", "batch", "dev_max", "min_count"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"generator {name} must be a positive integer, got {v!r}")
        if not 0 < self.lr < 1:
            raise ConfigError(f"generator lr must lie in (0, 1), got {self.lr!r}")
        if not 0 <= self.dev_fraction < 1:
            raise ConfigError(f"generator dev_fraction must lie in [0, 1), got {self.dev_fraction!r}")
        if not 0 < self.precision <= 1:
            raise ConfigError(f"generator precision must lie in (0, 1], got {self.precision!r}")


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


def read_records(path: str | Path, *, limit: int | None = None) -> list[GeneratorRecord]:
    """Training questions from a file: MetaQA lines (``question [topic]<TAB>a1|a2``), or JSON Lines with
    ``question`` and ``topics`` (or synth's ``seeds``), ``answers`` and optionally ``pattern``."""
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
                out.append(make_record(row["question"], topics, answers, row.get("pattern"), src))
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


def derive_missing(graph: GraphReader, records: Sequence[GeneratorRecord], *, progress: bool = False) -> int:
    """Give each record without a template the one derived from the KG (first topic -> answers); returns how
    many got none."""
    from engine.scoring.qa import resolve_entities

    todo = [r for r in records if r.template is None and r.topics and r.answers]
    if not todo:
        return sum(r.template is None for r in records)
    ids = resolve_entities(graph, [x for r in todo for x in [r.topics[0], *r.answers]])
    names = {ri.type: ri.name for ri in graph.relation_catalog().values()}
    from tqdm import tqdm

    for r in tqdm(todo, desc="relation paths from the KG", unit="q", disable=not progress):
        topic = ids.get(r.topics[0]) or []
        answers = sorted({e for a in r.answers for e in ids.get(a, [])})
        if not topic or not answers:
            continue
        got = derive_template(graph, topic[0], answers, names=names)
        if got is not None:
            r.template = got[0]
            r.topics = r.topics[:1]
            r.spans = r.spans[:1]
    return sum(r.template is None for r in records)


# ---------------------------------------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------------------------------------


def _batches(n: int, size: int, rng: random.Random) -> list[list[int]]:
    order = list(range(n))
    rng.shuffle(order)
    return [order[i:i + size] for i in range(0, n, size)]


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


def _train(graph: GraphReader, vectors: VectorIndex, embedder: TextEmbedder, records: Sequence[GeneratorRecord], *,
           kg: str, out: str | Path, s: GeneratorSettings, progress: bool,
           say: Callable[[str], None], kg_id: str | None = None) -> TrainedGenerator:
    import torch
    from tqdm import tqdm

    from engine.scoring.train import seed_everything

    t_start = time.perf_counter()
    seed_everything(s.seed)
    rng = random.Random(s.seed)
    skipped: Counter[str] = Counter()
    missing = derive_missing(graph, records, progress=progress)
    if missing:
        skipped["no_template"] = missing
    usable: list[tuple[GeneratorRecord, Template]] = []
    for r in records:
        if r.template is None:
            continue
        if len(r.spans) != len(r.topics) or not r.spans:
            skipped["topic_not_in_text"] += 1
            continue
        usable.append((r, r.template))
    counts = Counter(t for _, t in usable)
    templates = sorted((t for t, c in counts.items() if c >= s.min_count), key=lambda t: (-counts[t], t.key()))
    index = {t: i for i, t in enumerate(templates)}
    rare = [r for r, t in usable if t not in index]
    if rare:
        skipped["rare_template"] = len(rare)
    usable = [(r, t) for r, t in usable if t in index]
    if not usable:
        raise InputError("no training question has both a template (a gold pattern or a relation path in the KG) "
                         "and its topics in its text: nothing to train the generator on")
    # type hints: the most common per template (kept on the template the generator fills)
    hints: dict[Template, Counter[tuple[tuple[str, str], ...]]] = {}
    for _, t in usable:
        hints.setdefault(t, Counter())[tuple(sorted(t.types.items()))] += 1
    templates = [Template(t.triples, dict(hints[t].most_common(1)[0][0])) for t in templates]
    order = list(range(len(usable)))
    rng.shuffle(order)
    n_dev = min(s.dev_max, int(len(usable) * s.dev_fraction)) if len(usable) >= 10 else 0
    dev = [usable[i] for i in order[:n_dev]]
    train = [usable[i] for i in order[n_dev:]]
    say(f"generator: {len(train):,} training and {len(dev):,} held-out questions, {len(templates)} templates"
        + (f", skipped {dict(skipped)}" if skipped else ""))

    # 1. linking
    masked = [mask(r.text, r.spans) for r, _ in train]
    seen: Counter[str] = Counter()
    for m in masked:
        seen.update(word_ngrams(m))
    rate = {g: round(c / len(train), 5) for g, c in seen.items() if c >= 2}
    cands = exact_candidates([r.text for r, _ in train], graph)
    max_topics = max(len(r.topics) for r, _ in usable)
    link = fit_link_model([(r.text, c, r.topics) for (r, _), c in zip(train, cands)], rate, max_topics)

    # 2. the template classifier
    y = torch.as_tensor([index[t] for _, t in train], dtype=torch.long)
    emb = torch.as_tensor(embedder.encode(masked, progress=progress), dtype=torch.float32)
    ids = [ngram_ids(m) for m in masked]
    dev_masked = [mask(r.text, r.spans) for r, _ in dev]
    dev_y = np.array([index[t] for _, t in dev])
    dev_emb = torch.as_tensor(embedder.encode(dev_masked), dtype=torch.float32) if dev else None
    dev_ids = featurize([ngram_ids(m) for m in dev_masked]) if dev else None
    model = TemplateClassifier(emb.shape[1], len(templates))
    dense = [p for n, p in model.named_parameters() if not n.startswith("bag.")]
    opts = [torch.optim.Adam(dense, lr=s.lr), torch.optim.SparseAdam(list(model.bag.parameters()), lr=s.lr)]
    best_acc, best_state, bad, epoch = -1.0, None, 0, 0
    bar = tqdm(range(1, s.epochs + 1), desc="generator epochs", unit="epoch", disable=not progress)
    for epoch in bar:
        model.train()
        for batch in _batches(len(train), s.batch, rng):
            i, o = featurize([ids[j] for j in batch])
            loss: Any = torch.nn.functional.cross_entropy(model(emb[batch], i, o), y[batch])
            for opt in opts:
                opt.zero_grad()
            loss.backward()
            for opt in opts:
                opt.step()
        model.eval()
        if dev_emb is not None and dev_ids is not None:
            with torch.no_grad():
                acc = float((model(dev_emb, *dev_ids).argmax(-1).numpy() == dev_y).mean())
        else:
            acc = float(epoch)
        bar.set_postfix(acc=f"{acc:.4f}")
        if acc > best_acc:
            best_acc, bad = acc, 0
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            bad += 1
        if bad >= s.patience or dev and acc >= 1.0:
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()

    # 3. end to end on the held-out questions: linking accuracy, pattern accuracy, the router's threshold
    ckpt = GeneratorCheckpoint(kg, embedder.slug, int(emb.shape[1]), templates, model, link, 0.0, s.seed,
                               kg_id=kg_id)
    gen = PatternGenerator(ckpt, graph=graph, vectors=vectors, embedder=embedder)
    linked_ok, pattern_ok, scored = 0, 0, []
    for r, want in tqdm(dev, desc="calibrating", unit="q", disable=not progress):
        prop = gen.propose(r.text, beam=1)
        lok = [normalize_name(t.name) for t in prop.linked] == [normalize_name(t) for t in r.topics]
        pok = lok and bool(prop.templates) and prop.templates[0] == want
        linked_ok += lok
        pattern_ok += pok
        scored.append((prop.probability, pok))
    ckpt.threshold = calibrate(scored, s.precision)
    n = max(len(dev), 1)
    ckpt.info = {"questions": len(train), "dev_questions": len(dev), "templates": len(templates),
                 "epochs": epoch, "template_acc": round(best_acc, 4) if dev else None,
                 "linking_acc": round(linked_ok / n, 4) if dev else None,
                 "pattern_acc": round(pattern_ok / n, 4) if dev else None, "precision": s.precision,
                 "skipped": dict(skipped), "trained_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    path = save_generator(ckpt, out)
    return TrainedGenerator(str(path), len(train), len(dev), len(templates), dict(skipped),
                            round(linked_ok / n, 4), round(max(best_acc, 0.0), 4), round(pattern_ok / n, 4),
                            ckpt.threshold, s.seed, round(time.perf_counter() - t_start, 2))


def calibrate(scored: Sequence[tuple[float, bool]], precision: float) -> float:
    """The lowest probability ``t`` such that the patterns at or above it are right at least ``precision`` of the
    time (0.0 when all are; just above the highest when none is)."""
    if not scored:
        return 0.5
    ranked = sorted(scored, key=lambda x: -x[0])
    best, right = None, 0
    for i, (p, ok) in enumerate(ranked, start=1):
        right += ok
        if right / i >= precision:
            best = p
    if best is None:
        return min(1.0, ranked[0][0] + 1e-6)
    return 0.0 if best == ranked[-1][0] and right / len(ranked) >= precision else float(best)
