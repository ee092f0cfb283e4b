"""The trained scorer inside the engine: neighbourhood -> scores -> evidence (and, alone, an answer).

:class:`ScoringService` works on a scorer checkpoint and the stores it was given. Given anchors (the
entities of the matched subgraphs) or, when there are none, the entities linked from the question
(:meth:`ScoringService.link`, through the engine's one linker, :mod:`engine.linking.text`), it fetches their
neighbourhood from Neo4j, gathers features (Milvus, cached), scores every triple, keeps QSRAG's adaptive top-p selection
clamped to ``[k_min, k_max]`` and returns a :class:`ScoringResult`: the triples with their confidences, the
answer candidates extracted from them (:mod:`engine.scoring.extract`), the neighbourhood report and timings.

Stopwords serve entity linking alone (:func:`question_ngrams`: an n-gram made only of stopwords, or starting or
ending with one, is not a mention); training, question masking and answer extraction do not read them. The
engine's list, :data:`STOPWORDS`, holds generic English function words only, whatever the KG. A KG's domain
words (MetaQA's "movie", "film": every question names them, no entity is one) are a setting of the checkpoint:
``save_checkpoint(..., extra_stopwords=[...])`` / ``train_scorer(..., extra_stopwords=[...])`` record them, since
a checkpoint belongs to one KG and travels with it, and the service adds them to :data:`STOPWORDS`;
``ScoringService(..., extra_stopwords=...)`` replaces the checkpoint's for one service. The MetaQA benchmark
(``benchmarks/scorer.py``) records MetaQA's words in the checkpoints it writes, and a checkpoint from before the
setting gets them too (:data:`~engine.scoring.checkpoint.LEGACY_EXTRA_STOPWORDS`: they were in this list then),
so the engine links on MetaQA as it did. The benchmark's own figures never read stopwords (it scores the
questions' bracketed topic entities, without linking).
"""

from __future__ import annotations

import math
import re
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Collection, Iterable, Mapping, Sequence

import numpy as np

from engine.scoring.neighbourhood import NeighbourhoodReport, fetch_neighbourhood
from engine._timing import ms_since

if TYPE_CHECKING:  # pragma: no cover
    from engine._config import ScoringSettings
    from engine._protocols import GraphReader, TextEmbedder, VectorIndex
    from engine.retrieval.results import Entity
    from engine.scoring.checkpoint import ScorerCheckpoint
    from engine.scoring.features import FeatureStore

__all__ = ["LinkedEntity", "ScoredTriple", "ScoredAnswer", "ScoringResult", "ScoringService", "question_ngrams",
           "STOPWORDS"]

_WORD = re.compile(r"[\w][\w'’.&:-]*")
#: the engine's stopwords for entity linking: generic English words, for any KG (a KG's own words are added
#: per checkpoint, see the module docstring). N-grams made only of these are not entity mentions.
STOPWORDS = frozenset("""
a an the of in on at to for from by with and or as is are was were be been being do does did which who whom whose
what when where why how that this these those it its their his her him he she they them me my your our i you we
also share shared same other than about into over under after before one ones there
""".split())


@dataclass(frozen=True)
class LinkedEntity:
    """An anchor found by entity linking: the question's span, the entity and their node distance
    (:func:`engine.linking.names.node_distance`: 0 for its name as written)."""

    mention: str
    eid: int
    name: str
    distance: float

    def to_dict(self) -> dict[str, Any]:
        return {"mention": self.mention, "eid": self.eid, "name": self.name, "distance": round(self.distance, 4)}


@dataclass(frozen=True)
class ScoredTriple:
    head: Entity
    relation: str
    tail: Entity
    score: float

    def as_tuple(self) -> tuple[str, str, str]:
        return (self.head.name, self.relation, self.tail.name)

    def to_dict(self) -> dict[str, Any]:
        return {"head": self.head.name, "relation": self.relation, "tail": self.tail.name,
                "head_eid": self.head.eid, "tail_eid": self.tail.eid, "score": self.score}


@dataclass(frozen=True)
class ScoredAnswer:
    """An answer extracted from the scored triples (no LLM): where confident paths from the anchors end."""

    entity: Entity
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {**self.entity.to_dict(), "score": self.score}


@dataclass
class ScoringResult:
    """What the scorer retrieved for one question."""

    triples: list[ScoredTriple]
    anchors: list[Entity]
    answers: list[ScoredAnswer]
    report: NeighbourhoodReport
    model: str
    linked: list[LinkedEntity] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def evidence(self, precision: int | None = 4) -> str:
        """QSRAG's lines ``("h", "r", "t") [confidence: s]``, best first."""
        from engine.retrieval.verbalize import verbalize_scored

        return verbalize_scored([(*t.as_tuple(), t.score) for t in self.triples], precision=precision)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "anchors": [a.to_dict() for a in self.anchors],
                "linked": [x.to_dict() for x in self.linked], "triples": [t.to_dict() for t in self.triples],
                "answers": [a.to_dict() for a in self.answers], "neighbourhood": self.report.to_dict(),
                "timings": dict(self.timings), "warnings": list(self.warnings)}


def question_ngrams(question: str, max_n: int = 5, stopwords: Collection[str] = STOPWORDS) -> list[str]:
    """The question's word n-grams (1..max_n) that are not made only of ``stopwords`` (lower case), longest
    first."""
    words = _WORD.findall(question)
    out: dict[str, None] = {}
    for n in range(min(max_n, len(words)), 0, -1):
        for i in range(len(words) - n + 1):
            gram = words[i:i + n]
            if all(w.lower() in stopwords for w in gram):
                continue
            if gram[0].lower() in stopwords or gram[-1].lower() in stopwords:
                continue  # "the Heat", "Heat in": the inner n-gram is also tried
            text = " ".join(gram)
            if len(text) >= 2:
                out[text] = None
    return list(out)


class ScoringService:
    """A loaded scorer checkpoint working on a KG's components, given one by one (it never sees the Engine):
    ``graph`` (:class:`~engine.stores.graph.GraphStore`), ``vectors`` (:class:`~engine.stores.vectors.VectorStore`),
    ``embedder``, ``features`` (:class:`~engine.scoring.features.FeatureStore`) and ``settings``
    (:class:`~engine._config.ScoringSettings`).

    ``extra_stopwords``: words of the KG's domain that entity linking skips besides :data:`STOPWORDS`; None: the
    checkpoint's (:attr:`~engine.scoring.checkpoint.ScorerCheckpoint.extra_stopwords`). The words linking
    skips are :attr:`stopwords`.
    """

    def __init__(self, checkpoint: ScorerCheckpoint, *, graph: GraphReader, vectors: VectorIndex,
                 embedder: TextEmbedder, features: FeatureStore, settings: ScoringSettings,
                 table_capacity: int | None = None, extra_stopwords: Iterable[str] | None = None) -> None:
        from engine.scoring.features import DEFAULT_CACHE_ENTITIES

        self.graph, self.vectors, self.embedder, self.features = graph, vectors, embedder, features
        self.settings = settings
        self.checkpoint = checkpoint
        self.model = checkpoint.model
        if extra_stopwords is None:
            extra_stopwords = getattr(checkpoint, "extra_stopwords", ())
        self.stopwords: frozenset[str] = STOPWORDS | {w.lower() for w in extra_stopwords}
        self._lock = threading.Lock()
        # entity text terms of the model's first layer (question-independent), projected once per entity as
        # the benchmark's and the trainer's evaluation do: eid -> row of _terms
        self.table_capacity = int(table_capacity or DEFAULT_CACHE_ENTITIES)
        self._term_rows: dict[int, int] = {}
        self._terms: Any = None
        self._terms_used = 0

    def _entity_rows(self, eids: np.ndarray, node_emb: Any, has_text: Any) -> Any:
        """Rows of the projected entity table for ``eids`` (projecting the entities not in it yet, in one
        matmul); nodes without text get row 0 (the model uses its shared vector there). Called under the lock."""
        import torch

        todo = [i for i, (e, ok) in enumerate(zip(eids.tolist(), has_text.tolist()))
                if ok and e not in self._term_rows]
        if todo:
            if self._terms_used + len(todo) > self.table_capacity:  # full: start again (entities come back)
                self._term_rows.clear()
                self._terms_used = 0
            terms = self.model.entity_terms(node_emb[torch.as_tensor(todo)].to(next(self.model.parameters()).dtype))
            need = self._terms_used + len(todo)
            if self._terms is None or self._terms.shape[0] < need:
                size = min(max(need, 2 * (0 if self._terms is None else self._terms.shape[0]), 4096),
                           max(self.table_capacity, need))
                grown = terms.new_zeros(size, terms.shape[1])
                if self._terms is not None and self._terms_used:
                    grown[:self._terms_used] = self._terms[:self._terms_used]
                self._terms = grown
            self._terms[self._terms_used:need] = terms
            for j, i in enumerate(todo):
                self._term_rows[int(eids[i])] = self._terms_used + j
            self._terms_used = need
        rows = self._term_rows
        return torch.as_tensor([rows.get(e, 0) for e in eids.tolist()], dtype=torch.long)

    # -- entity linking ------------------------------------------------------------------------------------
    def link(self, question: str) -> list[LinkedEntity]:
        """Anchors for a question without a matched pattern, from the engine's linker
        (:func:`engine.linking.text.candidates`: names by spelling, aliases, then meaning): the mentions inside
        ``[brackets]`` when there are any, else every span not made of :attr:`stopwords` (nor starting or ending
        with one); candidates within ``link_threshold``, closer and longer mentions first, spans not overlapping,
        at most ``max_anchors`` entities."""
        from engine.linking.text import candidates, unbracket

        s = self.settings
        text, marked = unbracket(question)
        stop = self.stopwords
        cands = candidates(text, self.graph, vectors=self.vectors, embedder=self.embedder, stopwords=stop)
        if marked:
            inside = [c for c in cands if any(a <= c.start and c.end <= b for a, b, _ in marked)]
            cands = inside or cands
        ranked = []
        for c in cands:
            words = [w.lower() for w in _WORD.findall(c.mention)]
            if not words or len(words) > s.link_max_ngram or all(w in stop for w in words) \
                    or words[0] in stop or words[-1] in stop or c.distance > s.link_threshold:
                continue
            ranked.append((c.distance, -len(words), c.start, c))
        ranked.sort(key=lambda x: x[:3])
        chosen: list[LinkedEntity] = []
        taken: list[tuple[int, int]] = []
        for d, _, _, c in ranked:
            if any(c.start < b and a < c.end for a, b in taken):
                continue  # overlaps a mention already linked
            taken.append((c.start, c.end))
            for eid in c.eids:  # homonyms at the same distance: all of them
                if len(chosen) < s.max_anchors and all(x.eid != eid for x in chosen):
                    chosen.append(LinkedEntity(c.mention, eid, c.name, float(d)))
            if len(chosen) >= s.max_anchors:
                break
        names = self.graph.entities([x.eid for x in chosen]) if chosen else {}
        return [LinkedEntity(x.mention, x.eid, (names.get(x.eid) or {}).get("name") or x.name, x.distance)
                for x in chosen]

    # -- scoring -------------------------------------------------------------------------------------------
    def score(self, question: str, anchors: Sequence[int] | None = None, *, q_emb: np.ndarray | None = None,
              hops: int | None = None, max_edges: int | None = None) -> ScoringResult:
        """Score the neighbourhood of ``anchors`` (eids; None: linked from ``question``) for ``question``.

        Kept whole: one request's stages (link, fetch, features, score, names) share ``linked``, ``nb`` and
        ``anchor_rows`` (the anchors' rows read for the walk's masked question are reused for the names), one
        encode call makes both question vectors, and each stage fills its entry of ``timings``.
        """
        import torch

        from engine.retrieval.results import Entity
        from engine.scoring.extract import answer_candidates
        from engine.scoring.select import adaptive_top_p, top_k

        s = self.settings
        timings: dict[str, float] = {}
        warnings: list[str] = []
        linked: list[LinkedEntity] = []
        t0 = time.perf_counter()
        self.features.check_version()  # cached vectors of an entity renamed since are not used
        if anchors is None:
            linked = self.link(question)
            anchors = [x.eid for x in linked]
            timings["link"] = ms_since(t0)
            if not anchors:
                warnings.append("entity linking found no entity of the KG in the question: nothing to score")
        hops = hops if hops is not None else (s.hops if s.hops is not None else self.checkpoint.hops)
        max_edges = max_edges if max_edges is not None else (s.max_edges or self.checkpoint.max_edges)
        t1 = time.perf_counter()
        nb = fetch_neighbourhood(self.graph, list(anchors), hops, max_edges)
        timings["fetch"] = ms_since(t1)
        if nb.report.warning():
            warnings.append(nb.report.warning())  # type: ignore[arg-type]
        model_name = type(self.model).__name__
        if nb.num_edges == 0:
            return ScoringResult([], [], [], nb.report, model_name, linked, timings, warnings)
        t2 = time.perf_counter()
        texts = [] if q_emb is not None else [question]
        has_walk = getattr(self.model, "walk", None) is not None
        anchor_rows: Mapping[int, Mapping[str, Any]] = {}  # read here for the walk, kept for the names below
        if has_walk:
            # the relation walk's gates read the question with its topic mentions masked, as in training:
            # the linked n-grams, and the anchors' names where the question spells them
            from engine.scoring.models.query_walk import mask_mentions

            anchor_rows = self.graph.entities([int(e) for e in nb.nodes[nb.anchors].tolist()])
            mentions = [x.mention for x in linked] + [r.get("name") or "" for r in anchor_rows.values()]
            texts.append(mask_mentions(question, mentions))
        vecs = self.embedder.encode(texts) if texts else None  # one call for both
        if q_emb is None:
            q_emb = vecs[0]  # type: ignore[index]
        graph = self.features.question_graph(nb, q_emb)
        if has_walk:
            graph.q_walk = torch.as_tensor(np.asarray(vecs[-1], dtype=np.float32))  # type: ignore[index]
        timings["features"] = ms_since(t2)
        t3 = time.perf_counter()
        with self._lock, torch.inference_mode():
            self.model.eval()
            if hasattr(self.model, "entity_terms"):
                # the same computation as the trainer's evaluation and the benchmark: entity text terms
                # from a table projected once per entity, gathered per node
                graph.node_rows = self._entity_rows(nb.nodes, graph.node_emb, graph.has_text)
                self.model.attach_entity_terms(self._terms)
            logits = self.model(graph).float().cpu()
            end = getattr(self.model, "walk_end", None)
            walk_end = None if end is None else end.float().cpu().numpy()
        sel = adaptive_top_p(logits, p=s.p, tau=s.tau, k_min=s.k_min, k_max=s.k_max).numpy()
        conf = torch.sigmoid(logits).numpy()
        timings["score"] = ms_since(t3)
        t4 = time.perf_counter()
        # answers from the k_max best triples (a wider set than the evidence: the paths to the answers of a
        # multi-hop question are often longer than the adaptive selection keeps)
        cands = answer_candidates(nb.heads, nb.tails, conf, top_k(logits, s.k_max).numpy(), nb.anchors,
                                  prior=walk_end)[: s.max_answers]
        need = set(nb.nodes[nb.heads[sel]].tolist()) | set(nb.nodes[nb.tails[sel]].tolist())
        need |= {int(nb.nodes[v]) for v, _ in cands} | {int(e) for e in nb.nodes[nb.anchors].tolist()}
        rows = {**anchor_rows, **self.graph.entities(sorted(need - anchor_rows.keys()))}

        def ent(eid: int) -> Entity:
            r = rows.get(eid) or {}
            return Entity(eid, r.get("name") or r.get("key") or str(eid), r.get("key") or "")

        names = {ri.type: ri.name for ri in self.graph.relation_catalog().values()}
        triples = [ScoredTriple(ent(int(nb.nodes[nb.heads[i]])), names.get(nb.relation_types[int(nb.rels[i])],
                                                                            nb.relation_types[int(nb.rels[i])]),
                                ent(int(nb.nodes[nb.tails[i]])), float(conf[i])) for i in sel.tolist()]
        answers = [ScoredAnswer(ent(int(nb.nodes[v])), float(sc)) for v, sc in cands
                   if not nb.nameless[v]]
        timings["names"] = ms_since(t4)
        anchors_out = [ent(int(e)) for e in nb.nodes[nb.anchors].tolist()]
        return ScoringResult(triples, anchors_out, answers, nb.report, model_name, linked, timings, warnings)



def answer_text(result: ScoringResult, ratio: float = 0.5) -> str:
    """The no-LLM answer text: the extracted answers scoring at least ``ratio`` of the best one."""
    if not result.answers:
        return "The scorer found no answer in the neighbourhood of the question's entities."
    best = result.answers[0].score
    names = [a.entity.name for a in result.answers if best > 0 and a.score >= ratio * best and not math.isnan(a.score)]
    return ", ".join(names or [result.answers[0].entity.name])
