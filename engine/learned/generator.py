"""The learned pattern generator: a question in plain text -> a beam of patterns with their probabilities.

The model is a classifier over the pattern templates of the training questions (:mod:`engine.learned.templates`),
conditioned on the question with its topic mentions masked (``X``)::

    h = W_e e(q) + mean_{g in ngrams(q)} E[hash(g)]        e(q): the sentence embedding of the masked question
    p(template | q) = softmax(W_o relu(h))                 ngrams: its lower-cased word 1-3-grams, hashed

A template that cannot match at the linked topics (an edge at a topic whose relation the topic entity has no
relationship of, read from the KG in one query) gets no probability; the rest are renormalized. A pattern's
probability is that of its template times the linking confidence of its topics.

A generator is one ``torch.save`` file of plain data (``weights_only``): ``{"format": "isorag-generator/1", "kg",
"embedding_slug", "emb_dim", "templates", "state_dict", "config", "link", "threshold", "seed", "info"}``.
``threshold``: the router's, calibrated on held-out training questions (:mod:`engine.learned.router`).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine._errors import CheckpointError
from engine.linking.text import MASK, LinkModel, LinkedTopic, candidates, mask, unknown_names, word_ngrams
from engine.learned.templates import Template
from engine.retrieval.pattern import Pattern
from engine._timing import ms

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from engine._protocols import GraphReader, TextEmbedder, VectorIndex

__all__ = ["FORMAT", "GeneratorCheckpoint", "PatternGenerator", "Proposal", "TemplateClassifier", "featurize",
           "load_generator", "save_generator"]

FORMAT = "isorag-generator/1"
DEFAULT_BEAM = 3
#: choices of topics a question's pattern is tried with (the linker's best, then other candidates alone)
READINGS = 3
#: hashed n-gram buckets and width of the hidden layer
BUCKETS = 1 << 14
HIDDEN = 128


def ngram_ids(text: str, buckets: int = BUCKETS) -> list[int]:
    """Bucket ids of the lower-cased word 1-3-grams of ``text`` (a stable hash: crc32)."""
    return sorted({zlib.crc32(g.encode("utf-8")) % buckets for g in word_ngrams(text, 3)}) or [0]


def _classifier_class() -> Any:
    import torch
    from torch import nn

    class TemplateClassifier(nn.Module):
        """``logits = W_o relu(W_e e + mean E[ngrams])`` (see the module docstring).

        Shapes: ``emb`` [B, dim], ``ids`` [N] with ``offsets`` [B] (EmbeddingBag), logits [B, templates]."""

        def __init__(self, dim: int, templates: int, buckets: int = BUCKETS, hidden: int = HIDDEN,
                     dropout: float = 0.1) -> None:
            super().__init__()
            self.config = {"dim": dim, "templates": templates, "buckets": buckets, "hidden": hidden,
                           "dropout": dropout}
            self.proj = nn.Linear(dim, hidden)
            self.bag = nn.EmbeddingBag(buckets, hidden, mode="mean", sparse=True)  # a step touches few rows
            self.drop = nn.Dropout(dropout)
            self.out = nn.Linear(hidden, templates)

        def forward(self, emb: torch.Tensor, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
            h = torch.relu(self.proj(emb) + self.bag(ids, offsets))
            return self.out(self.drop(h))

    return TemplateClassifier


TemplateClassifier = _classifier_class()


def featurize(ids: Sequence[Sequence[int]]) -> tuple[Any, Any]:
    """EmbeddingBag inputs (flat ids, offsets) for a batch of id lists."""
    import torch

    flat = [i for row in ids for i in row]
    offsets = np.cumsum([0] + [len(r) for r in ids[:-1]])
    return torch.as_tensor(flat, dtype=torch.long), torch.as_tensor(offsets, dtype=torch.long)


@dataclass
class GeneratorCheckpoint:
    kg: str
    embedding_slug: str
    emb_dim: int
    templates: list[Template]
    model: Any
    link: LinkModel
    threshold: float
    seed: int
    info: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    kg_id: str | None = None  # the identity of the KG it was made for (engine.stores.graph.GraphStore.identity)


def save_generator(ckpt: GeneratorCheckpoint, path: str | Path) -> Path:
    import torch

    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"format": FORMAT, "kg": ckpt.kg, "embedding_slug": ckpt.embedding_slug, "emb_dim": ckpt.emb_dim,
            "templates": [t.to_json() for t in ckpt.templates], "config": dict(ckpt.model.config),
            "state_dict": {k: v.detach().cpu() for k, v in ckpt.model.state_dict().items()},
            "link": ckpt.link.to_json(), "threshold": float(ckpt.threshold), "seed": int(ckpt.seed),
            "info": ckpt.info, "kg_id": ckpt.kg_id}
    tmp = path.with_name(path.name + ".tmp")
    torch.save(data, tmp)
    tmp.replace(path)
    return path


def load_generator(path: str | Path, *, kg: str | None = None, embedding_slug: str | None = None,
                   kg_id: str | None = None) -> GeneratorCheckpoint:
    """A generator file, checked against the KG (its name and ``kg_id``, its identity) and embedding model it is
    used with (a mismatch, or a file that is no generator, is a CheckpointError)."""
    import torch

    p = Path(path).expanduser()
    if not p.is_file():
        raise CheckpointError(f"no generator file at {p}: train one with `isorag train-generator`")
    try:
        data = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:  # any unreadable file is the same error for the user
        raise CheckpointError(f"{p}: not a generator file ({type(e).__name__}: {e})") from e
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else None
        raise CheckpointError(f"{p}: not a generator file (format {found!r}, expected {FORMAT!r})")
    if kg is not None and data["kg"] != kg:
        raise CheckpointError(f"{p}: a generator of KG {data['kg']!r}, not of {kg!r}: train one on this KG "
                              f"(isorag train-generator --kg {kg})")
    if kg_id is not None and data.get("kg_id") not in (None, kg_id):
        raise CheckpointError(f"{p}: a generator of another KG named {data['kg']!r} (identity {data['kg_id']}; this "
                              f"KG's is {kg_id}: it was dropped and made again since): train one on this KG "
                              f"(isorag train-generator --kg {data['kg']})")
    if embedding_slug is not None and data["embedding_slug"] != embedding_slug:
        raise CheckpointError(f"{p}: trained with embedding model {data['embedding_slug']!r}, the engine uses "
                              f"{embedding_slug!r}: train it again with this model")
    model = TemplateClassifier(**data["config"])
    model.load_state_dict(data["state_dict"])
    model.eval()
    return GeneratorCheckpoint(data["kg"], data["embedding_slug"], int(data["emb_dim"]),
                               [Template.from_json(t) for t in data["templates"]], model,
                               LinkModel.from_json(data["link"]), float(data["threshold"]), int(data["seed"]),
                               dict(data.get("info") or {}), str(p), data.get("kg_id"))


@dataclass
class Proposal:
    """What the generator makes of a question (or a claim): the linked topics, the beam of patterns with their
    probabilities (best first) and the templates they come from, and timings (ms: ``link``, ``generate``)."""

    text: str
    linked: list[LinkedTopic]
    beam: list[tuple[Pattern, float]]
    templates: list[Template]
    timings: dict[str, float]
    warnings: list[str] = field(default_factory=list)

    @property
    def probability(self) -> float:
        return self.beam[0][1] if self.beam else 0.0

    @property
    def pattern(self) -> Pattern | None:
        return self.beam[0][0] if self.beam else None

    def to_dict(self) -> dict[str, Any]:
        return {"linked": [t.to_dict() for t in self.linked],
                "beam": [{"pattern": p.to_json(), "probability": round(pr, 6)} for p, pr in self.beam],
                "timings": dict(self.timings), "warnings": list(self.warnings)}


class PatternGenerator:
    """A loaded generator working on a KG's stores (given one by one: it never sees the Engine)."""

    def __init__(self, ckpt: GeneratorCheckpoint, *, graph: GraphReader, vectors: VectorIndex,
                 embedder: TextEmbedder, encode: Callable[[Sequence[str]], Any] | None = None) -> None:
        self.ckpt, self.graph, self.vectors, self.embedder = ckpt, graph, vectors, embedder
        # the retriever's cached encode: the topics' names, embedded with the question in one call, are then
        # cache hits when the pattern is matched
        self.encode = encode or embedder.encode
        self.templates = ckpt.templates
        self._by_topics = np.array([t.topics for t in ckpt.templates])
        self._names: dict[str, str] | None = None
        self._pool: Any = None  # one worker: the topics' relationships are read while the question is embedded

    def _reader(self) -> Any:
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="isorag-generator")
        return self._pool

    @property
    def threshold(self) -> float:
        return self.ckpt.threshold

    def relation_names(self) -> dict[str, str]:
        """Relationship type -> relation name (the KG's catalog, read once)."""
        if self._names is None:
            self._names = {ri.type: ri.name for ri in self.graph.relation_catalog().values()}
        return self._names

    def link(self, text: str, max_topics: int | None = None, min_topics: int = 1) -> list[LinkedTopic]:
        cands = candidates(text, self.graph, vectors=self.vectors, embedder=self.embedder)
        return self.ckpt.link.choose(cands, text, max_topics, min_topics)

    def readings(self, text: str, limit: int = READINGS) -> list[list[LinkedTopic]]:
        """The choices of topics to try for a question, best first (:meth:`engine.linking.text.LinkModel.readings`)."""
        cands = candidates(text, self.graph, vectors=self.vectors, embedder=self.embedder)
        return self.ckpt.link.readings(cands, text, limit=limit)

    def _joint(self, text: str, readings: Sequence[list[LinkedTopic]]) -> tuple[int, Any, Any, Any] | None:
        """The reading whose topics fit a template best: the most probable of (its linking confidence x the
        probability of its best fitting template); None when no template fits any. Returns (reading, template
        probabilities, which fit, profiles). One read of the topics' relations, one embedding call."""
        topics = [t for r in readings for t in r]
        profiles = self._profiles(topics)
        masked = [mask(text, [(t.start, t.end) for t in r]) for r in readings]
        emb = self.encode([*masked, *[t.name for t in readings[0]]])[: len(masked)]
        best: tuple[float, int, Any, Any, Any] | None = None
        at = 0
        for i, r in enumerate(readings):
            prof = profiles[at: at + len(r)]
            at += len(r)
            ok = self._allowed(r, prof)
            if not ok.any():
                continue
            p = self._softmax(emb[i], masked[i])
            score = float(np.prod([t.confidence for t in r])) * float(np.max(np.where(ok, p, 0.0)))
            if best is None or score > best[0]:
                best = (score, i, p, ok, prof)
        return None if best is None else best[1:]

    def _profiles(self, topics: Sequence[LinkedTopic]) -> list[set[tuple[str, bool]]]:
        """Per topic, ``(relation name, leaves it)`` of the relationships at its entities (one read)."""
        names = self.relation_names()
        eids = sorted({e for t in topics for e in t.eids})
        rows = self.graph.read_named("learned_profile", eids=eids, types=sorted(names)) if eids else []
        at: dict[int, set[tuple[str, bool]]] = {}
        for r in rows:
            at.setdefault(int(r["eid"]), set()).add((names.get(r["type"], r["type"]), bool(r["out"])))
        return [set().union(*(at.get(e, set()) for e in t.eids)) for t in topics]

    def scores(self, masked: str, names: Sequence[str] = ()) -> np.ndarray:
        """p(template | masked text) over all templates (``names``, the topics' names, are embedded in the same
        call, for the retriever's cache)."""
        emb = self.encode([masked, *names])[:1]
        return self._softmax(emb[0], masked)

    def _softmax(self, emb: Any, masked: str) -> np.ndarray:
        import torch

        ids, offsets = featurize([ngram_ids(masked)])
        with torch.no_grad():
            logits = self.ckpt.model(torch.as_tensor(np.asarray(emb)[None, :], dtype=torch.float32), ids, offsets)[0]
        return torch.softmax(logits.double(), -1).numpy()

    def _allowed(self, topics: Sequence[LinkedTopic], profiles: Sequence[set[tuple[str, bool]]],
                 answer: set[tuple[str, bool]] | None = None) -> np.ndarray:
        """Which templates can match: as many topics, and the relationships (type and direction) each topic slot
        (and, for a claim, the answer slot) needs are at its entity."""
        ok = self._by_topics == len(topics)
        for j, t in enumerate(self.templates):
            if not ok[j]:
                continue
            for i, prof in enumerate(profiles):
                if not t.slot_relations(f"T{i + 1}") <= prof:
                    ok[j] = False
                    break
            if ok[j] and answer is not None and not t.slot_relations(t.answer_slot()) <= answer:
                ok[j] = False
        return ok

    def propose(self, text: str, *, beam: int = DEFAULT_BEAM) -> Proposal:
        """The beam of patterns for a question."""
        t0 = time.perf_counter()
        readings = self.readings(text)
        linked = readings[0] if readings else []
        t1 = time.perf_counter()
        warnings: list[str] = []
        out: list[tuple[Pattern, float]] = []
        used: list[Template] = []
        if not linked:
            warnings.append("no entity of the KG is named in the question: the generator has no topic")
        else:
            joint = self._joint(text, readings) if len(readings) > 1 else None
            if joint is not None:  # the topics chosen jointly with the templates that fit them
                i, p, ok, profiles = joint
                linked = readings[i]
            else:
                reading = self._reader().submit(self._profiles, linked)
                p = self.scores(mask(text, [(t.start, t.end) for t in linked]), [t.name for t in linked])
                profiles = reading.result()
                ok = self._allowed(linked, profiles)
            if not ok.any():
                # fewer topics: the most confident one alone
                best = max(range(len(linked)), key=lambda i: linked[i].confidence)
                linked, profiles = [linked[best]], [profiles[best]]
                p = self.scores(mask(text, [(linked[0].start, linked[0].end)]))
                ok = self._allowed(linked, profiles)
            if not ok.any():
                warnings.append("no learned template fits the relations at the linked topics: the most probable "
                                "ones are used")
                ok = self._by_topics == len(linked)
            q = np.where(ok, p, 0.0)
            total = q.sum()
            conf = float(np.prod([t.confidence for t in linked]))
            if total > 0:
                q = q / total
                for j in np.argsort(-q, kind="stable")[:beam]:
                    if q[j] <= 0:
                        break
                    out.append((self.templates[j].fill([t.name for t in linked]), float(q[j]) * conf))
                    used.append(self.templates[j])
        t2 = time.perf_counter()
        return Proposal(text, linked, out, used, {"link": ms(t1 - t0), "generate": ms(t2 - t1)}, warnings)

    def propose_claim(self, text: str) -> Proposal:
        """A claim's pattern: each linked entity in turn is the template's answer (its name in the answer slot),
        the others its topics; the most probable reading wins. The pattern is fully known, as a claim's is."""
        t0 = time.perf_counter()
        cands = candidates(text, self.graph, vectors=self.vectors, embedder=self.embedder)
        linked = self.ckpt.link.choose(cands, text, self.ckpt.link.max_topics + 1, min_topics=2)
        unknown = unknown_names(text, cands)
        t1 = time.perf_counter()
        best: tuple[float, Pattern, Template] | None = None
        warnings: list[str] = []
        if unknown:  # the claim names something the KG does not have: no pattern of the KG can say it
            warnings.append("the claim names " + ", ".join(repr(u) for u in unknown) + ", which no entity of the KG "
                            "is called")
        elif len(linked) < 2:
            warnings.append("a claim needs two entities of the KG; found "
                            + (", ".join(repr(t.mention) for t in linked) or "none"))
        else:
            profiles = self._profiles(linked)
            p = self.scores(mask(text, [(t.start, t.end) for t in linked]))
            conf = float(np.prod([t.confidence for t in linked]))
            for a in range(len(linked)):
                topics = [t for i, t in enumerate(linked) if i != a]
                ok = self._allowed(topics, [pr for i, pr in enumerate(profiles) if i != a], profiles[a])
                if not ok.any():
                    continue
                j = int(np.argmax(np.where(ok, p, -1.0)))
                score = float(p[j]) * conf
                if best is None or score > best[0]:
                    tpl = self.templates[j]
                    pat = tpl.fill([t.name for t in topics])
                    ans, name = pat.answer_node(), linked[a].name
                    pat = Pattern.from_triples([(name if h == ans else h, r, name if tl == ans else tl)
                                                for h, r, tl in pat.triples])
                    best = (score, pat, tpl)
            if best is None:
                warnings.append("no learned template joins the claim's entities")
        t2 = time.perf_counter()
        beam = [(best[1], best[0])] if best else []
        return Proposal(text, linked, beam, [best[2]] if best else [],
                        {"link": ms(t1 - t0), "generate": ms(t2 - t1)}, warnings)



def template_index(templates: Sequence[Template]) -> Mapping[Template, int]:
    return {t: i for i, t in enumerate(templates)}


__all__ += ["MASK", "template_index"]
