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
* the path's length and how many of its hops walk a relationship backwards;
* how close the question is, as a sentence, to the path read as a phrase (:func:`verbalize`: "the gender of X's
  spouse" is near "the sex of X's darling" where the words alone are not);
* the classifier's probability of the path's template where it knows the template (one over the number of paths,
  no evidence, where it does not).

The weights of these features (:data:`FEATURES`) are fitted on the held-out training questions
(:func:`fit_composer`: the softmax over each question's paths at its topic, the gold path the target), a third of
them with the classifier's knowledge of the gold template hidden, so that the alignment learns to stand on its own
for the paths the classifier never saw. Word-relation similarity is the generator's (:class:`RelationAligner`:
the cosine of the word's and the relation name's embeddings), standardised per word over the KG's relations so that
a word names the relation it is closest to ("darling" is nearer ``spouse`` than any other relation, though not near
it in absolute terms).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.learned.templates import Template, chain
from engine.linking.text import MASK
from engine.linking.relations import relation_forms

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import GraphReader

__all__ = ["FEATURES", "MAX_HOPS", "Composer", "RelationNames", "Step", "align", "chain_steps", "features",
           "fit_composer", "graph_neighbours", "reading_words", "replica_neighbours", "topic_paths", "verbalize",
           "word_gains"]

#: longest relation path ranked
MAX_HOPS = 3
#: entities followed per relation path and hop (a path exists when one of them has the next relationship)
FRONTIER = 24
#: relation paths ranked per question, at most (the shortest first)
MAX_PATHS = 3_000
#: the floor of the classifier's probability of a template it knows (one it does not know gets ``1 / paths``: no
#: evidence either way, the ``unseen`` feature saying so)
FLOOR = 1e-6
#: the alignment's own costs: a word continuing a step, a word left unexplained, a step no word names
CONTINUE, UNNAMED = 0.5, 0.5
FEATURES = ("named", "continued", "unexplained", "unnamed_steps", "one_hop", "two_hops", "three_hops",
            "inverse_hops", "there_and_back", "classifier_logp", "unseen", "phrase", "named_in_order")

Step = tuple[str, bool]  # (relation name, the relationship leaves the walk's side)
#: per entity eid: (relation name, leaves it, the entities it leads to)
Neighbours = Callable[[Sequence[int]], Mapping[int, Sequence[tuple[str, bool, Sequence[int]]]]]

_BE = frozenset({"is", "was", "are", "were"})
_ARTICLES = frozenset({"a", "an", "the"})
_POSSESSIVE = re.compile(r"\s*['’]s\b")
_TOKENS = re.compile(r"'s|[^\W_]+")


def reading_words(masked: str, function_words: Iterable[str]) -> list[list[str]]:
    """The orders in which a masked question may name the relations walked from its topic, the likeliest first
    (then the words after the mask before those before it, and the other way round). The likeliest: where a word
    that names something follows the (first) mask at once and "by" does not come before it, the topic is inside a
    clause of its own and the words after it come first ("the films X acted in ...", "the X written movies"); else
    the words of the possessive chain right after it ("X 's children 's mother", or the relation it is named by:
    "the ones that have X as director", "the ones X was the director of"), then the words before it from the
    nearest outwards ("the place of birth of X ..." -> birth, place), then the other words after it ("the films
    directed by X were written by whom" -> directed, films, written). Without a mask, the words from the last
    backwards."""
    skip = set(function_words) | {MASK.lower()}
    toks = [w.lower() for w in _TOKENS.findall(_POSSESSIVE.sub(" 's ", masked))]
    at = toks.index(MASK.lower()) if MASK.lower() in toks else len(toks)
    after, before = toks[at + 1:], [w for w in reversed(toks[:at]) if w not in skip]

    def content(ws: Sequence[str]) -> list[str]:
        return [w for w in ws if w not in skip and w != "'s"]

    def named(i: int) -> bool:  # the word after the mask at i names something
        return i < len(after) and after[i] not in skip and after[i] != "'s"

    # the topic begins a clause of its own when a word follows it at once, and either a noun comes before it ("the
    # films X acted in") or a second word follows ("the director of X written movies"); not after "by" ("directed
    # by X released") nor inside "of X" ("where did the father of X die": the father died)
    others = [content(after) + before, before + content(after)]  # the two plain orders, for the others' sake
    if named(0) and (at == 0 or toks[at - 1] not in skip or named(1)) and not (at > 0 and toks[at - 1] == "by"):
        return _distinct([content(after) + before, *others])
    def name_from(i: int) -> int:  # the end of the name that starts at i ("of" may join its words)
        while i < len(after) and (after[i] not in skip or (after[i] == "of" and named(i + 1))):
            i += 1
        return i

    end = 0  # the possessive chain: "'s" and the name after each ("X 's other half 's father")
    while end < len(after) and after[end] == "'s":
        end += 1
        while end < len(after) and after[end] in skip and after[end] != "'s" and named(end + 1):
            end += 1
        end = name_from(end)
    if end == 0 and after[:1] == ["as"]:  # "the ones that have X as director": the topic's own relation
        end = name_from(1)
    elif end == 0 and len(after) > 2 and after[0] in _BE and after[1] in _ARTICLES:  # "X was the director of"
        end = name_from(2)
    return _distinct([content(after[:end]) + before + content(after[end:]), *others])


def _distinct(orders: Sequence[list[str]]) -> list[list[str]]:
    return [o for k, o in enumerate(orders) if o not in orders[:k]]


class RelationNames:
    """How well words name each of the KG's relations: the best cosine of the word and the relation's names, its
    words and, for a relation named by a participle, the agent noun and the verb it is called by
    (:func:`engine.linking.relations.relation_forms`: ``written_by`` is "written by", "writer" and "written", so
    that "screenwriter" names it), each name embedded once."""

    def __init__(self, relations: Sequence[str], encode: Callable[[Sequence[str]], Any],
                 words: Callable[[str], str]) -> None:

        self.relations = list(relations)
        names: list[str] = []
        self.owner: list[int] = []
        for i, r in enumerate(self.relations):
            f = relation_forms(r)
            # a relation named by a participle also by its agent noun and verb; the others by their own words
            # (their singular would bring "child" as near "parent" as "children" is to "parents" apart)
            for n in dict.fromkeys([words(r), *((*f.nouns, f.participle) if f.participle else ())]):
                names.append(n)
                self.owner.append(i)
        vecs = np.asarray(encode(names), dtype=np.float32) if names else np.zeros((0, 1), np.float32)
        self._names = vecs / np.maximum(np.linalg.norm(vecs, axis=-1, keepdims=True), 1e-12)

    def sims_one(self, vecs: Any) -> np.ndarray:
        """``[words, relations]``: the best cosine (0 and up) of each word's embedding (``vecs`` [words, dim]) and
        each relation's names."""
        out = np.zeros((len(vecs), len(self.relations)), dtype=np.float32)
        if not len(vecs) or not len(self.owner):
            return out
        v = np.asarray(vecs, dtype=np.float32).reshape(len(vecs), -1)
        v = v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)
        sims = np.maximum(v @ self._names.T, 0.0)
        for j, i in enumerate(self.owner):
            out[:, i] = np.maximum(out[:, i], sims[:, j])
        return out


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


_State = tuple[float, float, float, float, int]


def align(gain: np.ndarray, cols: Sequence[int], unexplained: np.ndarray) -> tuple[float, float, float, int, float]:
    """The best monotone alignment of the reading words (rows of ``gain`` [words, relations]: how well each names
    each relation) to a path's steps (their relation columns ``cols``, in walking order): each word names the step
    it is aligned to, continues it (a second word of one name that names it too: "place of birth") or names none
    (costing ``unexplained[word]``); a step may be named by no word (:data:`UNNAMED`). Returns (the named gain, the
    continued gain, the unexplained cost, the steps named by no word, the total the alignment maximised)."""
    n, k = gain.shape[0], len(cols)
    # state (words read, steps begun, the last step begun was named): (total, named, continued, unexplained, unnamed)
    best: dict[tuple[int, int, bool], _State] = {(0, 0, False): (0.0, 0.0, 0.0, 0.0, 0)}

    def put(key: tuple[int, int, bool], v: _State) -> None:
        cur = best.get(key)
        if cur is None or v[0] > cur[0]:
            best[key] = v

    for j in range(n + 1):
        for i in range(k + 1):
            for named in (False, True):
                v = best.get((j, i, named))
                if v is None:
                    continue
                tot, nam, con, une, unn = v
                if i < k:  # the next step named by no word
                    put((j, i + 1, False), (tot - UNNAMED, nam, con, une, unn + 1))
                if j == n:
                    continue
                cost = float(unexplained[j])
                put((j + 1, i, named), (tot - cost, nam, con, une + cost, unn))
                g = float(gain[j, cols[i - 1]]) if named else 0.0
                if g > 0:  # a further word of the step just named, that names its relation too
                    put((j + 1, i, True), (tot + CONTINUE * g, nam, con + g, une, unn))
                if i < k:
                    g = float(gain[j, cols[i]])
                    put((j + 1, i + 1, True), (tot + g, nam + g, con, une, unn))
    ends = [best[key] for key in ((n, k, False), (n, k, True)) if key in best]
    tot, nam, con, une, unn = max(ends, key=lambda v: v[0])  # (there is one: every step may go unnamed)
    return nam, con, une, unn, tot


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


def features(readings: Sequence[tuple[np.ndarray, np.ndarray]], col: Mapping[str, int],
             paths: Sequence[Sequence[Step]], logp: Sequence[float | None],
             phrase: Sequence[float] | None = None) -> np.ndarray:
    """``[paths, len(FEATURES)]``: each path's features (see the module docstring), its alignment the best over the
    question's reading orders (``readings``: per order, :func:`word_gains` of its words, the likeliest first) and
    the ways of naming its steps, ``named_in_order`` the named gain of the best alignment to the likeliest order;
    ``logp``: the log of the classifier's probability of each path's template, None where it does not know it;
    ``phrase``: the cosine of the masked question and the path's :func:`verbalize` (the best of its forms; 0
    without)."""
    out = np.zeros((len(paths), len(FEATURES)), dtype=np.float64)
    uninformed = -math.log(max(len(paths), 1))
    for p, (steps, lp) in enumerate(zip(paths, logp)):
        best: tuple[float, float, float, int, float] | None = None
        first: tuple[float, float, float, int, float] | None = None
        merged = 0
        for seg in _segments(steps):
            cols = [col[r] for r, _ in seg]
            for k, (gain, unexplained) in enumerate(readings):
                got = align(gain, cols, unexplained)
                if best is None or got[4] > best[4]:
                    best, merged = got, sum(h == 2 for _, h in seg)
                if k == 0 and (first is None or got[4] > first[4]):
                    first = got
        assert best is not None and first is not None
        k = len(steps)
        out[p] = (best[0], best[1], best[2], best[3], k == 1, k == 2, k >= 3, sum(not o for _, o in steps), merged,
                  max(lp, math.log(FLOOR)) if lp is not None else uninformed, lp is None,
                  phrase[p] if phrase is not None else 0.0, first[0])
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
PRIOR = (1.0, 0.5, -1.0, -0.5, 0.0, 0.0, 0.0, -0.2, 0.0, 0.3, 0.0, 2.0, 0.5)


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
