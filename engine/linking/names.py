"""Names as people write them: the forms in which a written name and an entity's name or alias are compared, the
spelling distance between them, and the node distance that enters the GSD.

Three forms, each coarser than the last:

* :func:`normalize_name`: NFKC, case-folded, white space collapsed. Two texts equal in this form name the same
  thing (``unmatched`` and "exact" linking use it).
* :func:`fold_name`: also without diacritics and punctuation (``"Amélie"`` and ``"amelie"``, ``"Hello, Dolly!"``
  and ``"hello dolly"`` fold alike). The embedder (MiniLM, uncased) does not see these differences either.
* :func:`strip_article`: a folded name without its leading English article (``"the matrix"`` -> ``"matrix"``).

The **spelling distance** of a written text ``v`` to a name ``n`` is the optimal-string-alignment edit distance of
their folded forms (a letter dropped, doubled, replaced or two letters swapped: one edit each) divided by the
longer one's length, or, when smaller, the same on their article-stripped forms plus :data:`ARTICLE_COST`; its
value is in ``[0, 1]``, 0 for names that fold alike. Against an entity it is the smallest over its name and
aliases (:func:`spelling_distances`).

The **node distance** that enters the GSD (:func:`node_distance`) is the smaller of the embedding distance
``||z_v - z_e||`` and :data:`SPELLING_SCALE` times the spelling distance: a name spelled as the KG spells it costs
0 whatever the vectors say, a typo costs about its share of the name, and a name written otherwise (a synonym, a
paraphrase) costs what its meaning is away. The retriever's candidate stage computes it for every candidate
(:mod:`engine.linking.search`), so the matcher and its oracle, which read the candidates' distances, use the same
one.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ARTICLES", "ARTICLE_COST", "HOW", "NameMatch", "SPELLING_SCALE", "fold_name", "fulltext_query",
           "how_matched", "node_distance", "normalize_name", "query_words", "same_name", "spelling_distance",
           "spelling_distances", "strip_article"]

#: one unit of spelling distance (an edit per character of the name) costs this much GSD. Measured with MiniLM on
#: 400 MetaQA names and a one-letter typo of each: the typo's embedding is 0.79 from its name (p50; p10 0.31, p90
#: 1.06), its spelling distance 0.07 (p90 0.11), so the spelling term wins for 94% of them; two unrelated names
#: are 1.26 apart by embedding (p50) and 0.85 by spelling: scaled by 2, spelling is never the smaller of the two
#: for them (by 1 it always was), so it changes the distance of near spellings only
SPELLING_SCALE = 2.0
#: what a leading article written or dropped costs ("Matrix" for "The Matrix"): nothing but a tie-break, so that
#: where the KG holds both "Matrix" and "The Matrix" the one written as the text still comes first. People drop
#: articles as a matter of course; at 0.02 (0.04 of GSD) a dropped article lost a MetaQA question whose right
#: match won by 0.003 with the name written whole
ARTICLE_COST = 0.001
#: leading words dropped by :func:`strip_article`
ARTICLES = ("the", "a", "an")
#: how a name matched, from the closest to the loosest: the text itself, equal once normalized or folded, by
#: spelling (edits), by meaning (embedding)
HOW = ("exact", "normalized", "spelling", "meaning")

_NON_WORD = re.compile(r"[\W_]+")
#: a word as the full-text index's analyzer keeps it: letters and digits, an apostrophe inside ("o'brien" is one word)
_INDEX_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
#: Lucene's English stop words: the full-text index's analyzer drops them (a query of only these finds nothing)
LUCENE_STOPWORDS = frozenset("a an and are as at be but by for if in into is it no not of on or such that the "
                             "their then there these they this to was will with".split())
#: a full-text query holds at most this many words of a text (a longer text is looked up by its first ones)
MAX_QUERY_TERMS = 12


def normalize_name(text: str) -> str:
    """The form in which a pattern text and an entity name are compared: NFKC, case-folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


@functools.lru_cache(maxsize=1 << 16)
def fold_name(text: str) -> str:
    """``text`` case-folded, without diacritics (NFKD, combining marks dropped) and with punctuation as spaces
    (cached: a question's spans and the names they meet recur across questions)."""
    t = unicodedata.normalize("NFKD", text)
    t = "".join(c for c in t if not unicodedata.combining(c)).casefold()
    return " ".join(_NON_WORD.sub(" ", t).split())


def strip_article(folded: str) -> str:
    """A folded name without its leading article (``"the matrix"`` -> ``"matrix"``; a name that is only an article
    stays as it is)."""
    head, _, rest = folded.partition(" ")
    return rest if head in ARTICLES and rest else folded


def same_name(text: str, name: str) -> bool:
    """Whether ``text`` writes ``name`` but for case, width, diacritics, punctuation or a leading article: no letter
    of it differs (``"street mobster"``, ``"Amelie"``, ``"Matrix"`` for ``"Street Mobster"``, ``"Amélie"``,
    ``"The Matrix"``)."""
    a, b = fold_name(text), fold_name(name)
    return a == b or strip_article(a) == strip_article(b)


def _osa(a: str, b: str) -> float:
    from rapidfuzz.distance import OSA

    return float(OSA.normalized_distance(a, b))


def spelling_distance(text: str, name: str) -> float:
    """The spelling distance of ``text`` to ``name`` (module docstring), in ``[0, 1]``."""
    a, b = fold_name(text), fold_name(name)
    if a == b:
        return 0.0
    d = _osa(a, b)
    sa, sb = strip_article(a), strip_article(b)
    if (sa, sb) != (a, b):
        d = min(d, _osa(sa, sb) + ARTICLE_COST)
    return min(d, 1.0)


def spelling_distances(texts: Sequence[str], names: Sequence[str]) -> Any:
    """The ``[len(texts), len(names)]`` matrix of :func:`spelling_distance` (one vectorized pass: rapidfuzz)."""
    import numpy as np
    from rapidfuzz.distance import OSA
    from rapidfuzz.process import cdist

    if not texts or not names:
        return np.zeros((len(texts), len(names)), dtype=np.float64)
    a = [fold_name(t) for t in texts]
    b = [fold_name(n) for n in names]
    d = cdist(a, b, scorer=OSA.normalized_distance, dtype=np.float64)
    sa, sb = [strip_article(x) for x in a], [strip_article(x) for x in b]
    if sa != a or sb != b:
        d = np.minimum(d, cdist(sa, sb, scorer=OSA.normalized_distance, dtype=np.float64) + ARTICLE_COST)
    return np.minimum(d, 1.0)


def node_distance(embedding: float | None, spelling: float | None) -> float:
    """The distance of a named pattern node to a candidate entity: the smaller of the embedding distance and
    :data:`SPELLING_SCALE` times the spelling distance (either may be unknown: ``None``)."""
    parts = [x for x in (embedding, None if spelling is None else SPELLING_SCALE * spelling) if x is not None]
    if not parts:
        raise ValueError("a node distance needs an embedding or a spelling distance")
    return float(min(parts))


def how_matched(text: str, matched: str, spelling: float, embedding: float | None) -> str:
    """One of :data:`HOW`: how ``text`` reached the name or alias ``matched`` at these distances."""
    if embedding is not None and embedding < SPELLING_SCALE * spelling:
        return "meaning"
    if text == matched:
        return "exact"
    if spelling == 0.0:
        return "normalized"
    return "spelling"


@dataclass(frozen=True)
class NameMatch:
    """How a written name reached an entity: its display ``name``, the name or alias that ``matched`` (``alias``:
    it is one of the entity's aliases), ``how`` (:data:`HOW`), the node ``distance`` (:func:`node_distance`) and
    its two parts (``None``: not measured; the spelling of an entity the spelling search did not find)."""

    eid: int
    name: str
    matched: str
    alias: bool
    how: str
    distance: float
    spelling: float | None
    embedding: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"eid": self.eid, "name": self.name, "matched": self.matched, "alias": self.alias, "how": self.how,
                "distance": round(self.distance, 4),
                "spelling": None if self.spelling is None else round(self.spelling, 4),
                "embedding": None if self.embedding is None else round(self.embedding, 4)}


def _fuzzy(term: str) -> str:
    if term.isdigit() or len(term) <= 2:
        return term
    return f"{term}~1"


def query_words(text: str) -> list[str]:
    """The words of ``text`` that the full-text index keeps, as it keeps them: case-folded, without diacritics,
    split at punctuation except an apostrophe inside a word ("O'Brien" -> ``o'brien``: the index holds it so, and
    its parts ``o`` and ``brien`` find nothing of it), without stop words."""
    t = unicodedata.normalize("NFKD", text)
    t = "".join(c for c in t if not unicodedata.combining(c)).casefold().replace("\u2019", "'")
    return [w for w in _INDEX_WORD.findall(t) if w not in LUCENE_STOPWORDS]


def fulltext_query(text: str, kg: str) -> str | None:
    """The Lucene query that finds the names and aliases spelled like ``text`` in KG ``kg`` (each word of it with
    one fuzzy edit, none up to 2 letters or for a number: two edits per word cost the index 3-5 times as much), or
    None when ``text`` has no word the index keeps (:func:`query_words`). Each word is asked with its edits only:
    asked as written too, the question's common words ("what", "film") found exactly outrank a misspelled name's
    near spellings (MetaQA: "Somre" no longer found "Sombre" among a question's first 64 hits). The KG's
    entities are asked for by the ``isorag_kg`` field (the caller filters by the exact KG name too: the analyzer
    lower-cases it)."""
    words = query_words(text)[:MAX_QUERY_TERMS]
    if not words:
        return None
    terms = " ".join(_fuzzy(w) for w in words)
    names = f"isorag_name:({terms}) isorag_aliases:({terms})"
    kg_term = kg.lower()
    if kg_term in LUCENE_STOPWORDS:
        return names
    return f'+isorag_kg:"{kg_term}" +({names})'
