"""The entities a question or a claim names in plain text (no brackets, no marks), with a confidence: the engine's
one entity linker (the learned generator, claims and the triple scorer use it).

Candidates are the text's spans of 1 to :data:`MAX_SPAN` words (at most :data:`MAX_SPANS` of them), found in one
read (:func:`engine.linking.search.lookup_names`): spans that are names exactly, and the names and aliases the
full-text index finds for the text's words with fuzzy edits; each span keeps the entities it is nearest to by
spelling distance (:mod:`engine.linking.names`: equal once case, diacritics, punctuation and a leading article are
folded, or within :data:`SPELLING_LINK_MAX` for a span of at least :data:`SPELLING_LINK_MIN_CHARS` letters). Numbers
and dates are spans like any other: a year that is an entity ("1975") is one. Only when no span matches by
spelling do the spans go through one embedding call and one vector search (candidates by meaning, within
:data:`FUZZY_DISTANCE`).

Each candidate is described by a few features (length, capitalization, nesting in other candidates, how many
entities bear the name, and how often the span occurs in the training questions *outside* their topic: "movies",
"what", "star" are the questions' own words). A logistic acceptance over them, fitted on the training questions
(their bracketed or recorded topics are the gold) and discounted by the candidate's distance, gives each candidate
a probability; the best is the topic, and more spans that do not overlap it are topics too while their probability
is over one half (conjunctions). :meth:`LinkModel.readings` lists the other choices a caller tries when the best
one fits nothing (the generator: the topic is chosen jointly with the templates that fit it).

Input is bounded: at most :data:`MAX_SPANS` spans are looked up, the features are computed in ``O(n log n)`` of the
candidates, and vector searches are split below Milvus' limit by the store.
"""

from __future__ import annotations

import math
import re
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.linking.names import (LUCENE_STOPWORDS, MAX_QUERY_TERMS, SPELLING_SCALE, fold_name, normalize_name,
                                  query_words, spelling_distances)
from engine.linking.search import EntityNames, lookup_names

if TYPE_CHECKING:  # pragma: no cover
    from engine.linking.local import LocalNames
    from engine._protocols import GraphReader, TextEmbedder, VectorIndex

__all__ = ["Candidate", "LinkModel", "LinkedTopic", "MASK", "MAX_SPAN", "MAX_SPANS", "candidates",
           "exact_candidates", "link_candidates", "local_candidates", "needs_fulltext", "unknown_names", "unknown_runs",
           "fit_link_model", "mask", "spans", "unbracket", "word_ngrams"]

#: longest span (in words) looked up as a name
MAX_SPAN = 10
#: most spans of one text looked up (the first ones in the text's order; a longer text is linked by its start)
MAX_SPANS = 2_000
#: a candidate by meaning is at most this far from its span (Euclidean, normalized embeddings)
FUZZY_DISTANCE = 0.45
#: candidates by meaning are looked for among spans of at most this many words
FUZZY_SPAN = 5
#: and among at most this many spans (one embedding call, one vector search)
MEANING_SPANS = 256
#: a span links by spelling to a name or alias within this spelling distance (one edit in four letters) ...
SPELLING_LINK_MAX = 0.25
#: ... when it has at least this many letters (folded); shorter spans link only when they fold alike
SPELLING_LINK_MIN_CHARS = 4
#: a span of at least this many letters may be two edits from a name; a shorter one, one
LONG_SPAN_CHARS = 12
#: a span that is a capitalized run of the text no name covers (:func:`unknown_runs`: written as a name is, so not
#: one of the question's words) links by spelling from this many letters ("Pul" for "Paul", "Fll" for "Fall") ...
RUN_LINK_MIN_CHARS = 3
#: capitalized runs with at most this many stop words between them are one name ("Me and Yu")
RUN_GAP = 2

_DIGITS = re.compile(r"\d+")
#: entities the full-text index returns per query of a text's words
LINK_FULLTEXT_LIMIT = 64
FEATURES = ("bias", "words", "chars", "capital", "template", "nested", "nests", "homonyms", "first")

_WORD = re.compile(r"[\w][\w'’.&:-]*")
_TRAIL = ".:'’-"
#: punctuation that may end a name after its last word (titles such as "Hot Shots!")
_CLOSING = "!?)"
_BRACKET = re.compile(r"\[([^\[\]]+)\]")
#: what a topic mention becomes in the text the generator reads
MASK = "X"


def spans(text: str, max_words: int = MAX_SPAN, max_spans: int = MAX_SPANS) -> list[tuple[int, int, str]]:
    """``(start, end, text)`` of every span of 1 to ``max_words`` words, as written (inner punctuation kept), also
    with its trailing ``.:'-`` dropped and with the ``!?)`` that follow it, longest first; at most ``max_spans``
    (those starting in the first words of a long text)."""
    words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    # a word starts at most 3 * max_words spans: a longer text is linked by its first words that fit the cap
    words = words[: max(1, max_spans // (3 * max(1, max_words)))]
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
    return [(a, b, s) for (a, b), s in out.items()][:max_spans]


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
    """A span of the text that names entities of the KG (``eids``; ``name``: the display name of the first), how
    (``matched``: the name or alias it is nearest to; ``how``: :data:`engine.linking.names.HOW`) and at what node
    ``distance`` (0 for a name written as the KG writes it, up to case, diacritics and punctuation)."""

    start: int
    end: int
    mention: str
    name: str
    eids: tuple[int, ...]
    distance: float
    matched: str = ""
    how: str = "exact"
    alias: bool = False

    def overlaps(self, other: Candidate) -> bool:
        return self.start < other.end and other.start < self.end


@dataclass(frozen=True)
class LinkedTopic:
    """An entity linked from the text: the span, the KG name and entities, the acceptance probability, and the
    name or alias the span matched and how."""

    mention: str
    name: str
    eids: tuple[int, ...]
    confidence: float
    start: int
    end: int
    matched: str = ""
    how: str = "exact"
    alias: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"mention": self.mention, "name": self.name, "eids": list(self.eids),
                "confidence": round(self.confidence, 4), "span": [self.start, self.end],
                "matched": self.matched or self.name, "how": self.how, "alias": self.alias}


def _chunks(text: str) -> list[str]:
    """The text's words the full-text index keeps, in queries of at most MAX_QUERY_TERMS words."""
    words = query_words(text)
    return [" ".join(words[i:i + MAX_QUERY_TERMS]) for i in range(0, len(words), MAX_QUERY_TERMS)]


def _span_candidates(sp: Sequence[tuple[int, int, str]], exact: Mapping[str, Sequence[int]], found: Sequence[int],
                     names: Mapping[int, EntityNames],
                     runs: Sequence[tuple[int, int]] = ()) -> list[Candidate]:
    """One candidate per span: the entities nearest to it by spelling, when near enough (module docstring).
    ``runs``: the text's capitalized runs that no name covered (:func:`unknown_runs`); a span inside one is written
    as a name is, so it may be as short as :data:`RUN_LINK_MIN_CHARS` letters, and a capitalized stop word at its
    edge is the name's own ("To Tully" for "Tom Tully", "Pul" for "Paul")."""
    ents = [names[e] for e in dict.fromkeys(found) if e in names]
    flat = [(j, a > 0, t) for j, e in enumerate(ents) for a, t in enumerate(e.texts())]
    texts = [s for _, _, s in sp]
    # (rows as Python lists: a question's ~50 spans read them element by element)
    d: list[list[float]] = spelling_distances(texts, [t for _, _, t in flat]).tolist() if flat and texts \
        else [[] for _ in texts]
    folded = [fold_name(s) for s in texts]
    out: list[Candidate] = []
    for i, (a, b, s) in enumerate(sp):
        hit = [e for e in exact.get(s, ()) if e in names]
        if hit:  # the span is a name, as written; with it, the names it equals but for case and accents
            alike = [k for k in range(len(flat)) if d[i][k] == 0.0 and not flat[k][1]
                     and fold_name(flat[k][2]) == folded[i]] if flat else []
            same = {ents[flat[k][0]].eid for k in alike}
            # a span in lower case written as a lower-case name ("john ritter", a tag) matched the capitalized
            # one too ("John Ritter", the actor): said so, since its capitals are what a name's are
            upper = next((flat[k][2] for k in alike if flat[k][2][:1].isupper()), None) if s.islower() else None
            out.append(Candidate(a, b, s, s, tuple(sorted(set(hit) | same)), 0.0, upper or s, "exact"))
            continue
        if not flat or not folded[i]:
            continue
        row = d[i]
        best = min(row)
        in_run = any(ra <= a and b <= rb for ra, rb in runs)
        least = RUN_LINK_MIN_CHARS if in_run else SPELLING_LINK_MIN_CHARS
        if best > 0 and (best > SPELLING_LINK_MAX or len(folded[i].replace(" ", "")) < least):
            continue
        at = [k for k in range(len(flat)) if row[k] <= best + 1e-9]
        if best > 0 and not _near_enough(folded[i], best, [fold_name(flat[k][2]) for k in at],
                                         s if in_run else None):
            continue
        eids = tuple(sorted({ents[flat[k][0]].eid for k in at}))
        # the display name of an entity matched by its name (not an alias) first, then by its alias
        # (then one written with a capital where the span is: "Mther" is the film "Mother", not the tag "mother")
        k0 = min(at, key=lambda k: (flat[k][1], flat[k][2] != s, flat[k][2][:1].isupper() != s[:1].isupper(),
                                    ents[flat[k][0]].eid))
        ent = ents[flat[k0][0]]
        how = "normalized" if best == 0.0 else "spelling"
        out.append(Candidate(a, b, s, ent.name or ent.key, eids, SPELLING_SCALE * best, flat[k0][2], how,
                             flat[k0][1]))
    return out


def _near_enough(span: str, distance: float, names: Sequence[str], written: str | None = None) -> bool:
    """Whether a span at this spelling distance (> 0) from these names is a near spelling of them: one typo (two
    in a span of :data:`LONG_SPAN_CHARS` letters or more), the same numbers ("movie 7" is not "Movie 43"), and no
    stop word at its edge that the name lacks ("is vincente minnelli", "a comedy"); ``written``: the span as the
    text writes it, when it is a capitalized run no name covered (a capitalized stop word at its edge is then the
    name's: :func:`_same_edges`)."""
    edits = round(distance * max([len(span), *(len(n) for n in names)]))
    if edits > (2 if len(span) >= LONG_SPAN_CHARS else 1):
        return False
    digits = _DIGITS.findall(span)
    if not any(_DIGITS.findall(n) == digits for n in names):
        return False
    return _same_edges(span, names, written)


def _same_edges(span: str, names: Sequence[str], written: str | None = None) -> bool:
    """Whether a span whose first or last word is a stop word ("the", "is", "of"...) has that word where a name it
    matched has it: a span is not a near spelling of a name by a word around it. Given ``written`` (the span as
    written, a capitalized run of the text that no name covered), an edge stop word written with a capital is the
    name's ("To Tully" for "Tom Tully": "To" is the misspelled "Tom", not the question's "to")."""
    words = span.split()
    if written is not None and words:
        caps = [w[:1].isupper() for w in _WORD.findall(written)]
        if caps and len(caps) == len(words) and caps[0] and caps[-1]:
            return True
    if not words or (words[0] not in LUCENE_STOPWORDS and words[-1] not in LUCENE_STOPWORDS):
        return True
    for n in names:
        nw = n.split()
        if nw and (words[0] not in LUCENE_STOPWORDS or nw[0] == words[0]) \
                and (words[-1] not in LUCENE_STOPWORDS or nw[-1] == words[-1]):
            return True
    return False


def link_candidates(texts: Sequence[str], graph: GraphReader, *, batch: int = 256,
                    local: LocalNames | None = None,
                    known_words: Container[str] | None = None) -> list[list[Candidate]]:
    """For each text, its spans that name KG entities by spelling: written as a name is, the same once folded, or
    near a name or alias (module docstring). One read per ``batch`` texts.

    ``local``: the KG's names in process (:mod:`engine.linking.local`, from a fresh graph read replica): each text's
    spans are first looked up there, exactly and folded, and only a text that this leaves with a name unknown
    (:func:`needs_fulltext`; ``known_words``: the words a text is made of besides its names) is read from Neo4j as
    above (its full-text index finds aliases and near spellings)."""
    if local is not None:
        found_here = [local_candidates(t, local) for t in texts]
        redo = [i for i, (t, c) in enumerate(zip(texts, found_here)) if needs_fulltext(t, c, known_words)]
        if redo:
            for i, again in zip(redo, link_candidates([texts[i] for i in redo], graph, batch=batch)):
                found_here[i] = again
        return found_here
    out: list[list[Candidate]] = []
    for i in range(0, len(texts), batch):
        part = texts[i:i + batch]
        per_text = [spans(t) for t in part]
        wanted = list(dict.fromkeys(s for sp in per_text for _, _, s in sp))
        queries: list[str] = []
        owner: list[int] = []
        for j, t in enumerate(part):
            # the words the spans cover (a long text is linked by its start, as its spans are)
            for q in _chunks(t[: max((b for _, b, _ in per_text[j]), default=0)]):
                queries.append(q)
                owner.append(j)
        by_query, by_name, names = lookup_names(graph, queries, wanted, limit=LINK_FULLTEXT_LIMIT)
        exact = {s: hits for s, hits in zip(wanted, by_name) if hits}
        found: list[list[int]] = [[] for _ in part]
        for j, hits in zip(owner, by_query):
            found[j].extend(hits)
        here = [_span_candidates(sp, exact, found[j] + [e for _, _, s in sp for e in exact.get(s, ())], names)
                for j, sp in enumerate(per_text)]
        _runs_again(part, per_text, here, graph, exact, found, names)
        out.extend(here)
    return out


def _runs_again(texts: Sequence[str], per_text: Sequence[Sequence[tuple[int, int, str]]],
                cands: list[list[Candidate]], graph: GraphReader, exact: Mapping[str, Sequence[int]],
                found: Sequence[Sequence[int]], names: dict[int, EntityNames]) -> None:
    """The texts whose capitalized runs no candidate covers (:func:`unknown_runs`) looked up again, each run
    alone in the full-text index: a text's query of all its words ranks the question's own words' near spellings
    ("have" ~ "Cave", "share" ~ "Shame") above a misspelled name's ("Mther" ~ "Mother"), which then falls out of
    the first hits. Their candidates, in place, are made anew with the runs' entities and the runs' rules
    (:func:`_span_candidates`). One more read, for these texts only: a text that names its entities as the KG
    writes them has no such run."""
    todo = [(j, unknown_runs(t, cands[j])) for j, t in enumerate(texts)]
    todo = [(j, runs) for j, runs in todo if runs]
    if not todo:
        return
    queries = [texts[j][a:b] for j, runs in todo for a, b in runs]
    owner = [j for j, runs in todo for _ in runs]
    by_query, _, more = lookup_names(graph, queries, [], limit=LINK_FULLTEXT_LIMIT)
    names.update((e, n) for e, n in more.items() if e not in names)
    extra: dict[int, list[int]] = {}
    for j, hits in zip(owner, by_query):
        extra.setdefault(j, []).extend(hits)
    for j, runs in todo:
        sp = per_text[j]
        mine = list(found[j]) + [e for _, _, s in sp for e in exact.get(s, ())] + extra.get(j, [])
        cands[j] = _span_candidates(sp, exact, mine, names, runs)


def _run_groups(text: str, cands: Sequence[Candidate]) -> list[tuple[int, int, bool, bool]]:
    """The runs of capitalized words in ``text`` (a sentence's first word alone aside), those with at most
    :data:`RUN_GAP` stop words between them taken as one ("Me and Yu", "Evil of Frankenstein"): ``(start, end,
    whether a run of it lies in no one candidate whole, whether the group does)``."""
    runs = []
    for m in _CAPITAL_RUN.finditer(text):
        a, b = m.start(), m.end()
        while b > a and text[b - 1] in _TRAIL:
            b -= 1
        if b <= a or (a == 0 and " " not in text[a:b]):
            continue
        runs.append((a, b, not any(c.start <= a and b <= c.end for c in cands)))
    out: list[tuple[int, int, bool, bool]] = []
    group: list[tuple[int, int, bool]] = []
    for k, r in enumerate(runs + [(len(text), len(text), False)]):
        between = text[group[-1][1]:r[0]].split() if group else []
        if group and (k == len(runs) or len(between) > RUN_GAP
                      or any(w.lower() not in LUCENE_STOPWORDS for w in between)):
            ga, gb = group[0][0], group[-1][1]
            out.append((ga, gb, any(u for _, _, u in group), not any(c.start <= ga and gb <= c.end for c in cands)))
            group = []
        group.append(r)
    return out


def unknown_runs(text: str, cands: Sequence[Candidate]) -> list[tuple[int, int]]:
    """The ``(start, end)`` of the runs of capitalized words in ``text`` (a sentence's first word alone aside) that
    lie in no one candidate whole: where a name is written that no candidate found. Runs with at most
    :data:`RUN_GAP` stop words between them are one ("Me and Yu"), returned when one of them is unknown."""
    return [(a, b) for a, b, unknown, _ in _run_groups(text, cands) if unknown]


def local_candidates(text: str, local: LocalNames) -> list[Candidate]:
    """The candidates of ``text`` by its spans' exact and folded names, read in process."""
    sp = spans(text)
    wanted = list(dict.fromkeys(s for _, _, s in sp))
    by_text, by_name, names = local.lookup(wanted)
    exact = {s: hits for s, hits in zip(wanted, by_name) if hits}
    found = [e for hits in by_text for e in hits]
    return _span_candidates(sp, exact, found, names)


def needs_fulltext(text: str, cands: Sequence[Candidate], known_words: Container[str] | None = None) -> bool:
    """Whether the candidates found in process (exact and folded names) may leave a name of ``text`` unknown, so
    that the full-text index must be asked: none was found, the text has no capital letter (its capitals cannot
    say where its names are), a run of capitalized words or a number (:func:`unknown_names`) lies in no one
    candidate whole ("Tom Hnaks" beside a film called "Tom"), or, given ``known_words`` (the lower-cased words the
    texts are made of besides their names: the generator's training questions), a word that is neither known nor
    inside a candidate: a typo often takes a name's capital away ("Kim yers", "Crazy eHart", "Farewell to hte
    King", each beside a name that covers its other words)."""
    if not cands or not any(ch.isupper() for ch in text):
        return True
    # capitalized runs joined by stop words that no one candidate covers ("Evil of Frankenstein" beside the films
    # "Evil" and "Frankenstein": the film "The Evil of Frankenstein" is found by the index, not in process)
    if any(a < b and whole and " " in text[a:b] and any(w.lower() in LUCENE_STOPWORDS for w in text[a:b].split())
           for a, b, _, whole in _run_groups(text, cands)):
        return True
    for m in _NAME_RUN.finditer(text):
        a, b = m.start(), m.end()
        while b > a and text[b - 1] in _TRAIL:
            b -= 1
        if a == 0 and " " not in m.group(0).strip():  # a sentence's first word
            continue
        if not any(c.start <= a and b <= c.end for c in cands):
            return True
    if known_words is not None:
        # (a candidate written in lower case in a text with capitals does not cover a word: "Sword of the east"
        # for "Sword of the Beast" has "the east", the film "The East", around the misspelled word)
        named = [c for c in cands if c.mention[:1].isupper() or not c.mention[:1].isalpha()]
        for m in _WORD.finditer(text):
            word = m.group(0).lower().rstrip(_TRAIL)
            if word and word not in known_words \
                    and not any(c.start <= m.start() and m.end() <= c.end for c in named):
                return True
    return False


def exact_candidates(texts: Sequence[str], graph: GraphReader, *, batch: int = 256) -> list[list[Candidate]]:
    """The candidates the linking acceptance is trained on: :func:`link_candidates` (the same as at inference)."""
    return link_candidates(texts, graph, batch=batch)


def candidates(text: str, graph: GraphReader, *, vectors: VectorIndex | None = None,
               embedder: TextEmbedder | None = None, stopwords: Iterable[str] = (),
               local: LocalNames | None = None, known_words: Container[str] | None = None) -> list[Candidate]:
    """The spans of ``text`` that name KG entities: by spelling (one read, :func:`link_candidates`; none where
    ``local`` finds every name in process, ``known_words`` the text's other words); without any, by meaning (one
    embedding call, one vector search) when ``vectors`` and ``embedder`` are given."""
    out = link_candidates([text], graph, local=local, known_words=known_words)[0]
    if out or vectors is None or embedder is None:
        return out
    stop = {w.lower() for w in stopwords}
    fuzzy = [(a, b, s) for a, b, s in spans(text) if len(s.split()) <= FUZZY_SPAN and len(s) >= 3
             and not all(w.lower() in stop for w in s.split())]
    texts = list(dict.fromkeys(s for _, _, s in fuzzy))[:MEANING_SPANS]
    if not texts:
        return []
    hits = vectors.search("entities", embedder.encode(texts), 4)
    near = {t: [(int(e), d) for e, d in row if d <= FUZZY_DISTANCE] for t, row in zip(texts, hits)}
    found = {e for row in near.values() for e, _ in row}
    names = {eid: (r.get("name") or "") for eid, r in graph.entities(sorted(found)).items()} if found else {}
    for a, b, s in fuzzy:
        row = near.get(s) or []
        if row:
            best = row[0][1]
            ties = tuple(sorted(e for e, d in row if d <= best + 1e-6))
            name = names.get(ties[0], s)
            out.append(Candidate(a, b, s, name, ties, float(best), name, "meaning"))
    return out


#: a run of capitalized words in a text
_CAPITAL_RUN = re.compile(r"\b[A-Z][\w'’.&-]*(?:\s+[A-Z][\w'’.&-]*)*")
#: a run of capitalized words (or a number) in a text: what names look like when written in a sentence
_NAME_RUN = re.compile(r"(?:\b[A-Z][\w'’.&-]*(?:\s+[A-Z][\w'’.&-]*)*|\b\d[\d.,]*\b)")


def unknown_names(text: str, cands: Sequence[Candidate], skip_first: bool = True) -> list[str]:
    """The runs of capitalized words (and numbers) in ``text`` that no candidate overlaps: names of things the KG
    does not have ("Zorblax Quinmel directed Jaws"). A capitalized first word of the text alone is a sentence's
    start, not a name (unless ``skip_first`` is False)."""
    out = []
    for m in _NAME_RUN.finditer(text):
        a, b = m.start(), m.end()
        if skip_first and a == 0 and " " not in m.group(0).strip():
            continue
        if not any(c.start < b and a < c.end for c in cands):
            out.append(m.group(0))
    return out


def _nesting(cands: Sequence[Candidate]) -> tuple[list[bool], list[bool]]:
    """Per candidate: whether another span holds it (nested), and whether it holds another (nests); in
    O(n log n): a sweep over the spans sorted by start (then longest first), and one by end (then shortest first)."""
    n = len(cands)
    nested, nests = [False] * n, [False] * n
    spans_ = [(c.start, c.end) for c in cands]
    order = sorted(range(n), key=lambda i: (spans_[i][0], -spans_[i][1]))
    best_end, best_span = -1, None
    for i in order:  # a span starting earlier (or at the same place, longer) that ends at or after this one
        if best_span is not None and best_end >= spans_[i][1] and best_span != spans_[i]:
            nested[i] = True
        if spans_[i][1] > best_end:
            best_end, best_span = spans_[i][1], spans_[i]
    order = sorted(range(n), key=lambda i: (spans_[i][1], -spans_[i][0]))
    best_start, best_span = -1, None
    for i in order:  # a span ending earlier (or at the same place, shorter) that starts at or after this one
        if best_span is not None and best_start >= spans_[i][0] and best_span != spans_[i]:
            nests[i] = True
        if spans_[i][0] > best_start:
            best_start, best_span = spans_[i][0], spans_[i]
    return nested, nests


class LinkModel:
    """The learned acceptance of candidates: logistic weights over :data:`FEATURES` and the template rates (the
    share of training questions whose text outside the topic holds the span)."""

    def __init__(self, weights: Sequence[float] | np.ndarray, template_rate: Mapping[str, float],
                 max_topics: int = 1) -> None:
        self.weights = np.asarray(weights, dtype=np.float64)
        self.template_rate = dict(template_rate)
        self.max_topics = max_topics
        #: the single words of the training questions besides their topics (:func:`needs_fulltext`)
        self.words = frozenset(g for g in self.template_rate if " " not in g)

    def features(self, cands: Sequence[Candidate], text: str) -> np.ndarray:
        x = np.zeros((len(cands), len(FEATURES)), dtype=np.float64)
        nested, nests = _nesting(cands)
        # a text written all in lower case says nothing by its capitals: a candidate written as a name is
        # (case aside) counts as capitalized when that name is, unless its first word is one the training
        # questions are made of besides their names and the words around it are not how they write around a
        # name ("what" for the film "What?" in "what are the movies...", "movie crazy" in "the movie crazy heart",
        # "the desperate hours" in "by the desperate hours director"; but "the battle of britain" in "the movie
        # the battle of britain were...": "movie X were" is)
        lowered = not any(ch.isupper() for ch in text)
        for i, c in enumerate(cands):
            words = len(c.mention.split())
            capital = c.mention[:1].isupper() or (lowered and c.distance == 0.0
                                                  and (c.matched or c.name)[:1].isupper()
                                                  and (_first_word(c.mention) not in self.words
                                                       or self.template_rate.get(_context(text, c), 0.0) > 0.0))
            x[i] = (1.0, min(words, MAX_SPAN) / 5.0,
                    math.log1p(len(c.mention)) / 3.0, float(capital),
                    self.template_rate.get(" ".join(w.lower().rstrip(_TRAIL) for w in _WORD.findall(c.mention)), 0.0),
                    float(nested[i]), float(nests[i]), math.log1p(len(c.eids)), float(c.start == 0))
        return x

    def probabilities(self, cands: Sequence[Candidate], text: str) -> np.ndarray:
        if not cands:
            return np.zeros(0)
        z = self.features(cands, text) @ self.weights
        # a candidate by spelling or meaning (the training questions name their topics exactly) is discounted by
        # its distance
        fuzzy = np.array([max(0.0, 1.0 - c.distance / (2 * FUZZY_DISTANCE)) for c in cands])
        return fuzzy / (1.0 + np.exp(-np.clip(z, -30, 30)))

    def choose(self, cands: Sequence[Candidate], text: str, max_topics: int | None = None,
               min_topics: int = 1) -> list[LinkedTopic]:
        """The topics: the most probable candidate, then others that overlap no chosen one while over one half (or
        while fewer than ``min_topics`` are chosen: a claim names two entities), at most ``max_topics`` (default:
        the most the training questions had), in the order of the text."""
        p = self.probabilities(cands, text)
        order = sorted(range(len(cands)), key=lambda i: (-p[i], -(cands[i].end - cands[i].start), cands[i].start))
        chosen: list[int] = []
        for i in order:
            if len(chosen) >= (max_topics or self.max_topics):
                break
            if chosen and p[i] < 0.5 and (len(chosen) >= min_topics or p[i] <= 0.0):
                break
            if any(cands[i].overlaps(cands[j]) or cands[i].eids == cands[j].eids for j in chosen):
                continue
            chosen.append(i)
        chosen.sort(key=lambda i: cands[i].start)
        return [_topic(cands[i], float(p[i])) for i in chosen]

    def readings(self, cands: Sequence[Candidate], text: str, max_topics: int | None = None,
                 limit: int = 4) -> list[list[LinkedTopic]]:
        """The choices of topics to try, best first: :meth:`choose`'s, then each other candidate alone (by
        probability, those overlapping no earlier one), at most ``limit`` in all. A caller that finds no pattern
        fitting the first tries the next (the topic is chosen jointly with what fits it)."""
        first = self.choose(cands, text, max_topics)
        out = [first] if first else []
        p = self.probabilities(cands, text)
        taken = [(t.start, t.end) for t in first]
        for i in sorted(range(len(cands)), key=lambda i: (-p[i], -(cands[i].end - cands[i].start), cands[i].start)):
            if len(out) >= limit or p[i] <= 0.0:
                break
            c = cands[i]
            if any(c.start < b and a < c.end for a, b in taken):
                continue
            taken.append((c.start, c.end))
            out.append([_topic(c, float(p[i]))])
        return out

    def to_json(self) -> dict[str, Any]:
        return {"features": list(FEATURES), "weights": self.weights.tolist(), "template_rate": self.template_rate,
                "max_topics": self.max_topics}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> LinkModel:
        return cls(obj["weights"], obj["template_rate"], int(obj.get("max_topics", 1)))


def _first_word(mention: str) -> str:
    """A mention's first word as :attr:`LinkModel.words` holds the words (lower case, without trailing marks)."""
    m = _WORD.search(mention)
    return m.group(0).lower().rstrip(_TRAIL) if m else ""


def _context(text: str, c: Candidate) -> str:
    """The words around a candidate as :attr:`LinkModel.template_rate` holds the training questions' n-grams, the
    candidate masked: the word before, the mask and the word after ("movie x were"); at an edge of the text, the
    two words on the other side ("the movie x", "x are the")."""
    before = [m.group(0).lower().rstrip(_TRAIL) for m in _WORD.finditer(text[:c.start])][-2:]
    after = [m.group(0).lower().rstrip(_TRAIL) for m in _WORD.finditer(text[c.end:])][:2]
    m = MASK.lower()
    if before and after:
        return f"{before[-1]} {m} {after[0]}"
    return " ".join([*before, m, *after])


def _topic(c: Candidate, p: float) -> LinkedTopic:
    return LinkedTopic(c.mention, c.name, c.eids, p, c.start, c.end, c.matched or c.name, c.how, c.alias)


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
