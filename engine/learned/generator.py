"""The learned pattern generator: a question in plain text -> a beam of patterns with their probabilities.

The model is a classifier over the pattern templates of the training questions (:mod:`engine.learned.templates`)
and one more class, *none* (a question no template answers), conditioned on the question with its topic mentions
masked (``X``)::

    h = W_e e(q) + mean_{g in ngrams(q)} E[hash(g)] + mean_{g in shape(q)} S[hash(g)]
    e(q) = unit(mean_{w in words(q)} unit(e(w)))           "words": the masked question's words, each embedded alone
    e(q) = e(masked question)                              "sentence": its own sentence embedding
    s_r(q) = max(0, max_{w in words(q)} cos(e(w), e(r)))   how well the question's words name relation r
    a_t(q) = mean_{r in t} s_r(q)                          how well they name the relations of template t
    a'_t(q) = mean_{r in t} (s_r(q) - mean_r s) / (std_r s + 0.05)    the same, against the other relations
    v_t(q) = mean_{w in words(q)} max_{r in t} max(0, cos(e(w), e(r)))  how much of the question t's relations name
             - |n(q) - edges(t)| / 4                       n(q): the relations its words name (closest, cosine >= 0.45)
    logit_t = (W_o relu(h))_t + (W_k relu(h))_{k(t)} + w_a a_t(q) + w_c a'_t(q) + w_v v_t(q)
    logit_none = (W_o relu(h))_none + w_n max_t a_t(q)
    p(. | q) = softmax(logits)

``k(t)`` is the template's skeleton, its structure with the relations taken out (:meth:`Template.skeleton`): the
model says "a chain of two relations" apart from which two, and the alignment says which. The hashed word 1-3-grams
learn the wordings seen in training (left out for a quarter of the training questions, and the sentence embedding
for another quarter, so that the rest of the model learns to do without them); the shape n-grams learn how questions
are put together whatever their words (:func:`shape_ids`: "the w of x 's w" asks two relations in a chain); the
sentence embedding and the alignment ``a`` carry the model to wordings it never saw (``a'`` compares the relations
with each other: a word that names a relation less closely than the training words did still names it more closely
than the others; ``v`` prefers the template that accounts for all the question's words, "the nation of X's couple"
two relations, not one): ``s_r`` matches a question word to a relation name by meaning ("couple" to ``spouse``,
"nation" to ``nationality``), ``words(q)`` being its content words and word pairs (:func:`content_ngrams`). The
*none* class is trained on questions about relations the KG lacks, made by the training itself
(:mod:`engine.learned.unanswerable`).

Which ``e(q)`` a generator reads is chosen at training (:attr:`engine.learned.train.GeneratorSettings.question_vector`)
and kept in its file: ``words`` needs no call to the embedding model for a question of known words (their vectors
are in the file, ``vocab``); ``sentence`` embeds each new masked question (one call), which carries a generator
trained on ``isorag synth``'s wordings alone to the wordings people use (MetaQA 1-hop Hits@1 0.945 against 0.82 with
``words``), where on people's own training questions the two answer alike.

A template that cannot match at the linked topics (an edge at a topic whose relation the topic entity has no
relationship of, read from the KG in one query) gets no probability, and its share is not handed to the others:
the model's mass on templates that do not fit is evidence that the question asks what this topic does not have
("what did Heat direct"). When no template fits, the beam is empty (probability 0) and :attr:`Proposal.why` says
why. A pattern's probability combines its template's ``p(t | q)`` with the linking confidence ``c`` of its topics
through weights fitted on held-out questions so that it is the probability of the pattern being right
(``GeneratorCheckpoint.score``: ``sigmoid(w_t logit p + w_l logit c + b)``; ``p c`` without them).

A generator is one ``torch.save`` file of plain data (``weights_only``), checked field by field as it loads
(:func:`load_generator`: a :class:`~engine._errors.CheckpointError` names the file and the field): ``{"format":
"isorag-generator/3", "kg", "embedding_slug", "emb_dim", "templates", "relations", "state_dict", "config", "link",
"threshold", "score", "seed", "info", "kg_id", "question_vector", "vocab", "vocab_vectors", "composer"}``.
``threshold``: the router's, calibrated on held-out training questions (:func:`engine.learned.train.calibrate`);
``vocab``: the training questions' words and word pairs and the relations' names, with their embeddings, so that a
question made of them needs no embedding call for them; ``composer``: the path composer's weights
(:mod:`engine.learned.compose`), or null (a file of format 2 has neither and is refused as an older generator).
"""

from __future__ import annotations

import math
import re
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine._errors import CheckpointError, InputError
from engine.linking.local import local_names
from engine.linking.relations import compound_heads, naming_forms
from engine.linking.text import (FEATURES, MASK, Candidate, LinkedTopic, LinkModel, candidates, mask, unknown_names,
                                 word_ngrams)
from engine.learned.compose import (Composer, PathInputs, RelationNames, graph_neighbours, path_template,
                                    raise_compounds, replica_neighbours, topic_paths, verbalize, word_gains)
from engine.learned.reading import kind_nouns, predicate_verbs, reading_positions, word_roles
from engine.learned.templates import Template
from engine.retrieval.pattern import Pattern
from engine._timing import ms

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from engine._protocols import GraphReader, TextEmbedder, VectorIndex

__all__ = ["FORMAT", "QUESTION_VECTORS", "ClassifierForward", "GeneratorCheckpoint", "PatternGenerator", "Proposal",
           "RelationAligner", "TemplateClassifier", "TemplateRelations", "alignment", "cached_encode", "check_text",
           "content_ngrams", "featurize", "known_first", "load_generator", "mean_units", "question_texts",
           "question_vectors", "relation_words", "save_generator", "sentence_words", "shape_ids", "skeleton_index"]

FORMAT = "isorag-generator/3"
DEFAULT_BEAM = 3
#: choices of topics a question's pattern is tried with (the linker's best, then other candidates alone)
READINGS = 3
#: hashed n-gram buckets (of the words, of the question's shape) and width of the hidden layer
BUCKETS = 1 << 14
SHAPE_BUCKETS = 1 << 12
HIDDEN = 128
#: longest question (characters) the generator reads; the engine's own bound is ``EngineConfig.max_question_chars``
MAX_TEXT = 100_000
#: question words and word pairs matched to relation names, at most
ALIGN_NGRAMS = 48
#: the training questions' words and word pairs whose vectors a generator file keeps, at most (1.5 KB each at 384
#: dimensions)
VOCAB_MAX = 20_000
#: what ``e(q)`` is (module docstring): the mean of the question's words' embeddings, or its sentence embedding
QUESTION_VECTORS = ("words", "sentence")
#: a question word this close (cosine) to a relation name names a relation (``v``'s count)
NAMES = 0.45
#: in training, the share of questions whose hashed n-grams are left out, and (drawn apart) whose sentence
#: embedding is (feature dropout)
BAG_DROP = 0.25
#: words never matched to a relation name (they name no relation in any KG)
FUNCTION_WORDS = frozenset("""
a an the of in on at to for from by with and or as is are was were be been being do does did done which who whom
whose what when where why how that this these those it its their his her him he she they them me my your our i you
we also same other than about into over under after before one ones there s 's ? name give list tell show find
entity entities thing things someone something anyone anything know
""".split())


def check_text(text: Any, limit: int, what: str = "question") -> str:
    """``text`` when it is a string of at most ``limit`` characters, else an InputError that says so."""
    if not isinstance(text, str):
        raise InputError(f"a {what} must be a string, got {type(text).__name__}")
    if len(text) > limit:
        raise InputError(f"the {what} has {len(text):,} characters, more than the {limit:,} allowed "
                         f"(EngineConfig.max_question_chars, ISORAG_MAX_QUESTION_CHARS)")
    return text


_POSSESSIVE = re.compile(r"\s*['’]s\b")


_TOKENS = re.compile(r"'s|[^\W_]+")


def shape_ids(text: str, buckets: int = SHAPE_BUCKETS) -> list[int]:
    """Bucket ids of the 1-4-grams of the question's *shape*: its function words and the mask kept, each run of
    other words one ``w`` ("what is the nation of X 's couple" -> "what is the w of x 's w"): how a question is put
    together (two relations in a chain of possessives), whatever words name the relations."""
    words = [w.lower() for w in _TOKENS.findall(_POSSESSIVE.sub(" 's", text))]
    shape: list[str] = []
    for w in words:
        token = w if w in FUNCTION_WORDS or w == MASK.lower() else "w"
        if not (token == "w" and shape and shape[-1] == "w"):
            shape.append(token)
    grams = {" ".join(shape[i:i + n]) for n in range(1, 5) for i in range(len(shape) - n + 1)}
    return sorted({zlib.crc32(g.encode("utf-8")) % buckets for g in grams}) or [0]


def ngram_ids(text: str, buckets: int = BUCKETS) -> list[int]:
    """Bucket ids of the lower-cased word 1-3-grams of ``text`` (a stable hash: crc32), a possessive ``'s`` a word
    of its own however it is written ("X's", "X 's")."""
    text = _POSSESSIVE.sub(" 's", text)
    return sorted({zlib.crc32(g.encode("utf-8")) % buckets for g in word_ngrams(text, 3)}) or [0]


_WORDS = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def relation_words(name: str) -> str:
    """A relation name as words: the last part of a URI, ``_`` and camelCase split (``placeOfBirth`` -> ``place
    of birth``), a leading ``has``/``is`` dropped (``has_genre`` -> ``genre``)."""
    tail = re.split(r"[/#:]", name.rstrip("/#"))[-1] or name
    words = " ".join(_CAMEL.sub(" ", tail).replace("_", " ").replace("-", " ").split()).lower()
    parts = words.split()
    if len(parts) > 1 and parts[0] in ("has", "is"):
        parts = parts[1:]
    return " ".join(parts) or name


def sentence_words(masked: str, cap: int = ALIGN_NGRAMS) -> list[str]:
    """The distinct words of a masked question (lower-cased, the mask left out, a possessive ``'s`` one word), in
    order, at most ``cap``: what ``e(q)`` averages when it is ``words`` (:func:`question_vectors`)."""
    words = [w.lower() for w in _TOKENS.findall(_POSSESSIVE.sub(" 's", masked))]
    return list(dict.fromkeys(w for w in words if w != MASK.lower()))[:cap]


def question_vectors(masked: Sequence[str], encode: Callable[[Sequence[str]], Any], dim: int, kind: str, *,
                     batch: int = 4096, progress: bool = False) -> np.ndarray:
    """``e(q)`` of the module docstring for each masked question, ``[N, dim]``: its sentence embedding
    (``kind="sentence"``), or (``"words"``) the mean of the unit embeddings of its words (:func:`sentence_words`),
    made a unit vector (zeros for a question of no word but the mask). Each text is embedded once, through
    ``encode`` (in service the retriever's cached encode, the generator file's vocabulary first)."""
    from tqdm import tqdm

    if kind == "sentence":
        out = np.zeros((len(masked), dim), np.float32)
        for i in tqdm(range(0, len(masked), batch), desc="questions", unit="batch", disable=not progress):
            out[i:i + batch] = np.asarray(encode(list(masked[i:i + batch])), dtype=np.float32)
        return out
    words = [sentence_words(m) for m in masked]
    vocab = list(dict.fromkeys(w for ws in words for w in ws))
    table = np.zeros((len(vocab), dim), np.float32)
    for i in tqdm(range(0, len(vocab), batch), desc="question words", unit="batch", disable=not progress):
        table[i:i + batch] = _unit(np.asarray(encode(vocab[i:i + batch]), dtype=np.float32))
    at = {w: i for i, w in enumerate(vocab)}
    return mean_units(table, [[at[w] for w in ws] for ws in words], dim)


def mean_units(table: np.ndarray, rows: Sequence[Sequence[int]], dim: int) -> np.ndarray:
    """``[len(rows), dim]``: per list of rows of ``table`` (unit vectors), the unit vector of their mean (zeros for
    none)."""
    out = np.zeros((len(rows), dim), np.float32)
    for b, r in enumerate(rows):
        if len(r):
            out[b] = _unit(table[list(r)].mean(0))
    return out


def content_ngrams(masked: str, cap: int = ALIGN_NGRAMS) -> list[str]:
    """The words of a masked question that may name a relation (not :data:`FUNCTION_WORDS`, not the mask) and the
    pairs of such words next to each other, in order, at most ``cap``."""
    words = [w.lower() for w in _WORDS.findall(_POSSESSIVE.sub(" ", masked))]
    keep = [w if w not in FUNCTION_WORDS and w != MASK.lower() else "" for w in words]
    out = [w for w in keep if w]
    out += [f"{a} {b}" for a, b in zip(keep, keep[1:]) if a and b]
    return list(dict.fromkeys(out))[:cap]


class RelationAligner:
    """``s_r(q)`` of the module docstring for a fixed list of relations: their names embedded once, question words
    through ``encode`` (the retriever's cached encode in service: words repeat across questions). A compound word
    whose head is one of a relation's names (:func:`engine.linking.relations.compound_head`: "screenwriter" ends
    in "writer", a name of ``written_by``) is at least as near each relation as its head."""

    def __init__(self, relations: Sequence[str], encode: Callable[[Sequence[str]], Any]) -> None:
        self.relations = list(relations)
        self.encode = encode
        heads = list(compound_heads(n for r in self.relations for n in naming_forms(r, relation_words(r))))
        texts = [relation_words(r) for r in self.relations]
        #: what it embeds of its own (a generator file keeps their vectors with its vocabulary)
        self.names = texts + heads
        vecs = _unit(np.asarray(encode(self.names), dtype=np.float32)) if self.relations else None
        self._r = vecs[:len(texts)] if vecs is not None else np.zeros((0, 1), np.float32)
        self._heads = {h: np.maximum(vecs[len(texts) + k] @ self._r.T, 0.0).astype(np.float32)
                       for k, h in enumerate(heads)} if vecs is not None else {}
        self._head_names = tuple(self._heads)

    def word_sims(self, masked: Sequence[str], *, batch: int = 4096, progress: bool = False) -> list[np.ndarray]:
        """Per question, ``[its content words, relations]``: how well each of its words names each relation (cosine,
        0 and up), the distinct words of all the questions embedded once."""
        grams = [content_ngrams(m) for m in masked]
        vocab = list(dict.fromkeys(g for gs in grams for g in gs))
        sims = np.zeros((len(vocab), len(self.relations)), dtype=np.float32)
        if vocab and self.relations:
            from tqdm import tqdm

            for i in tqdm(range(0, len(vocab), batch), desc="question words", unit="batch", disable=not progress):
                vecs = self.encode(vocab[i:i + batch])
                sims[i:i + batch] = np.maximum(_unit(np.asarray(vecs, dtype=np.float32)) @ self._r.T, 0.0)
        raise_compounds(sims, vocab, self._heads, self._head_names)
        row = {g: i for i, g in enumerate(vocab)}
        return [sims[[row[g] for g in gs]] for gs in grams]

    def sims_one(self, vecs: Any, grams: Sequence[str] = ()) -> np.ndarray:
        """``[n, relations]`` for one question from the embeddings of its :func:`content_ngrams` (``[n, dim]``;
        ``grams``: the n-grams themselves, for the compounds)."""
        if not len(vecs) or not self.relations:
            return np.zeros((0, len(self.relations)), dtype=np.float32)
        vecs = np.asarray(vecs, dtype=np.float32).reshape(-1, self._r.shape[-1])
        return raise_compounds(np.maximum(_unit(vecs) @ self._r.T, 0.0).astype(np.float32), grams, self._heads,
                               self._head_names)


@dataclass(frozen=True)
class TemplateRelations:
    """The templates' relations as the alignment reads them: ``share`` [templates, relations], the share of each
    template's edges of each relation (``a = share s``); ``index`` [templates, 3], the relation columns of each
    template's edges (the last repeated to three)."""

    share: np.ndarray
    index: np.ndarray
    edges: np.ndarray  # [templates]: how many relations (edges) each template has

    @classmethod
    def of(cls, templates: Sequence[Template], relations: Sequence[str]) -> TemplateRelations:
        col = {r: i for i, r in enumerate(relations)}
        share = np.zeros((len(templates), len(relations)), dtype=np.float32)
        index = np.zeros((len(templates), 3), dtype=np.int64)
        for j, t in enumerate(templates):
            cols = [col[r] for r in t.relations if r in col] or [0]
            for c in cols:
                share[j, c] += 1.0 / len(cols)
            index[j] = (cols * 3)[:3] if len(cols) < 3 else cols[:3]
        return cls(share, index, np.array([len(t.triples) for t in templates], dtype=np.float32))


def alignment(sims: Sequence[np.ndarray], rel: TemplateRelations) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(a, a', v)`` of the module docstring, ``[B, templates]`` each, from each question's word-relation cosines
    (:meth:`RelationAligner.word_sims`); ``v`` less ``|n - len(t)|``/4, ``n`` the relations the question's words
    name (each word its closest, at a cosine of at least :data:`NAMES`): a template with as many relations as the
    question names."""
    n_rel = rel.share.shape[1]
    best = np.stack([s.max(0) if len(s) else np.zeros(n_rel, np.float32) for s in sims]) if sims \
        else np.zeros((0, n_rel), np.float32)
    z = (best - best.mean(-1, keepdims=True)) / (best.std(-1, keepdims=True) + 0.05) if n_rel else best
    cover = np.zeros((len(sims), rel.share.shape[0]), dtype=np.float32)
    for b, s in enumerate(sims):
        if len(s) and n_rel:
            named = float(len(set(s.argmax(-1)[s.max(-1) >= NAMES].tolist())))
            cover[b] = s[:, rel.index].max(-1).mean(0) - np.abs(named - rel.edges) / 4  # [words, templates, 3]
    return (best @ rel.share.T).astype(np.float32), (z @ rel.share.T).astype(np.float32), cover


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def _classifier_class() -> Any:
    import torch
    from torch import nn

    class TemplateClassifier(nn.Module):
        """The classifier of the module docstring; its last output is the *none* class.

        ``skeletons``: the index of each template's skeleton (:meth:`Template.skeleton`), whose logit is added to
        the template's (a chain of two relations, whichever they are).

        Shapes: ``emb`` [B, dim], ``ids`` [N] with ``offsets`` [B] and ``shape_ids`` [M] with ``shape_offsets``
        [B] (EmbeddingBags: the word n-grams and the shape n-grams), ``align``, ``contrast`` and
        ``cover`` [B, templates] (the relation alignment ``a``, ``a'`` and ``v``), logits [B, templates + 1]."""

        def __init__(self, dim: int, templates: int, buckets: int = BUCKETS, hidden: int = HIDDEN,
                     dropout: float = 0.1, shape_buckets: int = SHAPE_BUCKETS,
                     skeletons: Sequence[int] | None = None) -> None:
            super().__init__()
            skeletons = list(skeletons) if skeletons is not None else [0] * templates
            if len(skeletons) != templates or any(not isinstance(k, int) or k < 0 for k in skeletons):
                raise TypeError(f"skeletons must be {templates} indices")
            self.config = {"dim": dim, "templates": templates, "buckets": buckets, "hidden": hidden,
                           "dropout": dropout, "shape_buckets": shape_buckets, "skeletons": skeletons}
            self.skel_of = torch.as_tensor(skeletons, dtype=torch.long)
            self.proj = nn.Linear(dim, hidden)
            self.bag = nn.EmbeddingBag(buckets, hidden, mode="mean", sparse=True)  # a step touches few rows
            self.shape = nn.EmbeddingBag(shape_buckets, hidden, mode="mean", sparse=True)
            nn.init.zeros_(self.bag.weight)  # an n-gram never seen in training adds nothing
            nn.init.zeros_(self.shape.weight)
            self.drop = nn.Dropout(dropout)
            self.out = nn.Linear(hidden, templates + 1)
            self.skel = nn.Linear(hidden, max(skeletons, default=0) + 1)
            self.align_w = nn.Parameter(torch.tensor(2.0))
            self.contrast_w = nn.Parameter(torch.tensor(0.5))
            self.cover_w = nn.Parameter(torch.tensor(2.0))
            self.none_w = nn.Parameter(torch.tensor(-2.0))

        def forward(self, emb: torch.Tensor, ids: torch.Tensor, offsets: torch.Tensor, shape_ids: torch.Tensor,
                    shape_offsets: torch.Tensor, align: torch.Tensor, contrast: torch.Tensor,
                    cover: torch.Tensor) -> torch.Tensor:
            bag, sentence = self.bag(ids, offsets), self.proj(emb)
            if self.training:  # now and then without the wording or the sentence: the other features must carry it
                bag = bag * (torch.rand(bag.shape[0], 1) >= BAG_DROP).to(bag.dtype)
                sentence = sentence * (torch.rand(bag.shape[0], 1) >= BAG_DROP).to(bag.dtype)
            h = torch.relu(sentence + bag + self.shape(shape_ids, shape_offsets))
            logits = self.out(self.drop(h))
            lexical = logits[:, :-1]
            if self.training:  # now and then without the template's own output: its skeleton and relations decide
                lexical = lexical * (torch.rand(lexical.shape[0], 1) >= BAG_DROP).to(lexical.dtype)
            named = (lexical + self.skel(self.drop(h))[:, self.skel_of] + self.align_w * align
                     + self.contrast_w * contrast + self.cover_w * cover)
            none = logits[:, -1:] + self.none_w * align.max(-1, keepdim=True).values
            return torch.cat([named, none], -1)

    return TemplateClassifier


TemplateClassifier = _classifier_class()


class ClassifierForward:
    """A :class:`TemplateClassifier` in evaluation, run in numpy on its weights (taken once): the same logits as
    the torch module's forward for a question or a few, without its per-operator overhead (the module took ~4.6 ms
    a question on a 2-core machine, this ~0.1 ms)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        w = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
        self.proj_w, self.proj_b = w["proj.weight"].T.copy(), w["proj.bias"]
        self.bag, self.shape = w["bag.weight"], w["shape.weight"]
        # the template outputs and their skeletons' in one product: [hidden, templates + 1 + skeletons]
        self.out_w = np.concatenate([w["out.weight"], w["skel.weight"]]).T.copy()
        self.out_b = np.concatenate([w["out.bias"], w["skel.bias"]])
        self.n_out = int(w["out.weight"].shape[0])
        self.skel_of = model.skel_of.numpy()
        self.align_w, self.contrast_w = float(w["align_w"]), float(w["contrast_w"])
        self.cover_w, self.none_w = float(w["cover_w"]), float(w["none_w"])

    def __call__(self, emb: np.ndarray, words: Sequence[Sequence[int]], shapes: Sequence[Sequence[int]],
                 align: np.ndarray, contrast: np.ndarray, cover: np.ndarray) -> np.ndarray:
        """Logits ``[B, templates + 1]`` (float64) of ``emb`` [B, dim] and each question's n-gram and shape ids."""
        bag = np.stack([self.bag[list(r)].mean(0) if len(r) else np.zeros(self.bag.shape[1], np.float32)
                        for r in words])
        shape = np.stack([self.shape[list(r)].mean(0) if len(r) else np.zeros(self.shape.shape[1], np.float32)
                          for r in shapes])
        h = np.maximum(np.asarray(emb, dtype=np.float32) @ self.proj_w + self.proj_b + bag + shape, 0.0)
        y = (h @ self.out_w + self.out_b).astype(np.float64)
        logits, skel = y[:, :self.n_out], y[:, self.n_out:]
        named = (logits[:, :-1] + skel[:, self.skel_of] + self.align_w * align + self.contrast_w * contrast
                 + self.cover_w * cover)
        none = logits[:, -1:] + self.none_w * np.asarray(align, dtype=np.float64).max(-1, keepdims=True)
        return np.concatenate([named, none], -1)


def skeleton_index(templates: Sequence[Template]) -> list[int]:
    """Per template, the index of its skeleton among the templates' skeletons (in order of first appearance)."""
    seen: dict[str, int] = {}
    return [seen.setdefault(t.skeleton(), len(seen)) for t in templates]


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
    #: ``(w_t, w_l, b)``: a pattern's probability is ``sigmoid(w_t logit p(t | q) + w_l logit c + b)``, ``c`` the
    #: linking confidence, fitted on held-out questions (:func:`engine.learned.train.fit_score`); None: ``p c``
    score: tuple[float, float, float] | None = None
    kg_id: str | None = None  # the identity of the KG it was made for (engine.stores.graph.GraphStore.identity)
    #: what ``e(q)`` is (:data:`QUESTION_VECTORS`, module docstring)
    question_vector: str = "words"
    #: the words and word pairs of the training questions (:func:`question_texts`) and their embeddings ``[n, dim]``
    #: float32: a question made of them is scored with no embedding call, in the first process that loads the file
    vocab: list[str] = field(default_factory=list)
    vocab_vectors: np.ndarray | None = None
    #: ranks the relation paths at a one-topic question's topic, known templates or not
    #: (:mod:`engine.learned.compose`); None: the classifier's templates alone
    composer: Composer | None = None

    def probability(self, template_p: float, link_confidence: float) -> float:
        """A pattern's probability from its template's and its topics' (see ``score``)."""
        if self.score is None:
            return template_p * link_confidence
        if template_p <= 0 or link_confidence <= 0:
            return 0.0
        w_t, w_l, b = self.score
        z = w_t * _logit(template_p) + w_l * _logit(link_confidence) + b
        return float(1.0 / (1.0 + math.exp(-max(min(z, 40.0), -40.0))))

    @property
    def relations(self) -> list[str]:
        """The relation names of the templates, sorted (the alignment's columns)."""
        return sorted({r for t in self.templates for r in t.relations})


def save_generator(ckpt: GeneratorCheckpoint, path: str | Path) -> Path:
    import torch

    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"format": FORMAT, "kg": ckpt.kg, "embedding_slug": ckpt.embedding_slug, "emb_dim": ckpt.emb_dim,
            "templates": [t.to_json() for t in ckpt.templates], "relations": ckpt.relations,
            "config": dict(ckpt.model.config),
            "state_dict": {k: v.detach().cpu() for k, v in ckpt.model.state_dict().items()},
            "link": ckpt.link.to_json(), "threshold": float(ckpt.threshold), "seed": int(ckpt.seed),
            "score": list(ckpt.score) if ckpt.score is not None else None, "info": ckpt.info, "kg_id": ckpt.kg_id,
            "question_vector": ckpt.question_vector, "vocab": list(ckpt.vocab),
            "vocab_vectors": torch.as_tensor(ckpt.vocab_vectors if ckpt.vocab_vectors is not None
                                             else np.zeros((0, ckpt.emb_dim), np.float32), dtype=torch.float32),
            "composer": ckpt.composer.to_json() if ckpt.composer is not None else None}
    tmp = path.with_name(path.name + ".tmp")
    torch.save(data, tmp)
    tmp.replace(path)
    return path


class _Fields:
    """Reads the fields of a loaded generator file, each checked: a bad one is a CheckpointError naming the file
    and the field."""

    def __init__(self, path: Path, data: Mapping[str, Any]) -> None:
        self.path, self.data = path, data

    def bad(self, name: str, why: str) -> CheckpointError:
        return CheckpointError(f"{self.path}: field {name!r} {why}: the file is damaged or was not written by "
                               f"`isorag train-generator`; train the generator again")

    def get(self, name: str, kind: type | tuple[type, ...], what: str) -> Any:
        if name not in self.data:
            raise self.bad(name, "is missing")
        v = self.data[name]
        if isinstance(v, bool) or not isinstance(v, kind):  # (no field is a bool)
            raise self.bad(name, f"must be {what}, not {type(v).__name__}")
        return v

    def number(self, name: str, lo: float, hi: float) -> float:
        v = float(self.get(name, (int, float), "a number"))
        if not lo <= v <= hi or math.isnan(v):
            raise self.bad(name, f"must lie in [{lo}, {hi}], not {v!r}")
        return v


def _check_templates(f: _Fields) -> list[Template]:
    raw = f.get("templates", list, "a list")
    if not raw:
        raise f.bad("templates", "is empty")
    out: list[Template] = []
    for i, t in enumerate(raw):
        try:
            tpl = Template.from_json(t)
            if not tpl.triples or any(not (s and r) for h, r, tl in tpl.triples for s in (h, tl)):
                raise ValueError("an empty triple or slot")
            tpl.answer_slot()
        except Exception as e:  # any malformed template is the same error for the user
            raise f.bad(f"templates[{i}]", f"is not a template ({type(e).__name__}: {e})") from e
        out.append(tpl)
    return out


def _check_model(f: _Fields, templates: int, emb_dim: int, skeletons: list[int]) -> Any:
    import torch

    config = f.get("config", dict, "a mapping")
    want = {"dim": emb_dim, "templates": templates}
    for key, value in want.items():
        if config.get(key) != value:
            raise f.bad(f"config.{key}", f"is {config.get(key)!r}, the file's other fields say {value!r}")
    if config.get("skeletons") != skeletons:
        raise f.bad("config.skeletons", "does not give the skeletons of the templates")
    try:
        model = TemplateClassifier(**config)
    except TypeError as e:
        raise f.bad("config", f"has unknown or missing settings ({e})") from e
    state = f.get("state_dict", dict, "a mapping of tensors")
    expected = model.state_dict()
    for key, value in expected.items():
        got = state.get(key)
        if not isinstance(got, torch.Tensor):
            raise f.bad(f"state_dict.{key}", "is missing" if got is None else "is no tensor")
        if tuple(got.shape) != tuple(value.shape):
            raise f.bad(f"state_dict.{key}", f"has shape {tuple(got.shape)}, the model needs {tuple(value.shape)}")
        if got.is_floating_point() and not bool(torch.isfinite(got).all()):
            raise f.bad(f"state_dict.{key}", "holds values that are not finite")
    extra = sorted(set(state) - set(expected))
    if extra:
        raise f.bad(f"state_dict.{extra[0]}", "is no weight of the model")
    model.load_state_dict(state)
    model.eval()
    return model


def _check_link(f: _Fields) -> LinkModel:
    link = f.get("link", dict, "a mapping")
    try:
        weights = [float(w) for w in link["weights"]]
        rates = {str(k): float(v) for k, v in dict(link["template_rate"]).items()}
        max_topics = int(link.get("max_topics", 1))
    except Exception as e:  # any malformed linking model is the same error for the user
        raise f.bad("link", f"is not a linking model ({type(e).__name__}: {e})") from e
    if len(weights) != len(FEATURES) or not all(math.isfinite(w) for w in weights):
        raise f.bad("link.weights", f"must be {len(FEATURES)} finite numbers")
    if not 1 <= max_topics <= 8:
        raise f.bad("link.max_topics", f"must lie in [1, 8], not {max_topics}")
    return LinkModel(weights, rates, max_topics)


def load_generator(path: str | Path, *, kg: str | None = None, embedding_slug: str | None = None,
                   kg_id: str | None = None) -> GeneratorCheckpoint:
    """A generator file, checked field by field and against the KG (its name and ``kg_id``, its identity) and
    embedding model it is used with (a mismatch, or a file that is no generator, is a CheckpointError naming the
    file and the field)."""
    import torch

    p = Path(path).expanduser()
    if not p.is_file():
        raise CheckpointError(f"no generator file at {p}: train one with `isorag train-generator`")
    try:
        data = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:  # any unreadable file is the same error for the user
        raise CheckpointError(f"{p}: not a generator file ({type(e).__name__}: {e})") from e
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        got = data.get("format") if isinstance(data, dict) else None
        hint = " (an older generator: train it again)" if isinstance(got, str) and got.startswith("isorag-generator/") \
            else ""
        raise CheckpointError(f"{p}: not a generator file (field 'format' is {got!r}, expected {FORMAT!r}){hint}")
    f = _Fields(p, data)
    file_kg = f.get("kg", str, "a KG name")
    slug = f.get("embedding_slug", str, "a string")
    if kg is not None and file_kg != kg:
        raise CheckpointError(f"{p}: a generator of KG {file_kg!r}, not of {kg!r}: train one on this KG "
                              f"(isorag train-generator --kg {kg})")
    if kg_id is not None and data.get("kg_id") not in (None, kg_id):
        raise CheckpointError(f"{p}: a generator of another KG named {file_kg!r} (identity {data['kg_id']}; this "
                              f"KG's is {kg_id}: it was dropped and made again since): train one on this KG "
                              f"(isorag train-generator --kg {file_kg})")
    if embedding_slug is not None and slug != embedding_slug:
        raise CheckpointError(f"{p}: trained with embedding model {slug!r}, the engine uses "
                              f"{embedding_slug!r}: train it again with this model")
    emb_dim = int(f.number("emb_dim", 1, 1 << 16))
    templates = _check_templates(f)
    relations = f.get("relations", list, "a list of relation names")
    if relations != sorted({r for t in templates for r in t.relations}):
        raise f.bad("relations", "does not list the templates' relations")
    model = _check_model(f, len(templates), emb_dim, skeleton_index(templates))
    link = _check_link(f)
    threshold = f.number("threshold", 0.0, 1.0 + 1e-6)
    seed = int(f.number("seed", 0, 2**63))
    info = data.get("info") or {}
    if not isinstance(info, dict):
        raise f.bad("info", "must be a mapping")
    score = data.get("score")
    if score is not None:
        if not isinstance(score, (list, tuple)) or len(score) != 3 or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in score):
            raise f.bad("score", "must be three finite numbers or null")
        score = (float(score[0]), float(score[1]), float(score[2]))
    kg_id_ = data.get("kg_id")
    kind = f.get("question_vector", str, "a string")
    if kind not in QUESTION_VECTORS:
        raise f.bad("question_vector", f"must be one of {', '.join(QUESTION_VECTORS)}, not {kind!r}")
    vocab, vocab_vectors = _check_vocab(f, emb_dim)
    return GeneratorCheckpoint(file_kg, slug, emb_dim, templates, model, link, threshold, seed, dict(info), str(p),
                               score, kg_id_ if isinstance(kg_id_, str) else None, kind, vocab, vocab_vectors,
                               _check_composer(f))


def _check_vocab(f: _Fields, emb_dim: int) -> tuple[list[str], np.ndarray]:
    import torch

    vocab = f.get("vocab", list, "a list of texts")
    if not all(isinstance(w, str) for w in vocab) or len(set(vocab)) != len(vocab):
        raise f.bad("vocab", "must hold distinct texts")
    vecs = f.get("vocab_vectors", torch.Tensor, "a tensor")
    if tuple(vecs.shape) != (len(vocab), emb_dim) or not vecs.is_floating_point():
        raise f.bad("vocab_vectors", f"has shape {tuple(vecs.shape)}, the vocabulary needs {(len(vocab), emb_dim)}")
    if not bool(torch.isfinite(vecs).all()):
        raise f.bad("vocab_vectors", "holds values that are not finite")
    return vocab, vecs.to(torch.float32).numpy()


def _check_composer(f: _Fields) -> Composer | None:
    if "composer" not in f.data:
        raise f.bad("composer", "is missing")
    raw = f.data["composer"]
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise f.bad("composer", f"must be a mapping or null, not {type(raw).__name__}")
    try:
        return Composer.from_json(raw)
    except Exception as e:  # any malformed composer is the same error for the user
        raise f.bad("composer", f"is not a path composer ({type(e).__name__}: {e})") from e


@dataclass
class Proposal:
    """What the generator makes of a question (or a claim): the linked topics, the beam of patterns with their
    probabilities (best first) and the templates they come from, timings (ms: ``link``, ``generate``), and when the
    beam is empty, ``why`` (no entity named, no template fits the topic...)."""

    text: str
    linked: list[LinkedTopic]
    beam: list[tuple[Pattern, float]]
    templates: list[Template]
    timings: dict[str, float]
    warnings: list[str] = field(default_factory=list)
    #: why there is no pattern (the beam is empty), or None
    why: str | None = None
    #: the probability the model gives the *none* class (a question no template answers)
    none_probability: float = 0.0
    #: per beam entry, its template's probability (before the linking confidence is taken in)
    template_probabilities: list[float] = field(default_factory=list)
    #: the linked topics' confidence (the product of theirs)
    link_confidence: float = 0.0

    @property
    def probability(self) -> float:
        return self.beam[0][1] if self.beam else 0.0

    @property
    def pattern(self) -> Pattern | None:
        return self.beam[0][0] if self.beam else None

    def to_dict(self) -> dict[str, Any]:
        return {"linked": [t.to_dict() for t in self.linked],
                "beam": [{"pattern": p.to_json(), "probability": round(pr, 6)} for p, pr in self.beam],
                "none_probability": round(self.none_probability, 6), "why": self.why,
                "timings": dict(self.timings), "warnings": list(self.warnings)}


class PatternGenerator:
    """A loaded generator working on a KG's stores (given one by one: it never sees the Engine)."""

    def __init__(self, ckpt: GeneratorCheckpoint, *, graph: GraphReader, vectors: VectorIndex,
                 embedder: TextEmbedder, encode: Callable[[Sequence[str]], Any] | None = None,
                 max_chars: int = MAX_TEXT, replica: Callable[[], Any] | None = None) -> None:
        """``replica``: gives the KG's graph read replica when one is ready (the retriever's
        :meth:`~engine.retrieval.retriever.Retriever.replica_now`): the question's names are then looked up and its
        topics' relations read in process, and Neo4j is asked only for a name the replica leaves unknown."""
        self.ckpt, self.graph, self.vectors, self.embedder = ckpt, graph, vectors, embedder
        self.replica = replica
        # the retriever's cached encode (the topics' names, embedded with the question's words in one call where no
        # replica is ready, are then cache hits when the pattern is matched), the training words' vectors first
        self.encode = known_first(encode or cached_encode(embedder.encode), ckpt.vocab, ckpt.vocab_vectors)
        self.max_chars = max_chars
        self.templates = ckpt.templates
        self._by_topics = np.array([t.topics for t in ckpt.templates])
        # per template, what each topic slot (T1, T2...) and the answer slot need at their entities
        self._needs = [([t.slot_relations(f"T{i + 1}") for i in range(t.topics)], t.slot_relations(t.answer_slot()))
                       for t in ckpt.templates]
        self._names: dict[str, str] | None = None
        self._pool: Any = None  # one worker: the topics' relationships are read while the question is embedded
        self._aligner: RelationAligner | None = None
        self._align_m: TemplateRelations | None = None
        self._forward: ClassifierForward | None = None
        self._composer_aligner: tuple[RelationNames, dict[str, int]] | None = None
        self._known: dict[Template, Template] | None = None
        self._phrases: dict[tuple[tuple[str, bool], ...], np.ndarray] = {}  # a path -> its phrases' unit vectors
        self._index: dict[Template, int] = {}

    def _reader(self) -> Any:
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="isorag-generator")
        return self._pool

    @property
    def threshold(self) -> float:
        return self.ckpt.threshold

    def threshold_note(self) -> str:
        """What the threshold rests on, in words (from the calibration kept in the file)."""
        cal = self.ckpt.info.get("calibration") or {}
        if not cal.get("kept"):
            return ""
        return (f"held-out patterns at or above it were right {100 * float(cal['precision']):.1f}% of the time, "
                f"{cal['kept']} of {cal['questions']} held-out questions")

    def relation_names(self) -> dict[str, str]:
        """Relationship type -> relation name (the KG's catalog, read once)."""
        if self._names is None:
            self._names = {ri.type: ri.name for ri in self.graph.relation_catalog().values()}
        return self._names

    def aligner(self) -> tuple[RelationAligner, TemplateRelations]:
        if self._aligner is None:
            self._aligner = RelationAligner(self.ckpt.relations, self.encode)
            self._align_m = TemplateRelations.of(self.templates, self.ckpt.relations)
        assert self._align_m is not None
        return self._aligner, self._align_m

    def _replica(self) -> Any:
        return self.replica() if self.replica is not None else None

    def candidates(self, text: str) -> list[Candidate]:
        """The text's candidate mentions (:func:`engine.linking.text.candidates`; in process where a replica is
        ready)."""
        rep = self._replica()
        return candidates(text, self.graph, vectors=self.vectors, embedder=self.embedder,
                          local=local_names(rep) if rep is not None else None, known_words=self.ckpt.link.words)

    def link(self, text: str, max_topics: int | None = None, min_topics: int = 1) -> list[LinkedTopic]:
        cands = self.candidates(text)
        return self.ckpt.link.choose(cands, text, max_topics, min_topics)

    def readings(self, text: str, limit: int = READINGS) -> list[list[LinkedTopic]]:
        """The choices of topics to try for a question, best first (:meth:`engine.linking.text.LinkModel.readings`)."""
        return self.ckpt.link.readings(self.candidates(text), text, limit=limit)

    def _joint(self, text: str, readings: Sequence[list[LinkedTopic]], detail: dict[str, float] | None = None,
               composed: dict[int, Any] | None = None) -> tuple[int, Any, Any, Any]:
        """The reading whose topics fit a template best: the first reading's pattern when it is sure (its
        probability at least the router's threshold), else the most probable of all (its best fitting template's
        probability times its linking confidence); the first reading when no template fits any. With a composer,
        that reading and the first are compared again by what the composer makes of each
        (:meth:`_composed_choice`; ``composed``: their compositions by reading, for the caller to reuse).
        Returns (reading, template probabilities, which fit, profiles).

        One read of all the readings' topics' relations (from the replica where one is ready, else from Neo4j while
        the first reading is scored). The first reading a template fits is scored first (the model once, on words
        whose vectors the file or the cache holds); the others, all in one more call, only when it is unsure: the
        linker's other readings ("what", "star" read as films beside the name the question asks about) are then
        scored too, and a sure first reading keeps its pattern (``detail``: ms of the parts, ``profiles`` the time
        spent on the read or waiting for it)."""
        topics = [t for r in readings for t in r]
        detail = detail if detail is not None else {}
        t0 = time.perf_counter()
        fits: list[tuple[np.ndarray, list[set[tuple[str, bool]]]]] | None = None
        reading: Any = None
        local = self._replica() is not None
        if local:
            fits = self._fits(readings, self._profiles(topics))
        else:
            reading = self._reader().submit(self._profiles, topics)
        detail["profiles"] = ms(time.perf_counter() - t0)

        def pair(i: int) -> tuple[str, list[str]]:
            # the topics' names are embedded with the question for the retrieval that follows, unless a replica is
            # ready: the retrieval then takes an exact name's stored vector, as for a pattern given
            return mask(text, [(t.start, t.end) for t in readings[i]]), [] if local else [t.name for t in readings[i]]

        first = next((i for i in range(len(readings)) if fits is None or fits[i][0].any()), 0)
        ps: dict[int, Any] = {first: self.scores_many([pair(first)], detail)[0]}
        if fits is None:
            t1 = time.perf_counter()
            fits = self._fits(readings, reading.result())
            detail["profiles"] += ms(time.perf_counter() - t1)
            if not fits[first][0].any():
                first = next((i for i in range(len(readings)) if fits[i][0].any()), 0)
                if first not in ps:
                    ps[first] = self.scores_many([pair(first)], detail)[0]

        def joint(i: int) -> tuple[float, float]:
            """(the pattern's probability, the product of its best fitting template's probability and the linking
            confidence): the first is what the router compares with its threshold; the readings are compared by
            the second, since the fitted map of the first learns from held-out questions that are nearly all
            linked right and may weigh the linking at almost nothing (a film called "What?" read in "what does X
            appear in" beside the person the question names)."""
            ok = fits[i][0]
            conf = float(np.prod([t.confidence for t in readings[i]]))
            top = float(np.max(np.where(ok, ps[i][:-1], 0.0)))
            return self.ckpt.probability(top, conf), top * conf

        if not fits[first][0].any():  # no reading fits a template
            return first, ps[first], fits[first][0], fits[first][1]
        best = first
        sure, best_joint = joint(first)
        if sure < self.threshold:
            rest = [i for i in range(len(readings)) if i != first and fits[i][0].any()]
            for i, p in zip(rest, self.scores_many([pair(i) for i in rest], detail)):
                ps[i] = p
                got = joint(i)[1]
                if got > best_joint:
                    best, best_joint = i, got
            if best != first and self.ckpt.composer is not None:
                best = self._composed_choice(text, readings, {k: (ps[k], fits[k][0]) for k in (best, first)},
                                             composed if composed is not None else {})
        return best, ps[best], fits[best][0], fits[best][1]

    def _composed_choice(self, text: str, readings: Sequence[list[LinkedTopic]],
                         scored: Mapping[int, tuple[Any, Any]], composed: dict[int, Any]) -> int:
        """Of the readings ``scored`` (index -> (template probabilities, which fit)), the one whose best composed
        path scores highest with the log of its linking confidence added (the composer's score being a log-odds).
        The classifier's probability of the templates that fit a topic falls to almost nothing where it reads a
        wording it never saw in the wrong direction ("which person directed the films acted by X" read as
        asking a film's director), and a common word the linker matched within a typo ("person" as the film
        *Persona*) then wins by it; the composer, which reads every path at each topic, does not depend on it.
        Where the composer cannot read one of them (a reading of several topics: "what has director X and actor
        Y"), the first of ``scored`` stays."""
        default, best, top = next(iter(scored)), -1, -math.inf
        for k, (p, ok) in scored.items():
            got = self.composition(text, readings[k], np.where(ok, p[:-1], 0.0))
            composed[k] = got
            if got is None or self.ckpt.composer is None:
                return default
            conf = float(np.prod([t.confidence for t in readings[k]]))
            score = float(self.ckpt.composer.scores(got[1]).max()) + math.log(max(conf, 1e-12))
            if score > top:
                best, top = k, score
        return best if best >= 0 else default

    def _fits(self, readings: Sequence[list[LinkedTopic]], profiles: Sequence[set[tuple[str, bool]]]
              ) -> list[tuple[np.ndarray, list[set[tuple[str, bool]]]]]:
        """Per reading, which templates fit its topics and their profiles (``profiles``: of all the readings'
        topics in turn)."""
        out, at = [], 0
        for r in readings:
            prof = list(profiles[at: at + len(r)])
            at += len(r)
            out.append((self._allowed(r, prof), prof))
        return out

    def _profiles(self, topics: Sequence[LinkedTopic]) -> list[set[tuple[str, bool]]]:
        """Per topic, ``(relation name, leaves it)`` of the relationships at its entities (one read)."""
        names = self.relation_names()
        eids = sorted({e for t in topics for e in t.eids})
        at = self._replica_profiles(eids, names)
        if at is None:
            rows = self.graph.read_named("learned_profile", eids=eids, types=sorted(names)) if eids else []
            at = {}
            for r in rows:
                at.setdefault(int(r["eid"]), set()).add((names.get(r["type"], r["type"]), bool(r["out"])))
        return [set().union(*(at.get(e, set()) for e in t.eids)) for t in topics]

    def _replica_profiles(self, eids: Sequence[int], names: Mapping[str, str]
                          ) -> dict[int, set[tuple[str, bool]]] | None:
        """What ``cypher/learned_profile.cypher`` reads, from the replica (None: no replica ready, or an entity it
        lacks)."""
        rep = self._replica()
        if rep is None:
            return None
        idx = rep.index(eids).tolist()
        if any(i < 0 for i in idx):
            return None
        at: dict[int, set[tuple[str, bool]]] = {}
        for eid, i in zip(eids, idx):
            types, _, out = rep.row(i, None)
            got = at.setdefault(int(eid), set())
            for t, o in zip(types.tolist(), out.tolist()):
                name = names.get(rep.types[t])
                if name is not None:
                    got.add((name, bool(o)))
        return at

    def scores(self, masked: str, names: Sequence[str] = ()) -> np.ndarray:
        """p(. | masked text) over all templates and, last, the *none* class (``names``, the topics' names, are
        embedded in the same call, for the retriever's cache)."""
        return self.scores_many([(masked, names)])[0]

    def scores_many(self, items: Sequence[tuple[str, Sequence[str]]], detail: dict[str, float] | None = None
                    ) -> list[np.ndarray]:
        """:meth:`scores` of several ``(masked text, names)``: every text they need (the masked texts, the names,
        their content words) embedded in one call, the model run once on the batch (``detail``: ms of ``embed``
        and ``model``)."""
        import torch

        if not items:
            return []
        t0 = time.perf_counter()
        aligner, m = self.aligner()
        grams = [content_ngrams(masked) for masked, _ in items]
        whole = self.ckpt.question_vector == "sentence"
        # e(q)'s texts: the masked question itself, or its words
        bags = [[masked] if whole else sentence_words(masked) for masked, _ in items]
        texts: list[str] = []
        for (_, names), g, w in zip(items, grams, bags):
            texts += [*names, *g, *w]
        dim = self.ckpt.emb_dim
        vecs = np.asarray(self.encode(texts), dtype=np.float32).reshape(len(texts), dim)
        t1 = time.perf_counter()
        rows, sims, at = [], [], 0
        for (_, names), g, w in zip(items, grams, bags):
            at += len(names)
            sims.append(aligner.sims_one(vecs[at: at + len(g)], g))
            rows.append(range(at + len(g), at + len(g) + len(w)))
            at += len(g) + len(w)
        sentence = vecs[[r[0] for r in rows]] if whole else mean_units(_unit(vecs), rows, dim)
        align, contrast, cover = alignment(sims, m)
        words = [ngram_ids(masked) for masked, _ in items]
        shapes = [shape_ids(masked) for masked, _ in items]
        model = self.ckpt.model
        if model.training:  # (a model being trained: its weights move)
            with torch.no_grad():
                logits = model(torch.as_tensor(sentence), *featurize(words),
                               *featurize(shapes), torch.as_tensor(align), torch.as_tensor(contrast),
                               torch.as_tensor(cover)).double().numpy()
        else:
            if self._forward is None or self._forward.model is not model:
                self._forward = ClassifierForward(model)
            logits = self._forward(sentence, words, shapes, align, contrast, cover)
        z = np.exp(logits - logits.max(-1, keepdims=True))
        out = list(z / z.sum(-1, keepdims=True))
        if detail is not None:
            detail["embed"] = detail.get("embed", 0.0) + ms(t1 - t0)
            detail["model"] = detail.get("model", 0.0) + ms(time.perf_counter() - t1)
        return out

    def _allowed(self, topics: Sequence[LinkedTopic], profiles: Sequence[set[tuple[str, bool]]],
                 answer: set[tuple[str, bool]] | None = None) -> np.ndarray:
        """Which templates can match: as many topics, and the relationships (type and direction) each topic slot
        (and, for a claim, the answer slot) needs are at its entity."""
        ok = self._by_topics == len(topics)
        for j in np.flatnonzero(ok).tolist():
            slots, at_answer = self._needs[j]
            if not all(need <= prof for need, prof in zip(slots, profiles)) \
                    or (answer is not None and not at_answer <= answer):
                ok[j] = False
        return ok

    def composition(self, text: str, linked: Sequence[LinkedTopic], q: np.ndarray
                    ) -> tuple[list[Template], np.ndarray, float] | None:
        """What the composer ranks for a one-topic question (:mod:`engine.learned.compose`): the templates of the
        relation paths at the topic, their features, and the classifier's mass on the templates that fit (``q``:
        its probabilities, 0 for those that do not), which the composer's probabilities are scaled to; None for a
        question of several topics, a topic with no path, or no mass."""
        got = self.path_inputs(text, linked, q)
        return None if got is None else (got[0], got[1].features(), got[2])

    def path_inputs(self, text: str, linked: Sequence[LinkedTopic], q: np.ndarray
                    ) -> tuple[list[Template], PathInputs, float] | None:
        """:meth:`composition` before the features are computed: the templates, what their features are computed
        from, and the mass."""
        mass = float(q.sum())
        if len(linked) != 1 or mass <= 0:
            return None
        topic = linked[0]
        aligner, col = self._path_aligner()
        paths = [p for p in self._topic_paths(topic.eids) if all(r in col for r, _ in p)]
        if not paths:
            return None
        masked = mask(text, [(topic.start, topic.end)])
        toks, orders = reading_positions(masked, FUNCTION_WORDS)
        kinds = kind_nouns(toks, FUNCTION_WORDS)
        verbs = predicate_verbs(toks, FUNCTION_WORDS, kinds)
        roles = [word_roles(toks, o, kinds, verbs) for o in orders]
        words = list(dict.fromkeys(w for r in roles for w in r.words))
        vecs = np.asarray(self.encode([masked, *words]), dtype=np.float32)
        sims = aligner.sims_one(vecs[1:], words) if words else np.zeros((0, len(col)), np.float32)
        row = {w: i for i, w in enumerate(words)}
        readings = [word_gains(sims[[row[w] for w in r.words]].reshape(len(r.words), len(col))) for r in roles]
        if self._known is None:
            self._known = {t: t for t in self.templates}
            self._index = {t: j for j, t in enumerate(self.templates)}
        tpls = [path_template(p, self._known) for p in paths]
        logp: list[float | None] = []
        for t in tpls:
            j = self._index.get(t)
            logp.append(math.log(max(float(q[j]) / mass, 1e-12)) if j is not None else None)
        return tpls, PathInputs(readings, roles, col, paths, logp, self._phrase_sims(vecs[0], paths)), mass

    def _phrase_sims(self, question: np.ndarray, paths: Sequence[Sequence[tuple[str, bool]]]) -> list[float]:
        """Per path, the best cosine of the masked question's embedding and the path's phrases (each phrase embedded
        once: they do not depend on the topic)."""
        want = [p for p in dict.fromkeys(tuple(p) for p in paths) if p not in self._phrases]
        if want:
            texts = [verbalize(p) for p in want]
            flat = [t for ts in texts for t in ts]
            vecs = _unit(np.asarray(self.embedder.encode(flat), dtype=np.float32))
            at = 0
            for p, ts in zip(want, texts):
                self._phrases[p] = vecs[at:at + len(ts)]
                at += len(ts)
        q = question / max(float(np.linalg.norm(question)), 1e-12)
        return [float((self._phrases[tuple(p)] @ q).max()) for p in paths]

    def _topic_paths(self, eids: Sequence[int]) -> list[tuple[tuple[str, bool], ...]]:
        """The relation paths at these entities (from the replica where one is ready, else from Neo4j)."""
        names = self.relation_names()
        rep = self._replica()
        if rep is not None:
            try:
                return topic_paths(replica_neighbours(rep, names), eids)
            except LookupError:  # an entity the replica lacks
                pass
        return topic_paths(graph_neighbours(self.graph, names), eids)

    def _path_aligner(self) -> tuple[RelationNames, dict[str, int]]:
        """Question words against every relation of the KG (the composer's paths may walk any) and its names."""
        if self._composer_aligner is None:
            rels = sorted(set(self.relation_names().values()))
            self._composer_aligner = (RelationNames(rels, self.encode, relation_words),
                                      {r: i for i, r in enumerate(rels)})
        return self._composer_aligner

    def propose(self, text: str, *, beam: int = DEFAULT_BEAM) -> Proposal:
        """The beam of patterns for a question (empty, with :attr:`Proposal.why`, when no template fits)."""
        check_text(text, self.max_chars)
        t0 = time.perf_counter()
        readings = self.readings(text)
        linked = readings[0] if readings else []
        t1 = time.perf_counter()
        warnings: list[str] = []
        out: list[tuple[Pattern, float]] = []
        used: list[Template] = []
        raw: list[float] = []
        why, none_p, conf = None, 0.0, 0.0
        detail: dict[str, float] = {}
        if not linked:
            why = "no entity of the KG is named in the question"
        else:
            # the topics chosen jointly with the templates that fit them
            composed: dict[int, Any] = {}
            i, p, ok, profiles = self._joint(text, readings, detail, composed)
            linked = readings[i]
            if not ok.any() and len(linked) > 1:
                # fewer topics: the most confident one alone
                best = max(range(len(linked)), key=lambda i: linked[i].confidence)
                linked, profiles = [linked[best]], [profiles[best]]
                p = self.scores(mask(text, [(linked[0].start, linked[0].end)]))
                ok = self._allowed(linked, profiles)
            none_p = float(p[-1])
            if not ok.any():
                why = ("no learned pattern fits the relations of " + ", ".join(repr(t.name) for t in linked)
                       + " in the KG")
            else:
                q = np.where(ok, p[:-1], 0.0)  # the mass on templates that do not fit is not handed on
                conf = float(np.prod([t.confidence for t in linked]))
                composer = self.ckpt.composer
                got = composed[i] if i in composed and len(linked) == len(readings[i]) else (
                    self.composition(text, linked, q) if composer is not None else None)
                if composer is not None and got is not None:
                    tpls, feats, mass = got
                    probs = composer.probabilities(feats) * mass
                    ranked = [(tpls[j], float(probs[j])) for j in np.argsort(-probs, kind="stable")[:beam]]
                else:
                    ranked = [(self.templates[j], float(q[j])) for j in np.argsort(-q, kind="stable")[:beam]]
                for tpl, tp in ranked:
                    if tp <= 0:
                        break
                    out.append((tpl.fill([t.name for t in linked]), self.ckpt.probability(tp, conf)))
                    used.append(tpl)
                    raw.append(tp)
        if why:
            warnings.append(why)
        t2 = time.perf_counter()
        timings = {"link": ms(t1 - t0), "generate": ms(t2 - t1), **{f"generate_{k}": v for k, v in detail.items()}}
        return Proposal(text, linked, out, used, timings, warnings, why, none_p, raw, conf)

    def propose_claim(self, text: str) -> Proposal:
        """A claim's pattern: each linked entity in turn is the template's answer (its name in the answer slot),
        the others its topics; the most probable reading wins. The pattern is fully known, as a claim's is."""
        check_text(text, self.max_chars, "claim")
        t0 = time.perf_counter()
        cands = self.candidates(text)
        linked = self.ckpt.link.choose(cands, text, self.ckpt.link.max_topics + 1, min_topics=2)
        unknown = unknown_names(text, cands)
        t1 = time.perf_counter()
        best: tuple[float, Pattern, Template] | None = None
        why, none_p = None, 0.0
        if unknown:  # the claim names something the KG does not have: no pattern of the KG can say it
            why = "the claim names " + ", ".join(repr(u) for u in unknown) + ", which no entity of the KG is called"
        elif len(linked) < 2:
            why = ("a claim needs two entities of the KG; found "
                   + (", ".join(repr(t.mention) for t in linked) or "none"))
        else:
            profiles = self._profiles(linked)
            p = self.scores(mask(text, [(t.start, t.end) for t in linked]))
            none_p = float(p[-1])
            conf = float(np.prod([t.confidence for t in linked]))
            for a in range(len(linked)):
                topics = [t for i, t in enumerate(linked) if i != a]
                ok = self._allowed(topics, [pr for i, pr in enumerate(profiles) if i != a], profiles[a])
                if not ok.any():
                    continue
                j = int(np.argmax(np.where(ok, p[:-1], -1.0)))
                score = self.ckpt.probability(float(p[j]), conf)
                if best is None or score > best[0]:
                    tpl = self.templates[j]
                    pat = tpl.fill([t.name for t in topics])
                    ans, name = pat.answer_node(), linked[a].name
                    pat = Pattern.from_triples([(name if h == ans else h, r, name if tl == ans else tl)
                                                for h, r, tl in pat.triples])
                    best = (score, pat, tpl)
            if best is None:
                why = "no learned pattern joins the claim's entities"
        t2 = time.perf_counter()
        beam = [(best[1], best[0])] if best else []
        return Proposal(text, linked, beam, [best[2]] if best else [],
                        {"link": ms(t1 - t0), "generate": ms(t2 - t1)}, [why] if why else [], why, none_p)


def known_first(encode: Callable[[Sequence[str]], Any], vocab: Sequence[str], vectors: np.ndarray | None
                ) -> Callable[[Sequence[str]], Any]:
    """``encode`` that takes the vectors of the texts in ``vocab`` (rows of ``vectors``) as they are, and embeds
    only the others (``encode`` itself when there is no vocabulary)."""
    if not vocab or vectors is None:
        return encode
    at = {w: i for i, w in enumerate(vocab)}

    def run(texts: Sequence[str]) -> np.ndarray:
        miss = [t for t in dict.fromkeys(texts) if t not in at]
        got = dict(zip(miss, np.asarray(encode(miss), dtype=np.float32))) if miss else {}
        return np.stack([vectors[at[t]] if t in at else got[t] for t in texts]) if texts \
            else np.zeros((0, vectors.shape[1]), np.float32)

    return run


def question_texts(masked: Sequence[str], cap: int = VOCAB_MAX) -> list[str]:
    """The texts a question is scored from (:func:`sentence_words`, :func:`content_ngrams`) over these masked
    questions, the most frequent first, at most ``cap``: the vocabulary a generator file keeps the vectors of."""
    from collections import Counter

    counts = Counter(t for m in masked for t in dict.fromkeys([*sentence_words(m), *content_ngrams(m)]))
    return [t for t, _ in counts.most_common(cap)]


def cached_encode(encode: Callable[..., Any], size: int = 20_000) -> Callable[[Sequence[str]], Any]:
    """``encode`` with a bounded cache of texts (question words repeat across questions)."""
    cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def run(texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in cache]
        if missing:
            for t, v in zip(missing, np.asarray(encode(missing), dtype=np.float32)):
                cache[t] = v
                if len(cache) > size:
                    cache.popitem(last=False)
        rows = []
        for t in texts:
            v = cache.get(t)
            rows.append(v if v is not None else np.asarray(encode([t]), dtype=np.float32)[0])
        return np.stack(rows)

    return run



def template_index(templates: Sequence[Template]) -> Mapping[Template, int]:
    return {t: i for i, t in enumerate(templates)}


__all__ += ["MASK", "template_index"]
