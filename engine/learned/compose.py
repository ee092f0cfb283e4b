"""The composer: relation paths the generator never saw in training, ranked by how the question's words name them.

The template classifier (:mod:`engine.learned.generator`) chooses among the templates of its training questions,
and a question asking a chain of relations no training question asked ("X's mom's parent's nationality" when the
synthetic questions never walked parents, parents, nationality) gets the nearest template it knows. The composer
ranks instead the relation paths that *exist* at the linked topic (up to :data:`MAX_HOPS` hops, read from the KG:
:func:`topic_paths`), each by

* how the question's words name its relations hop by hop, in the order the question says them
  (:func:`reading_words`: the possessive chain after the topic in order, then the words before it from the nearest
  outwards: "the place of birth of X 's children 's mother" reads children, mother, birth, place), aligned
  monotonically to the
  path's steps (:func:`align`: each step named by one or more words, each word naming one step or none; a relation
  walked there and back, "share a director with X", may be one step named by one word);
* what the words leave unexplained (a word that names some relation but no step of the path) and the steps no word
  names;
* what the question's structure says against the alignment (:mod:`engine.learned.reading`): a word continuing a
  step from another chunk ("the heir of X 's daughter" read as the daughter alone), a chunk no word of which names
  a step, two steps named in one chunk ("release years" read as the release year walked there and back); kind nouns
  ("the movies directed by X") need name nothing;
* the path's length, how many of its hops walk a relationship backwards, and how many times it turns back by another
  relation than the one it came by (:func:`turned_by_another`: "the films directed by the writer of X"), which the
  synthetic questions' forward walk never does (it turns back only at a dead end, by the relation it came by), so
  that the fit learns how far people's questions follow the walk too;
* how close the question is, as a sentence, to the path read as a phrase (:func:`verbalize`: "the gender of X's
  spouse" is near "the sex of X's darling" where the words alone are not);
* the classifier's probability of the path's template where it knows the template (one over the number of paths,
  no evidence, where it does not).

The weights of these features (:data:`FEATURES`) are fitted on the held-out training questions
(:func:`fit_composer`: the softmax over each question's paths at its topic, the gold path the target), a third of
them with the classifier's knowledge of the gold template hidden, so that the alignment learns to stand on its own
for the paths the classifier never saw, and half of them again as people would word them with a synonym the
synthetic questions never used (:func:`weak_synonym`: the words naming one relation of the gold path barely stand
out, and the classifier, not having read them, puts its mass on the path without that relation), so that the fit
does not learn to trust the classifier as far as synthetic questions allow.

Word-relation similarity is the generator's (:class:`RelationAligner`:
the cosine of the word's and the relation name's embeddings), standardised per word over the KG's relations so that
a word names the relation it is closest to ("darling" is nearer ``spouse`` than any other relation, though not near
it in absolute terms).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from engine.learned.reading import APART, OF, SAME, Roles, reading_words
from engine.learned.templates import Template, chain
from engine.linking.text import MASK
from engine.linking.relations import compound_head, compound_heads, naming_forms, relation_forms, singular

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import GraphReader

__all__ = ["FEATURES", "MAX_HOPS", "Alignment", "Composer", "PathInputs", "RelationNames", "Step", "align",
           "chain_steps", "features", "fit_composer", "graph_neighbours", "name_words", "raise_compounds",
           "reading_words", "replica_neighbours", "synonym_examples", "topic_paths", "turned_by_another", "verbalize",
           "weak_synonym", "word_gains"]

#: longest relation path ranked
MAX_HOPS = 3
#: entities followed per relation path and hop (a path exists when one of them has the next relationship)
FRONTIER = 24
#: relation paths ranked per question, at most (the shortest first)
MAX_PATHS = 3_000
#: the floor of the classifier's probability of a template it knows (one it does not know gets ``1 / paths``: no
#: evidence either way, the ``unseen`` feature saying so)
FLOOR = 1e-6
#: the alignment's own costs: a word continuing a step, a step no word names
CONTINUE, UNNAMED = 0.5, 0.5
#: the alignment's costs for what the question's structure says (:mod:`engine.learned.reading`): a word continuing
#: a step from another chunk, a chunk no word of which names a step, two words of one chunk naming two steps
CROSS, CHUNK, SPLIT = 0.5, 0.5, 0.5
FEATURES = ("named", "continued", "unexplained", "unnamed_steps", "one_hop", "two_hops", "three_hops",
            "inverse_hops", "there_and_back", "classifier_logp", "unseen", "phrase", "named_in_order", "crossed",
            "unexplained_chunks", "split", "turned_by_another")

Step = tuple[str, bool]  # (relation name, the relationship leaves the walk's side)
#: per entity eid: (relation name, leaves it, the entities it leads to)
Neighbours = Callable[[Sequence[int]], Mapping[int, Sequence[tuple[str, bool, Sequence[int]]]]]

class RelationNames:
    """How well words name each of the KG's relations: the best cosine of the word and the relation's names, its
    words and, for a relation named by a participle, the agent noun and the verb it is called by
    (:func:`engine.linking.relations.relation_forms`: ``written_by`` is "written by", "writer" and "written"),
    each name embedded once. A compound word whose head (its right-hand part, English compounds being
    right-headed) is one of these names names at least what its head names: "screenwriter" is a writer, whatever
    its own embedding is near (MiniLM puts it about as near ``directed_by`` and ``starred_actors`` as
    ``written_by``)."""

    def __init__(self, relations: Sequence[str], encode: Callable[[Sequence[str]], Any],
                 words: Callable[[str], str]) -> None:

        self.relations = list(relations)
        names: list[str] = []
        self.owner: list[int] = []
        for i, r in enumerate(self.relations):
            for n in naming_forms(r, words(r)):
                names.append(n)
                self.owner.append(i)
        vecs = np.asarray(encode(names), dtype=np.float32) if names else np.zeros((0, 1), np.float32)
        self._names = vecs / np.maximum(np.linalg.norm(vecs, axis=-1, keepdims=True), 1e-12)
        # the names a compound word may end in (engine.linking.relations.compound_head), each with its row
        heads = list(compound_heads(names))
        rows = self._rows(self._names[[names.index(h) for h in heads]]) if heads \
            else np.zeros((0, len(self.relations)), np.float32)
        self._heads = dict(zip(heads, rows))
        self._head_names = tuple(heads)

    def _rows(self, v: np.ndarray) -> np.ndarray:
        """``[n, relations]``: the best cosine (0 and up) of each unit vector and each relation's names."""
        sims = np.maximum(v @ self._names.T, 0.0)
        out = np.zeros((len(v), len(self.relations)), dtype=np.float32)
        for j, i in enumerate(self.owner):
            out[:, i] = np.maximum(out[:, i], sims[:, j])
        return out

    def head(self, word: str) -> str | None:
        """The name ``word`` is a compound of (:func:`engine.linking.relations.compound_head`), or None."""
        return compound_head(word, self._head_names)

    def sims_one(self, vecs: Any, words: Sequence[str] | None = None) -> np.ndarray:
        """``[words, relations]``: the best cosine (0 and up) of each word's embedding (``vecs`` [words, dim]) and
        each relation's names; with the ``words`` themselves, a compound's row is at least its head's
        (:meth:`head`)."""
        if not len(vecs) or not len(self.owner):
            return np.zeros((len(vecs), len(self.relations)), dtype=np.float32)
        v = np.asarray(vecs, dtype=np.float32).reshape(len(vecs), -1)
        return raise_compounds(self._rows(v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)),
                               words or (), self._heads, self._head_names)


def raise_compounds(sims: np.ndarray, words: Sequence[str], head_rows: Mapping[str, np.ndarray],
                    heads: Sequence[str]) -> np.ndarray:
    """``sims`` [words, relations] with the row of each compound word among ``words`` raised to at least its head's
    (``head_rows``; :func:`engine.linking.relations.compound_head` over ``heads``), in place; a word pair is no
    compound."""
    for k, w in enumerate(words):
        h = compound_head(w, heads) if " " not in w else None
        if h is not None:
            sims[k] = np.maximum(sims[k], head_rows[h])
    return sims


def chain_steps(template: Template) -> list[Step] | None:
    """The hops of a one-topic chain template walked from ``T1`` to its answer, or None for any other shape."""
    if template.topics != 1:
        return None
    left = list(template.triples)
    node, steps = "T1", []
    while left:
        touching = [t for t in left if node in (t[0], t[2])]
        if len(touching) != 1:
            return None
        h, r, t = touching[0]
        left.remove(touching[0])
        steps.append((r, h == node))
        node = t if h == node else h
    return steps if steps and node == template.answer_slot() else None


def graph_neighbours(graph: GraphReader, names: Mapping[str, str], cap: int = FRONTIER) -> Neighbours:
    """:data:`Neighbours` read from Neo4j (``cypher/learned_hops.cypher``, one read per call); ``names``:
    relationship type -> relation name (the KG's catalog)."""
    types = sorted(names)

    def read(eids: Sequence[int]) -> Mapping[int, Sequence[tuple[str, bool, Sequence[int]]]]:
        out: dict[int, list[tuple[str, bool, Sequence[int]]]] = {}
        if eids:
            for r in graph.read_named("learned_hops", eids=sorted(set(eids)), types=types, cap=cap):
                out.setdefault(int(r["eid"]), []).append((names.get(r["type"], r["type"]), bool(r["out"]),
                                                          [int(x) for x in r["next"]]))
        return out

    return read


def replica_neighbours(replica: Any, names: Mapping[str, str], cap: int = FRONTIER) -> Neighbours:
    """:data:`Neighbours` from the KG's in-process read replica (:mod:`engine.retrieval.replica`); a LookupError
    when an entity asked about is not in it (the caller reads Neo4j instead)."""

    def read(eids: Sequence[int]) -> Mapping[int, Sequence[tuple[str, bool, Sequence[int]]]]:
        uniq = sorted(set(eids))
        idx = replica.index(uniq).tolist()
        if any(i < 0 for i in idx):
            raise LookupError("an entity the replica lacks")
        out: dict[int, list[tuple[str, bool, Sequence[int]]]] = {}
        for eid, i in zip(uniq, idx):
            types, nbr, leaves = replica.row(i, None)
            by: dict[tuple[str, bool], list[int]] = {}
            for t, n, o in zip(types.tolist(), nbr.tolist(), leaves.tolist()):
                name = names.get(replica.types[t])
                if name is None:
                    continue
                got = by.setdefault((name, bool(o)), [])
                if len(got) < cap:
                    got.append(int(n))
            out[int(eid)] = [(r, o, [int(x) for x in replica.eids[ns]]) for (r, o), ns in by.items()]
        return out

    return read


def topic_paths(neighbours: Neighbours, eids: Sequence[int], max_hops: int = MAX_HOPS,
                frontier: int = FRONTIER, limit: int = MAX_PATHS) -> list[tuple[Step, ...]]:
    """The relation paths of 1 to ``max_hops`` hops that leave one of ``eids`` (the topic's entities), shortest
    first: one :data:`Neighbours` call per hop, following at most ``frontier`` entities per path (a path is found
    where one of them has the next relationship). A path may come back to an entity it passed ("X's children's
    parents": X again, or X's spouse)."""
    found: list[tuple[Step, ...]] = []
    at: dict[tuple[Step, ...], list[int]] = {(): sorted(set(eids))[:frontier]}
    for _ in range(max_hops):
        nb = neighbours(sorted({e for ents in at.values() for e in ents}))
        nxt: dict[tuple[Step, ...], list[int]] = {}
        for path, ents in at.items():
            for e in ents:
                for rel, out, far in nb.get(e, ()):
                    p = (*path, (rel, out))
                    got = nxt.setdefault(p, [])
                    if len(got) < frontier:
                        got.extend(x for x in far[:frontier - len(got)] if x not in got)
        for p in sorted(nxt):
            found.append(p)
            if len(found) >= limit:
                return found
        at = nxt
    return found


def _segments(steps: Sequence[Step]) -> list[list[tuple[str, int]]]:
    """The ways a path is named step by step: each hop alone, or (where two hops walk one relation there and back)
    the two as one step; per way, ``(relation, hops it stands for)``."""
    plain = [(r, 1) for r, _ in steps]
    merged: list[tuple[str, int]] = []
    i = 0
    while i < len(steps):
        if i + 1 < len(steps) and steps[i][0] == steps[i + 1][0] and steps[i][1] != steps[i + 1][1]:
            merged.append((steps[i][0], 2))
            i += 2
        else:
            merged.append((steps[i][0], 1))
            i += 1
    return [plain] if merged == plain else [plain, merged]


class Alignment(NamedTuple):
    """What :func:`align` found: the gains of the words naming and continuing steps, the cost of the words left
    unexplained, the steps no word names, the total it maximised, and what the question's structure says against it
    (words continuing a step across chunks, chunks of which no word names a step, chunks naming two steps)."""

    named: float
    continued: float
    unexplained: float
    unnamed: int
    total: float
    crossed: int = 0
    unexplained_chunks: int = 0
    split: int = 0


_Key = tuple[int, int, bool, bool, bool]  # (words read, steps begun, the last step was named, the chunk is
#                                           explained, the word before was aligned)
_Value = tuple[float, float, float, float, int, int, int, int]  # the totals of Alignment, the total first


def align(gain: np.ndarray, cols: Sequence[int], unexplained: np.ndarray, roles: Roles | None = None,
          names: Sequence[frozenset[str]] | None = None) -> Alignment:
    """The best monotone alignment of the reading words (rows of ``gain`` [words, relations]: how well each names
    each relation) to a path's steps (their relation columns ``cols``, in walking order): each word names the step
    it is aligned to, continues it (a second word of one name that names it too: "place of birth") or names none
    (costing ``unexplained[word]``); a step may be named by no word (:data:`UNNAMED`). With the words' ``roles``
    (:func:`engine.learned.reading.word_roles`) the question's structure counts too: a word continuing a step from
    another chunk (:data:`CROSS`; across "of" only where both words are of the relation's own name, ``names[col]``),
    a chunk no word of which is aligned (:data:`CHUNK`), a word naming the next step in the chunk of the word that
    named the one before (:data:`SPLIT`); a kind noun costs nothing unexplained and names only the last step."""
    n, k = gain.shape[0], len(cols)
    best: dict[_Key, _Value] = {(0, 0, False, True, False): (0.0, 0.0, 0.0, 0.0, 0, 0, 0, 0)}

    def put(key: _Key, v: _Value) -> None:
        cur = best.get(key)
        if cur is None or v[0] > cur[0]:
            best[key] = v

    for j in range(n + 1):
        for i in range(k + 1):
            for flags in _FLAGS:
                v = best.get((j, i, *flags))
                if v is not None:
                    for key, nv in _moves(gain, cols, unexplained, roles, names, (j, i, *flags), v):
                        put(key, nv)
    ends = []
    for (j, i, _, explained, _), v in best.items():
        if j == n and i == k:
            pen = int(roles is not None and n > 0 and not explained)
            ends.append((v[0] - CHUNK * pen, *v[1:6], v[6] + pen, v[7]))
    tot, nam, con, une, unn, crs, chunks, spl = max(ends, key=lambda v: v[0])  # (there is one: steps may go unnamed)
    return Alignment(nam, con, une, unn, tot, crs, chunks, spl)


_FLAGS = [(a, b, c) for a in (False, True) for b in (False, True) for c in (False, True)]


def _moves(gain: np.ndarray, cols: Sequence[int], unexplained: np.ndarray, roles: Roles | None,
           names: Sequence[frozenset[str]] | None, key: _Key, v: _Value) -> list[tuple[_Key, _Value]]:
    """The alignment's moves from one state (:func:`align`): the next step named by no word, or the next word left
    unexplained, continuing the step named last, or naming the next step."""
    j, i, named, explained, aligned = key
    tot, nam, con, une, unn, crs, chunks, spl = v
    n, k = gain.shape[0], len(cols)
    out: list[tuple[_Key, _Value]] = []
    if i < k:
        out.append(((j, i + 1, False, explained, False), (tot - UNNAMED, nam, con, une, unn + 1, crs, chunks, spl)))
    if j == n:
        return out
    join = roles.joins[j] if roles is not None else SAME
    kind = roles is not None and roles.kinds[j]
    opens = roles is not None and j > 0 and join != SAME  # word j opens a chunk: the one before ends here
    pen = int(opens and not explained)
    tot, chunks = tot - CHUNK * pen, chunks + pen
    explained = (explained and not opens and j > 0) or kind
    cost = 0.0 if kind else float(unexplained[j])
    out.append(((j + 1, i, named, explained, False), (tot - cost, nam, con, une + cost, unn, crs, chunks, spl)))
    g = float(gain[j, cols[i - 1]]) if named else 0.0
    if g > 0:  # a further word of the step just named, that names its relation too
        x = int(roles is not None and (join == APART or (join == OF and not (
            names is not None and {roles.words[j], roles.words[j - 1]} <= names[cols[i - 1]]))))
        out.append(((j + 1, i, True, True, True),
                    (tot + CONTINUE * g - CROSS * x, nam, con + g, une, unn, crs + x, chunks, spl)))
    if i < k and (not kind or i == k - 1):
        g = float(gain[j, cols[i]])
        s = int(roles is not None and aligned and join == SAME and not kind and not roles.kinds[j - 1])
        out.append(((j + 1, i + 1, True, True, True),
                    (tot + g - SPLIT * s, nam + g, con, une, unn, crs, chunks, spl + s)))
    return out


def word_gains(sims: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """From the reading words' cosines with every relation ``[words, relations]``: how well each word names each
    relation (standardised over the relations, a third of a standard deviation a unit) and what leaving the word
    unexplained costs (how far its best relation stands out, beyond one standard deviation)."""
    if not sims.size:
        return sims.astype(np.float32), np.zeros(sims.shape[0], np.float32)
    z = (sims - sims.mean(1, keepdims=True)) / (sims.std(1, keepdims=True) + 0.05)
    return (z / 3).astype(np.float32), np.maximum(z.max(1) - 1.0, 0.0).astype(np.float32)


def verbalize(steps: Sequence[Step]) -> list[str]:
    """The path read as a phrase about the topic ``X``, in two forms: "the gender of the spouse of X" and "X's
    spouse's gender" (a hop that enters its entity: "the ones directed by X", "the ones X starred in", "the ones
    whose spouse is X"); the composer compares them with the masked question as sentences."""

    out = []
    for possessive in (False, True):
        phrase, named = MASK, True  # a name or a possessive: "'s" may follow
        for rel, leaves in steps:
            f = relation_forms(rel)
            noun = f.nouns[0]
            if leaves:
                phrase = f"{phrase}'s {noun}" if possessive and named else f"the {noun} of {phrase}"
            elif f.passive and f.leading:
                phrase, named = f"the ones {phrase} {f.participle} in", False
            elif f.passive:
                phrase, named = f"the ones {f.passive} {phrase}", False
            else:
                phrase, named = f"the ones whose {noun} is {phrase}", False
        out.append(phrase)
    return list(dict.fromkeys(out))


def name_words(col: Mapping[str, int]) -> list[frozenset[str]]:
    """Per relation column, the words of the relation's own names (:func:`relation_forms`), singular and as written:
    "place of birth" is one name, so "place" may continue "birth" across "of"."""
    out: list[frozenset[str]] = [frozenset()] * (max(col.values(), default=-1) + 1)
    for rel, c in col.items():
        f = relation_forms(rel)
        words = {w for name in (f.phrase, *f.nouns) for w in name.split()}
        out[c] = frozenset(words | {singular(w) for w in words})
    return out


def features(readings: Sequence[tuple[np.ndarray, np.ndarray]], col: Mapping[str, int],
             paths: Sequence[Sequence[Step]], logp: Sequence[float | None],
             phrase: Sequence[float] | None = None, roles: Sequence[Roles] | None = None) -> np.ndarray:
    """``[paths, len(FEATURES)]``: each path's features (see the module docstring), its alignment the best over the
    question's reading orders (``readings``: per order, :func:`word_gains` of its words, the likeliest first;
    ``roles``: per order, its words' :class:`~engine.learned.reading.Roles`, None to read no structure) and the
    ways of naming its steps, ``named_in_order`` the named gain of the best alignment to the likeliest order;
    ``logp``: the log of the classifier's probability of each path's template, None where it does not know it;
    ``phrase``: the cosine of the masked question and the path's :func:`verbalize` (the best of its forms; 0
    without). Paths of the same relations (in other directions) share their alignments."""
    out = np.zeros((len(paths), len(FEATURES)), dtype=np.float64)
    uninformed = -math.log(max(len(paths), 1))
    names = name_words(col) if roles is not None else None
    done: dict[tuple[int, ...], Alignment] = {}

    def aligned(cols: tuple[int, ...], k: int) -> Alignment:
        key = (k, *cols)
        if key not in done:
            gain, unexplained = readings[k]
            done[key] = align(gain, cols, unexplained, roles[k] if roles is not None else None, names)
        return done[key]

    for p, (steps, lp) in enumerate(zip(paths, logp)):
        best: Alignment | None = None
        first: Alignment | None = None
        merged = 0
        for seg in _segments(steps):
            cols = tuple(col[r] for r, _ in seg)
            for k in range(len(readings)):
                got = aligned(cols, k)
                if best is None or got.total > best.total:
                    best, merged = got, sum(h == 2 for _, h in seg)
                if k == 0 and (first is None or got.total > first.total):
                    first = got
        assert best is not None and first is not None
        n = len(steps)
        out[p] = (best.named, best.continued, best.unexplained, best.unnamed, n == 1, n == 2, n >= 3,
                  sum(not o for _, o in steps), merged, max(lp, math.log(FLOOR)) if lp is not None else uninformed,
                  lp is None, phrase[p] if phrase is not None else 0.0, first.named, best.crossed,
                  best.unexplained_chunks, best.split, turned_by_another(steps))
    return out


def turned_by_another(steps: Sequence[Step]) -> int:
    """How many times the path, having walked a relationship forwards, walks the next one backwards by another
    relation ("the films directed by the writer of X": out to the writer, back in by the director), where the
    forward walk of :mod:`engine.evaluation.synth` turns back only by the relation it came by ("the films that
    share a writer with X")."""
    return sum(steps[k - 1][1] and not steps[k][1] and steps[k - 1][0] != steps[k][0] for k in range(1, len(steps)))


@dataclass(frozen=True)
class PathInputs:
    """What :func:`features` ranks a question's paths from (kept apart so that the fit can make variants of it:
    :func:`weak_synonym`)."""

    readings: list[tuple[np.ndarray, np.ndarray]]
    roles: list[Roles] | None
    col: Mapping[str, int]
    paths: list[tuple[Step, ...]]
    logp: list[float | None]
    phrase: list[float] | None

    def features(self) -> np.ndarray:
        return features(self.readings, self.col, self.paths, self.logp, self.phrase, self.roles)


def weak_synonym(inputs: PathInputs, gold: int, rng: random.Random, *, flatten: tuple[float, float] = (0.2, 0.6),
                 doubt: tuple[float, float] = (2.0, 8.0)) -> PathInputs | None:
    """The question as people ask it with a word the embeddings barely tie to one relation of its gold path ("X 's
    darling 's sex" for "X 's spouse 's gender"): for one step of the gold path (drawn), the words that name its
    relation best have their gains over all relations shrunk by a factor drawn from ``flatten`` (a word that stands
    out less; what leaving it unexplained costs follows), and the classifier, which has not read the word, puts its
    mass on the gold path without that step (the most probable template it gives) and its probability of the gold
    path falls by ``e ** d``, ``d`` drawn from ``doubt``. None for a path of one step, or when the gold path less the
    step is not a path at the topic."""
    steps = inputs.paths[gold]
    if len(steps) < 2:
        return None
    i = rng.randrange(len(steps))
    shorter = tuple(s for k, s in enumerate(steps) if k != i)
    if shorter not in inputs.paths:
        return None
    c, factor = inputs.col[steps[i][0]], rng.uniform(*flatten)
    readings = []
    for gain, unexplained in inputs.readings:
        gain, unexplained = gain.copy(), unexplained.copy()
        top = float(gain[:, c].max()) if len(gain) else 0.0
        for j in np.flatnonzero(gain[:, c] >= top - 1e-9) if top > 0 else ():
            gain[j] *= factor
            unexplained[j] = max(3 * float(gain[j].max()) - 1.0, 0.0)  # as word_gains makes it, z = 3 * gain
        readings.append((gain, unexplained))
    logp = list(inputs.logp)
    likeliest = max((x for x in logp if x is not None), default=0.0)
    d = rng.uniform(*doubt)
    if logp[gold] is not None:
        logp[gold] = float(logp[gold]) - d  # type: ignore[arg-type]  # (checked just before)
    s = inputs.paths.index(shorter)
    logp[s] = max(float(logp[s]), likeliest) if logp[s] is not None else likeliest  # type: ignore[arg-type]
    return replace(inputs, readings=readings, logp=logp)


def synonym_examples(examples: Sequence[tuple[PathInputs, int]], share: float = 0.5,
                     seed: int = 0) -> list[tuple[np.ndarray, int]]:
    """For a share ``share`` of ``examples`` (``(inputs, the gold path's row)``, drawn with ``seed``), the features
    of its :func:`weak_synonym` variant and its gold row: examples of what a classifier fitted on synthetic wordings
    does with people's synonyms, which its held-out synthetic questions never show the composer's fit."""
    rng = random.Random(seed)
    out = []
    for inputs, gold in examples:
        if rng.random() < share:
            weak = weak_synonym(inputs, gold, rng)
            if weak is not None:
                out.append((weak.features(), gold))
    return out


@dataclass(frozen=True)
class Composer:
    """The fitted weights of :data:`FEATURES` (a path's score is their dot product with its features)."""

    weights: tuple[float, ...]

    def scores(self, feats: np.ndarray) -> np.ndarray:
        return np.asarray(feats, dtype=np.float64) @ np.asarray(self.weights, dtype=np.float64)

    def probabilities(self, feats: np.ndarray) -> np.ndarray:
        """The softmax of the paths' scores."""
        s = self.scores(feats)
        if not len(s):
            return s
        z = np.exp(s - s.max())
        return np.asarray(z / z.sum())

    def to_json(self) -> dict[str, Any]:
        return {"features": list(FEATURES), "weights": [float(w) for w in self.weights]}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Composer:
        """The composer of :meth:`to_json`; ValueError when it is not one (other features, weights not finite)."""
        if list(obj.get("features") or []) != list(FEATURES):
            raise ValueError(f"its features are {obj.get('features')!r}, this version ranks paths by {list(FEATURES)}")
        weights = tuple(float(w) for w in obj["weights"])
        if len(weights) != len(FEATURES) or not all(math.isfinite(w) for w in weights):
            raise ValueError(f"weights must be {len(FEATURES)} finite numbers")
        return cls(weights)


#: the starting weights of the fit (and what an alignment-only composer would use)
PRIOR = (1.0, 0.5, -1.0, -0.5, 0.0, 0.0, 0.0, -0.2, 0.0, 0.3, 0.0, 2.0, 0.5, -1.0, -1.0, -1.0, 0.0)


def fit_composer(examples: Sequence[tuple[np.ndarray, int]], *, l2: float = 1e-2, hide: float = 1 / 3,
                 seed: int = 0) -> Composer | None:
    """The weights of the softmax over each example's paths (``(features [paths, FEATURES], the gold path's
    row)``) that make the gold paths most likely, L2-regularised towards :data:`PRIOR` (at least ``2 / examples``);
    for a share ``hide`` of the examples (drawn with ``seed``) the gold path's template is made unknown to the
    classifier as it is for a path no training question walked: its ``classifier_logp`` that of no evidence,
    ``unseen`` 1, and the classifier's probability of it given to the known template it ranks next (a classifier
    that does not know the path puts its mass on the nearest template it knows).
    None with no example."""
    import torch

    usable = [(f, g) for f, g in examples if len(f) > 1 and 0 <= g < len(f)]
    if not usable:
        return None
    rng = random.Random(seed)
    lp, un = FEATURES.index("classifier_logp"), FEATURES.index("unseen")
    rows: list[tuple[Any, int]] = []
    for f, g in usable:
        f = np.array(f, dtype=np.float64)
        if rng.random() < hide:
            # as for a path the classifier never saw: its mass on the nearest template it knows, the gold unknown
            others = [j for j in range(len(f)) if j != g and f[j, un] == 0]
            if others:
                j = max(others, key=lambda j: f[j, lp])
                f[j, lp] = max(f[j, lp], f[g, lp])
            f[g, lp], f[g, un] = -math.log(len(f)), 1.0
        rows.append((torch.as_tensor(f), g))
    prior = torch.tensor(PRIOR, dtype=torch.float64)
    w = prior.clone().requires_grad_(True)
    l2 = max(l2, 2.0 / len(rows))  # few questions: the prior holds more
    opt = torch.optim.LBFGS([w], lr=0.5, max_iter=300, line_search_fn="strong_wolfe")

    def closure() -> Any:
        opt.zero_grad()
        loss: Any = (sum(-torch.log_softmax(f @ w, 0)[g] for f, g in rows) / len(rows)
                     + l2 * ((w - prior) ** 2).sum())
        loss.backward()
        return loss

    opt.step(closure)  # type: ignore[no-untyped-call]
    weights = tuple(float(v) for v in w.detach())
    return Composer(weights) if all(math.isfinite(v) for v in weights) else Composer(PRIOR)


def path_template(steps: Sequence[Step], known: Mapping[Template, Template]) -> Template:
    """The template of a path from ``T1`` (the known one, with its type hints, where the classifier has it)."""
    t = chain([r for r, _ in steps], [o for _, o in steps])
    return known.get(t, t)
