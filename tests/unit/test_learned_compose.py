"""The path composer (engine.learned.compose): the order a question names its relations in, the relation paths at a
topic (revisits included, the frontier bounded), the monotone alignment of words to a path's steps, the fit of its
weights and their file form."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from engine.learned.compose import (FEATURES, FLOOR, Composer, RelationNames, align, chain_steps, features,
                                    fit_composer, path_template, reading_words, topic_paths, turned_by_another,
                                    word_gains)
from engine.learned.generator import FUNCTION_WORDS, RelationAligner, relation_words
from engine.linking.relations import compound_head
from engine.learned.templates import Template, chain


@pytest.mark.parametrize("masked,orders", [
    ("the place of birth of X 's children 's mother ?", [["children", "mother", "birth", "place"]]),
    ("what is the gender of darling of X ?", [["darling", "gender"]]),
    ("X 's place of birth ?", [["place", "birth"]]),
    ("X's spouse's spouse's spouse?", [["spouse", "spouse", "spouse"]]),
    # a name after "'s" runs to the next function word ("X 's son die": son, die)
    ("what city did X 's son die ?", [["son", "die", "city"]]),
    ("who did X 's father marry ?", [["father", "marry"]]),
    # the words after a topic closed by a function word come last; right after it, first
    ("when were the films directed by X released", [["directed", "films", "released"]]),
    ("the films directed by X were written by who", [["directed", "films", "written"]]),
    # a participle between a copula and "as" names nothing
    ("who is listed as director of X written movies", [["written", "movies", "director"]]),
    ("what genres are the films X acted in", [["acted", "films", "genres"]]),
    ("where did the father of X die ?", [["father", "die"]]),
    ("the children of the ones that has X as profession ?", [["profession", "has", "children"]]),
    ("the gender of the things X was a place of death in ?", [["place", "death", "gender"]]),
    ("what gender is X 's other half ?", [["half", "gender"]]),
    ("who directed the films", [["films", "directed"]]),  # no mask: from the last word backwards
])
def test_reading_words_follow_the_walk_from_the_topic(masked: str, orders: list[list[str]]) -> None:
    got = reading_words(masked, FUNCTION_WORDS)
    assert got[0] == orders[0]  # the likeliest order first; the plain orders after it, each once
    assert len(got) == len({tuple(o) for o in got}) <= 3
    assert all(sorted(o) == sorted(orders[0]) for o in got)


def test_chain_steps_walk_a_chain_from_its_topic_and_refuse_other_shapes() -> None:
    t = chain(["children", "parents", "gender"], [True, False, True])
    assert chain_steps(t) == [("children", True), ("parents", False), ("gender", True)]
    assert chain_steps(Template((("U1", "directed_by", "T1"),))) == [("directed_by", False)]
    two_topics = Template((("U1", "directed_by", "T1"), ("U1", "starred_actors", "T2")))
    star = Template((("T1", "a", "U1"), ("U1", "b", "U2"), ("U1", "c", "U3")))
    assert chain_steps(two_topics) is None and chain_steps(star) is None
    # the known template is used (its type hints kept), another chain is made
    known = Template(t.triples, {"U3": "person"})
    assert path_template(chain_steps(t) or [], {known: known}).types == {"U3": "person"}
    assert path_template([("spouse", True)], {}) == Template((("T1", "spouse", "U1"),))


class Graph:
    """Triples (head, relation, tail) as the :data:`Neighbours` the composer reads, counting what it is asked."""

    def __init__(self, triples: Sequence[tuple[int, str, int]]) -> None:
        self.triples = list(triples)
        self.asked: list[list[int]] = []

    def __call__(self, eids: Sequence[int]) -> Mapping[int, Sequence[tuple[str, bool, Sequence[int]]]]:
        self.asked.append(list(eids))
        out: dict[int, dict[tuple[str, bool], list[int]]] = {}
        for h, r, t in self.triples:
            if h in eids:
                out.setdefault(h, {}).setdefault((r, True), []).append(t)
            if t in eids:
                out.setdefault(t, {}).setdefault((r, False), []).append(h)
        return {e: [(r, o, ns) for (r, o), ns in by.items()] for e, by in out.items()}


def test_topic_paths_are_the_relation_paths_at_the_topic_shortest_first_revisits_included() -> None:
    g = Graph([(1, "spouse", 2), (2, "gender", 3), (1, "children", 4), (4, "parents", 1), (1, "gender", 3)])
    paths = topic_paths(g, [1], max_hops=3)
    assert len(g.asked) == 3  # one read per hop
    assert [len(p) for p in paths] == sorted(len(p) for p in paths)
    one = {p for p in paths if len(p) == 1}
    assert one == {(("spouse", True),), (("children", True),), (("gender", True),), (("parents", False),)}
    assert (("spouse", True), ("gender", True)) in paths
    # X's children's parents: back to X, and on from there (X's children's parents' spouse)
    assert (("children", True), ("parents", True)) in paths
    assert (("children", True), ("parents", True), ("spouse", True)) in paths
    # a path that is not in the KG is not made
    assert (("gender", True), ("spouse", True)) not in paths
    assert len(topic_paths(g, [1], max_hops=3, limit=5)) == 5


def test_topic_paths_follow_at_most_the_frontier_per_path() -> None:
    hub = [(0, "member", i) for i in range(1, 200)] + [(i, "born_in", 1000 + i) for i in range(1, 200)]
    g = Graph(hub)
    paths = topic_paths(g, [0], max_hops=2, frontier=10)
    assert (("member", True), ("born_in", True)) in paths
    assert len(g.asked[1]) == 10  # the second hop reads 10 members, not 199


def test_the_alignment_explains_each_word_by_one_step_in_order() -> None:
    # reading words: darling, gender; relations spouse (0), gender (1), children (2)
    sims = np.array([[0.31, 0.10, 0.26], [0.20, 1.00, 0.15]], dtype=np.float32)
    gain, unexplained = word_gains(sims)
    assert gain[0].argmax() == 0 and gain[1].argmax() == 1
    assert unexplained[1] > 0  # "gender" names a relation clearly: leaving it unexplained costs
    both = align(gain, [0, 1], unexplained)
    spouse = align(gain, [0], unexplained)
    backwards = align(gain, [1, 0], unexplained)
    assert both[4] > spouse[4] and both[4] > backwards[4]
    assert both[3] == 0 and spouse[2] > 0  # named steps: both; spouse alone leaves "gender" unexplained
    # no words: every step unnamed
    empty = align(np.zeros((0, 3), np.float32), [0, 1], np.zeros(0, np.float32))
    assert empty[3] == 2 and empty[0] == 0


@given(st.lists(st.lists(st.floats(-2, 2), min_size=3, max_size=3), min_size=0, max_size=6),
       st.lists(st.integers(0, 2), min_size=1, max_size=3))
@settings(max_examples=80, deadline=None)
def test_the_alignment_is_the_best_over_all_monotone_assignments(rows: list[list[float]], cols: list[int]) -> None:
    """Against brute force: each word is unexplained (-1), or names step i (the first word of step i) or continues
    the step it named last (where it names that step's relation too); steps in order, each started at most once."""
    import itertools

    from engine.learned.compose import CONTINUE, UNNAMED

    gain = np.array(rows, dtype=np.float32).reshape(len(rows), 3)
    unexplained = np.abs(gain).max(1) if len(rows) else np.zeros(0, np.float32)
    best = -math.inf
    for labels in itertools.product(range(-1, len(cols)), repeat=len(rows)):
        named = [i for i in labels if i >= 0]
        if named != sorted(named):
            continue
        total, started = 0.0, set()
        for j, i in enumerate(labels):
            if i < 0:
                total -= float(unexplained[j])
            elif i in started:
                if gain[j, cols[i]] <= 0:
                    break  # a word continues a step only where it names its relation
                total += CONTINUE * float(gain[j, cols[i]])
            else:
                started.add(i)
                total += float(gain[j, cols[i]])
        else:
            total -= UNNAMED * (len(cols) - len(started))
            best = max(best, total)
    assert align(gain, cols, unexplained)[4] == pytest.approx(best, abs=1e-5)


def test_features_read_a_relation_walked_there_and_back_as_one_step() -> None:
    # "the films that share a director with X": one word, two hops of directed_by
    sims = np.array([[0.9, 0.2]], dtype=np.float32)  # director; relations directed_by, starred_actors
    gain, unexplained = word_gains(sims)
    col = {"directed_by": 0, "starred_actors": 1}
    paths = [[("directed_by", True), ("directed_by", False)], [("directed_by", True)],
             [("starred_actors", False), ("starred_actors", True)]]
    f = features([(gain, unexplained)], col, paths, [math.log(0.5), None, math.log(1e-9)])
    at = {n: i for i, n in enumerate(FEATURES)}
    assert f[0, at["there_and_back"]] == 1 and f[0, at["unnamed_steps"]] == 0 and f[0, at["two_hops"]] == 1
    assert f[1, at["one_hop"]] == 1 and f[1, at["unseen"]] == 1 and f[1, at["classifier_logp"]] == -math.log(3)
    assert f[2, at["classifier_logp"]] == math.log(FLOOR) and f[2, at["unseen"]] == 0
    assert f[0, at["classifier_logp"]] == pytest.approx(math.log(0.5))
    assert f[0, at["named"]] > f[2, at["named"]]


def test_fit_composer_learns_which_feature_marks_the_gold_path() -> None:
    rng = np.random.default_rng(0)
    at = {n: i for i, n in enumerate(FEATURES)}
    examples = []
    for _ in range(60):
        f = rng.normal(size=(6, len(FEATURES)))
        f[:, at["unseen"]] = 0
        g = int(rng.integers(6))
        f[g, at["inverse_hops"]] += 3.0  # here the gold path is the one with the most inverse hops
        examples.append((f, g))
    comp = fit_composer(examples, l2=1e-3, hide=0.0)
    assert comp is not None and comp.weights[at["inverse_hops"]] > 1.0
    right = sum(int(np.argmax(comp.scores(f))) == g for f, g in examples)
    assert right >= 55
    p = comp.probabilities(examples[0][0])
    assert p.shape == (6,) and p.sum() == pytest.approx(1.0)
    assert fit_composer([]) is None and fit_composer([(np.zeros((1, len(FEATURES))), 0)]) is None


def test_hidden_gold_templates_teach_the_composer_to_rank_unseen_paths() -> None:
    """When the gold path's template is always known to the classifier, the fit learns that unseen paths are never
    right; hiding it for a share of the questions keeps the alignment able to choose one."""
    at = {n: i for i, n in enumerate(FEATURES)}
    examples = []
    for k in range(40):
        f = np.zeros((3, len(FEATURES)))
        g = k % 3
        f[g, at["named"]] = 1.0
        f[:, at["classifier_logp"]] = math.log(1 / 3)
        f[(g + 1) % 3, at["unseen"]] = 1.0  # a path the classifier never saw, never the gold one
        f[(g + 1) % 3, at["classifier_logp"]] = -math.log(3)
        examples.append((f, g))
    shown, hidden = fit_composer(examples, hide=0.0), fit_composer(examples, hide=0.5, seed=1)
    assert shown is not None and hidden is not None
    assert hidden.weights[at["unseen"]] > shown.weights[at["unseen"]]
    unseen_gold = np.zeros((2, len(FEATURES)))
    unseen_gold[0, at["named"]], unseen_gold[0, at["unseen"]] = 1.0, 1.0
    unseen_gold[0, at["classifier_logp"]] = -math.log(2)
    unseen_gold[1, at["classifier_logp"]] = math.log(0.5)
    assert int(np.argmax(hidden.scores(unseen_gold))) == 0


def test_composer_round_trips_and_refuses_what_it_is_not() -> None:
    comp = Composer(tuple(float(i) for i in range(len(FEATURES))))
    assert Composer.from_json(comp.to_json()) == comp
    with pytest.raises(ValueError, match="features"):
        Composer.from_json({"features": ["named"], "weights": [1.0]})
    with pytest.raises(ValueError, match="finite"):
        Composer.from_json({"features": list(FEATURES), "weights": [math.nan] * len(FEATURES)})
    with pytest.raises(ValueError, match="finite"):
        Composer.from_json({"features": list(FEATURES), "weights": [1.0]})


def test_readings_are_compared_by_the_composed_score_and_the_linking_confidence() -> None:
    """The linker's sure reading (a full name) against a common word matched within a typo that the classifier
    prefers: the composer's best path score plus the log of the confidence decides, and the compositions are kept
    for the caller."""
    from types import SimpleNamespace

    from engine.learned.generator import PatternGenerator
    from engine.linking.text import LinkedTopic

    name = LinkedTopic("Zoe Bell", "Zoe Bell", (1,), 0.88, 41, 49)
    typo = LinkedTopic("person", "Persona", (2,), 0.03, 6, 12)
    best_scores = {1: 2.0, 2: 4.0}  # the composer's best path score at each topic

    def composition(text: str, linked: Sequence[object], q: np.ndarray) -> object:
        eid = linked[0].eids[0]  # type: ignore[attr-defined]
        return ["t"], np.array([[best_scores[eid]], [0.0]]), float(q.sum())

    fake = SimpleNamespace(composition=composition, ckpt=SimpleNamespace(composer=Composer((1.0,))))
    p, ok = np.array([0.9, 0.1]), np.array([True])
    kept: dict[int, object] = {}
    scored = {1: (p, ok), 0: (p, ok)}  # the classifier's choice first, then the linker's first reading
    # 2 + log .88 > 4 + log .03: the sure name wins though the typo's path scores higher
    assert PatternGenerator._composed_choice(fake, "q", [[name], [typo]], scored, kept) == 0  # type: ignore[arg-type]
    assert set(kept) == {0, 1}
    best_scores[2] = 8.0  # far better explained at the other topic: it wins
    assert PatternGenerator._composed_choice(fake, "q", [[name], [typo]], scored, {}) == 1  # type: ignore[arg-type]
    # one of them not composed (several topics): the classifier's choice stays
    fake.composition = lambda text, linked, q: None if len(linked) > 1 else composition(text, linked, q)
    both = [[name], [typo, name]]
    assert PatternGenerator._composed_choice(fake, "q", both, scored, {}) == 1  # type: ignore[arg-type]


def test_a_turn_back_by_another_relation_is_counted() -> None:
    """Out to the writer, back in by the director: a turn the forward walk of the synthetic questions never takes;
    back by the same relation ("share a writer"), or backwards from the start, is no such turn."""
    assert turned_by_another([("written_by", True), ("directed_by", False)]) == 1
    assert turned_by_another([("written_by", True), ("written_by", False), ("directed_by", True)]) == 0
    assert turned_by_another([("starred_actors", False), ("directed_by", True)]) == 0
    assert turned_by_another([("a", True), ("b", False), ("c", True), ("d", False)]) == 2
    f = features([word_gains(np.array([[0.9, 0.1, 0.0]], dtype=np.float32))], {"written_by": 0, "directed_by": 1},
                 [(("written_by", True), ("directed_by", False))], [None])
    assert f[0, FEATURES.index("turned_by_another")] == 1


def _toy_encode(texts: Sequence[str]) -> np.ndarray:
    """A vector per text from its letters (no model): texts sharing no letter are orthogonal."""
    out = np.zeros((len(texts), 26), np.float32)
    for i, t in enumerate(texts):
        for c in t.lower():
            if "a" <= c <= "z":
                out[i, ord(c) - 97] += 1.0
    return out


def test_a_compound_word_names_at_least_what_its_head_names() -> None:
    names = RelationNames(["written_by", "starred_actors", "has_genre"], _toy_encode, relation_words)
    assert names.head("screenwriter") == "writer" and names.head("screenwriters") == "writer"
    # the part before the head is a word of its own, and the head a name of four letters or more
    assert names.head("factor") is None and names.head("writer") is None and names.head("films") is None
    vec = np.ones((1, 26), np.float32)  # near nothing in particular
    plain = names.sims_one(vec)[0]
    read = names.sims_one(vec, ["screenwriter"])[0]
    head = names.sims_one(_toy_encode(["writer"]))[0]
    assert read[0] == pytest.approx(max(plain[0], head[0])) and read[0] > plain[0]
    assert (read >= plain).all()
    assert names.sims_one(vec, ["quietly"])[0].tolist() == plain.tolist()  # no head: the word's own row


def test_the_classifier_aligner_reads_a_compound_as_at_least_its_head() -> None:
    aligner = RelationAligner(["written_by", "starred_actors"], _toy_encode)
    plain, compound = aligner.word_sims(["X quietly", "X screenwriters"])
    head = aligner.word_sims(["X writer"])[0]
    assert (compound[0] >= head[0] - 1e-6).all() and compound[0, 0] > plain[0, 0]
    vec = _toy_encode(["screenwriters"])
    assert np.allclose(aligner.sims_one(vec, ["screenwriters"]), compound, atol=1e-6)  # as in service
    assert (aligner.sims_one(vec) <= aligner.sims_one(vec, ["screenwriters"]) + 1e-6).all()
    assert compound_head("person", ["son", "parent"]) is None and compound_head("grandparents", ["parent"]) == "parent"
