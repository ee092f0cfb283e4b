"""Topic entities from plain text (no brackets, no marks), with a confidence.

Candidates: the question's spans of 1 to :data:`MAX_SPAN` words, looked up by exact name in Neo4j (one batched
read through the name index); when no span is a name, the spans go through one embedding call and one vector
search over entity names (fuzzy candidates, within :data:`FUZZY_DISTANCE`). Each candidate is described by a few
features (length, capitalization, nesting in other candidates, how many entities
bear the name, and how often the span occurs in the training questions *outside* their topic: "movies", "what",
"star" are the questions' own words). A logistic acceptance over them (a fuzzy candidate's discounted by its distance),
fitted on the training questions (their
bracketed or recorded topics are the gold), gives each candidate a probability; the best is the topic, and more
spans that do not overlap it are topics too while their probability is over one half (conjunctions).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.retrieval.retriever import normalize_name

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import GraphReader, TextEmbedder, VectorIndex

__all__ = ["Candidate", "LinkModel", "LinkedTopic", "MAX_SPAN", "candidates", "exact_candidates", "fit_link_model",
           "mask", "spans", "unbracket"]

#: longest span (in words) looked up as a name
MAX_SPAN = 10
#: a fuzzy candidate is at most this far from its span (Euclidean, normalized embeddings)
FUZZY_DISTANCE = 0.45
#: fuzzy candidates are looked for among spans of at most this many words
FUZZY_SPAN = 5
FEATURES = ("bias", "words", "chars", "capital", "template", "nested", "nests", "homonyms", "first")

_WORD = re.compile(r"[\w][\w'’.&:-]*")
_TRAIL = ".:'’-"
#: punctuation that may end a name after its last word (titles such as "Hot Shots!")
_CLOSING = "!?)"
_BRACKET = re.compile(r"\[([^\[\]]+)\]")
#: what a topic mention becomes in the text the generator reads
MASK = "X"


def spans(text: str, max_words: int = MAX_SPAN) -> list[tuple[int, int, str]]:
    """``(start, end, text)`` of every span of 1 to ``max_words`` words, as written (inner punctuation kept), also
    with its trailing ``.:'-`` dropped and with the ``!?)`` that follow it, longest first."""
    words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    out: dict[tuple[int, int], str] = {}
    for n in range(min(max_words, len(words)), 0, -1):
        for i in range(len(words) - n + 1):
            a, b = words[i][0], words[i + n - 1][1]
            s = text[a:b]
            stripped = s.rstrip(_TRAIL)
            closed = b
            while closed < len(text) and text[closed] in _CLOSING:  # "Hello, Dolly!", "Who's Harry Crumb?"
                closed += 1
            for t, e in ((s, b), (stripped, a + len(stripped)), (text[a:closed], closed)):
                if t and (a, e) not in out:
                    out[(a, e)] = t
    return [(a, b, s) for (a, b), s in out.items()]


def mask(text: str, mentions: Iterable[tuple[int, int]]) -> str:
    """``text`` with each ``(start, end)`` span replaced by :data:`MASK`."""
    out, last = [], 0
    for a, b in sorted(mentions):
        if a < last:
            continue
        out.append(text[last:a])
        out.append(MASK)
        last = b
    out.append(text[last:])
    return "".join(out)


def unbracket(question: str) -> tuple[str, list[tuple[int, int, str]]]:
    """The question without its ``[topic]`` brackets, and the topics' spans in that text."""
    out, found, last, shift = [], [], 0, 0
    for m in _BRACKET.finditer(question):
        out.append(question[last:m.start()])
        a = m.start() - shift
        found.append((a, a + len(m.group(1)), m.group(1)))
        out.append(m.group(1))
        last = m.end()
        shift += 2
    out.append(question[last:])
    return "".join(out), found


def word_ngrams(text: str, max_n: int = MAX_SPAN) -> set[str]:
    """The lower-cased word n-grams of ``text`` (for the template rate of a span)."""
    words = [w.lower().rstrip(_TRAIL) for w in _WORD.findall(text)]
    return {" ".join(words[i:i + n]) for n in range(1, max_n + 1) for i in range(len(words) - n + 1)}


@dataclass(frozen=True)
class Candidate:
    """A span of the question that names entities of the KG (``eids``, all with ``name``)."""

    start: int
    end: int
    mention: str
    name: str
    eids: tuple[int, ...]
    distance: float  # 0 for an exact name

    def overlaps(self, other: Candidate) -> bool:
        return self.start < other.end and other.start < self.end


@dataclass(frozen=True)
class LinkedTopic:
    """A topic entity linked from the question: the span, the KG name and entities, and the acceptance
    probability."""

    mention: str
    name: str
    eids: tuple[int, ...]
    confidence: float
    start: int
    end: int

    def to_dict(self) -> dict[str, Any]:
        return {"mention": self.mention, "name": self.name, "eids": list(self.eids),
                "confidence": round(self.confidence, 4), "span": [self.start, self.end]}


def exact_candidates(texts: Sequence[str], graph: GraphReader, *, batch: int = 20_000) -> list[list[Candidate]]:
    """For each text, its spans that are exact names of KG entities (one read per ``batch`` distinct spans)."""
    per_text = [spans(t) for t in texts]
    wanted = list(dict.fromkeys(s for sp in per_text for _, _, s in sp))
    eids: dict[str, list[int]] = {}
    for i in range(0, len(wanted), batch):
        for r in graph.entities_by_name(wanted[i:i + batch]):
            eids.setdefault(r["name"], []).append(int(r["eid"]))
    return [[Candidate(a, b, s, s, tuple(sorted(eids[s])), 0.0) for a, b, s in sp if s in eids] for sp in per_text]


def candidates(text: str, graph: GraphReader, *, vectors: VectorIndex | None = None,
               embedder: TextEmbedder | None = None, stopwords: Iterable[str] = ()) -> list[Candidate]:
    """The spans of ``text`` that name KG entities: exact names (one read); without any, fuzzy ones (one
    embedding call, one vector search) when ``vectors`` and ``embedder`` are given."""
    out = exact_candidates([text], graph)[0]
    if out or vectors is None or embedder is None:
        return out
    stop = {w.lower() for w in stopwords}
    fuzzy = [(a, b, s) for a, b, s in spans(text) if len(s.split()) <= FUZZY_SPAN and len(s) >= 3
             and not all(w.lower() in stop for w in s.split())]
    if not fuzzy:
        return []
    texts = list(dict.fromkeys(s for _, _, s in fuzzy))
    hits = vectors.search("entities", embedder.encode(texts), 4)
    near = {t: [(int(e), d) for e, d in row if d <= FUZZY_DISTANCE] for t, row in zip(texts, hits)}
    found = {e for row in near.values() for e, _ in row}
    names = {eid: (r.get("name") or "") for eid, r in graph.entities(sorted(found)).items()} if found else {}
    for a, b, s in fuzzy:
        row = near.get(s) or []
        if row:
            best = row[0][1]
            ties = tuple(sorted(e for e, d in row if d <= best + 1e-6))
            out.append(Candidate(a, b, s, names.get(ties[0], s), ties, float(best)))
    return out


class LinkModel:
    """The learned acceptance of candidates: logistic weights over :data:`FEATURES` and the template rates (the
    share of training questions whose text outside the topic holds the span)."""

    def __init__(self, weights: Sequence[float] | np.ndarray, template_rate: Mapping[str, float],
                 max_topics: int = 1) -> None:
        self.weights = np.asarray(weights, dtype=np.float64)
        self.template_rate = dict(template_rate)
        self.max_topics = max_topics

    def features(self, cands: Sequence[Candidate], text: str) -> np.ndarray:
        x = np.zeros((len(cands), len(FEATURES)), dtype=np.float64)
        for i, c in enumerate(cands):
            words = len(c.mention.split())
            nested = any(o is not c and o.start <= c.start and c.end <= o.end and (o.start, o.end) != (c.start, c.end)
                         for o in cands)
            nests = any(o is not c and c.start <= o.start and o.end <= c.end and (o.start, o.end) != (c.start, c.end)
                        for o in cands)
            x[i] = (1.0, min(words, MAX_SPAN) / 5.0,
                    math.log1p(len(c.mention)) / 3.0, float(c.mention[:1].isupper()),
                    self.template_rate.get(" ".join(w.lower().rstrip(_TRAIL) for w in _WORD.findall(c.mention)), 0.0),
                    float(nested), float(nests), math.log1p(len(c.eids)), float(c.start == 0))
        return x

    def probabilities(self, cands: Sequence[Candidate], text: str) -> np.ndarray:
        if not cands:
            return np.zeros(0)
        z = self.features(cands, text) @ self.weights
        # a fuzzy candidate (the training questions name their topics exactly) is discounted by its distance
        fuzzy = np.array([1.0 - c.distance / (2 * FUZZY_DISTANCE) for c in cands])
        return fuzzy / (1.0 + np.exp(-np.clip(z, -30, 30)))

    def choose(self, cands: Sequence[Candidate], text: str, max_topics: int | None = None) -> list[LinkedTopic]:
        """The topics: the most probable candidate, then others that overlap no chosen one while over one half,
        at most ``max_topics`` (default: the most the training questions had), in the order of the text."""
        p = self.probabilities(cands, text)
        order = sorted(range(len(cands)), key=lambda i: (-p[i], -(cands[i].end - cands[i].start), cands[i].start))
        chosen: list[int] = []
        for i in order:
            if len(chosen) >= (max_topics or self.max_topics):
                break
            if chosen and p[i] < 0.5:
                break
            if any(cands[i].overlaps(cands[j]) or cands[i].eids == cands[j].eids for j in chosen):
                continue
            chosen.append(i)
        chosen.sort(key=lambda i: cands[i].start)
        return [LinkedTopic(cands[i].mention, cands[i].name, cands[i].eids, float(p[i]), cands[i].start,
                            cands[i].end) for i in chosen]

    def to_json(self) -> dict[str, Any]:
        return {"features": list(FEATURES), "weights": self.weights.tolist(), "template_rate": self.template_rate,
                "max_topics": self.max_topics}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> LinkModel:
        return cls(obj["weights"], obj["template_rate"], int(obj.get("max_topics", 1)))


def fit_link_model(examples: Sequence[tuple[str, Sequence[Candidate], Sequence[str]]],
                   template_rate: Mapping[str, float], max_topics: int, *, epochs: int = 300,
                   l2: float = 1e-3) -> LinkModel:
    """The acceptance fitted on ``(text, candidates, gold topic names)``: a candidate is positive when its name or
    mention is a gold topic (normalized)."""
    import torch

    model = LinkModel(np.zeros(len(FEATURES)), template_rate, max_topics)
    xs, ys = [], []
    for text, cands, gold in examples:
        if not cands:
            continue
        want = {normalize_name(g) for g in gold}
        xs.append(model.features(cands, text))
        ys.append(np.array([float(normalize_name(c.name) in want or normalize_name(c.mention) in want)
                            for c in cands]))
    if not xs:
        model.weights[0] = 0.0
        return model
    x = torch.as_tensor(np.concatenate(xs), dtype=torch.float64)
    y = torch.as_tensor(np.concatenate(ys), dtype=torch.float64)
    w = torch.zeros(x.shape[1], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w], lr=0.5, max_iter=epochs, line_search_fn="strong_wolfe")

    def closure() -> Any:
        opt.zero_grad()
        loss: Any = torch.nn.functional.binary_cross_entropy_with_logits(x @ w, y) + l2 * (w[1:] ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)  # type: ignore[no-untyped-call]
    model.weights = w.detach().numpy().copy()
    return model
