"""How the composer reads a question's structure (engine.learned.reading): chunks, kind nouns, and what the alignment
makes of them (a word continuing a step from another chunk, a chunk left unexplained, one chunk naming two steps),
and the weak-synonym variants the composer's fit learns from (engine.learned.compose)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from engine.learned.compose import (FEATURES, PathInputs, align, features, name_words, synonym_examples,
                                    weak_synonym, word_gains)
from engine.learned.generator import FUNCTION_WORDS
from engine.learned.reading import (APART, OF, SAME, is_participle, kind_nouns, predicate_verbs, reading_positions,
                                    reading_words, tokens, word_roles)


def roles_of(masked: str) -> list:
    toks, orders = reading_positions(masked, FUNCTION_WORDS)
    kinds = kind_nouns(toks, FUNCTION_WORDS)
    verbs = predicate_verbs(toks, FUNCTION_WORDS, kinds)
    return [word_roles(toks, o, kinds, verbs) for o in orders]


def test_reading_positions_are_the_reading_words_as_positions() -> None:
    masked = "the place of birth of X 's children 's mother ?"
    toks, orders = reading_positions(masked, FUNCTION_WORDS)
    assert [[toks[i] for i in o] for o in orders] == reading_words(masked, FUNCTION_WORDS)
    assert reading_words(masked, FUNCTION_WORDS)[0] == ["children", "mother", "birth", "place"]
    # orders are distinct by their words, not their positions
    assert len(reading_positions("the daughter of X 's daughter ?", FUNCTION_WORDS)[1]) == 1


@pytest.mark.parametrize("masked,kinds", [
    ("what types are the movies directed by X", ["movies"]),  # the head of a participial clause
    ("what were the release dates of X written movies", ["movies"]),  # a noun a participle modifies
    ("the films that share actors with the film X", ["films", "film"]),  # a relative clause; set before the topic
    ("how X 's mom died ?", []),  # a noun of a possessive names a relation
    ("the heir of X 's daughter", []),
    ("where is X 's mother living ?", []),
])
def test_kind_nouns_say_what_kind_an_entity_is(masked: str, kinds: list[str]) -> None:
    toks, _ = reading_positions(masked, FUNCTION_WORDS)
    assert sorted(toks[i] for i in kind_nouns(toks, FUNCTION_WORDS)) == sorted(kinds)


def test_participles_by_their_spelling() -> None:
    assert all(is_participle(w) for w in ("directed", "starred", "written", "spoken", "given"))
    assert not any(is_participle(w) for w in ("children", "director", "red", "mom"))


def test_word_roles_join_words_of_one_chunk_by_of_or_apart() -> None:
    heir = roles_of("the heir of X 's daughter")[0]
    assert heir.words == ("daughter", "heir") and heir.joins == (APART, APART)  # the topic stands between them
    years = roles_of("what were the release years of the movies acted by X")[0]
    assert years.words == ("acted", "movies", "years", "release")
    # "movies" is a kind noun: it joins the words on either side of it
    assert years.joins == (APART, SAME, SAME, SAME) and years.kinds == (False, True, False, False)
    birth = roles_of("the place of birth of X ?")[0]
    assert birth.words == ("birth", "place") and birth.joins == (APART, OF)
    # the noun of "what/which N" joins the words next to it
    wh = roles_of("which nationality is the spouse of X ?")[0]
    assert wh.words == ("spouse", "nationality") and wh.joins == (APART, SAME)
    # but not across a copula from a noun of the topic's possessive chain: it asks something of the spouse
    wh = roles_of("which nationality is X 's spouse ?")[0]
    assert wh.words == ("spouse", "nationality") and wh.joins == (APART, APART)


def test_a_copula_parts_the_noun_asked_for_from_the_kind_noun_it_asks_about() -> None:
    """"what types are the movies directed by X": "types" asks something of the movies, so it is a chunk of its own
    (which a path must name) rather than one with the kind noun "movies" (which names nothing)."""
    types = roles_of("what types are the movies directed by X")[0]
    assert types.words == ("directed", "movies", "types")
    assert types.joins == (APART, SAME, APART) and types.kinds == (False, True, False)
    # no kind noun after the copula ("what films are directed by X"), or none between: one chunk as before
    assert roles_of("what films are directed by X")[0].joins == (APART, SAME)
    assert roles_of("which person is the director of X")[0].joins == (APART, SAME)


@pytest.mark.parametrize("masked,verbs", [
    ("where does X 's son work for ?", ["work"]),  # the main verb of a question asked with "do"
    ("where did X 's parents die ?", ["die"]),
    ("where is X 's mother living ?", ["living"]),  # a form in -ing after the subject
    ("how X 's mom died ?", ["died"]),  # a past form after the subject
    ("what killed the X 's father ?", ["killed"]),  # a past form after "what"
    ("what genre does the films X directed have ?", []),  # a verb of having names nothing of its own
    ("what is X 's spouse ?", []),  # no verb
    ("what is the sex of X 's darling ?", []),  # a noun in -ing after "'s", not after a noun
    ("which movies did X direct ?", []),  # after the topic, not after a noun
    ("what films are directed by X", []),
])
def test_predicate_verbs_say_something_of_the_subject(masked: str, verbs: list[str]) -> None:
    toks, _ = reading_positions(masked, FUNCTION_WORDS)
    kinds = kind_nouns(toks, FUNCTION_WORDS)
    assert sorted(toks[i] for i in predicate_verbs(toks, FUNCTION_WORDS, kinds)) == sorted(verbs)


def test_a_predicate_verb_is_a_chunk_of_its_own() -> None:
    """"where does X 's son work for": the son's workplace is a step of its own, not a kind of son, so a path of one
    relation leaves the verb's chunk unexplained (or crosses into it) and one that names it by a second step is no
    split."""
    son = roles_of("where does X 's son work for ?")[0]
    assert son.words == ("son", "work") and son.joins == (APART, APART)
    # "what killed": a verb, not the noun of "what N" joining the words next to it
    killed = roles_of("what killed the X 's father ?")[0]
    assert killed.words == ("father", "killed") and killed.joins == (APART, APART)
    # the noun of "what N" still joins the verb ("what city did X 's son die": the city and "die" one step)
    city = roles_of("what city did X 's son die ?")[0]
    assert city.words == ("son", "die", "city") and city.joins == (APART, APART, SAME)
    # children (0), institution (1), gender (2): the workplace named by "work"
    gain, unexplained = _gains([[0.8, 0.2, 0.3], [0.3, 0.45, 0.2]])
    one, two = align(gain, [0], unexplained, son), align(gain, [0, 1], unexplained, son)
    assert one.crossed + one.unexplained_chunks == 1 and two.split == 0 and two.total > one.total


def test_a_participle_linking_a_subject_to_its_noun_is_not_read() -> None:
    """"who is listed as director of X written films": "listed" names nothing (the answer is the director); a
    participle not between a copula and "as" is read as before."""
    assert reading_words("who is listed as director of X written films", FUNCTION_WORDS)[0] == [
        "written", "films", "director"]
    assert reading_words("who was credited as writer of X ?", FUNCTION_WORDS)[0] == ["writer"]
    assert "directed" in reading_words("the films directed by X", FUNCTION_WORDS)[0]


def test_a_kin_word_of_two_generations_is_read_as_the_kin_of_the_kin() -> None:
    assert tokens("the granddaughter of X ?") == ["the", "daughter", "'s", "daughter", "of", "x"]
    assert reading_words("what is the name of the grandson of X 's mother ?", FUNCTION_WORDS)[0] == [
        "mother", "son", "son"]
    assert tokens("the grand-parents of X") == ["the", "parents", "'s", "parents", "of", "x"]
    assert tokens("the grand prize of X") == ["the", "grand", "prize", "of", "x"]  # "grand" alone is a word
    assert tokens("the grandeur of X 's grandstand") == ["the", "grandeur", "of", "x", "'s", "grandstand"]  # no kin


def _gains(rows: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
    return word_gains(np.array(rows, dtype=np.float32))


def test_a_word_of_another_chunk_continuing_a_step_is_a_crossing() -> None:
    # "what is the heir of X 's daughter": daughter, heir; relations children (0), spouse (1), gender (2)
    gain, unexplained = _gains([[0.56, 0.52, 0.2], [0.45, 0.47, 0.2]])
    roles = roles_of("what is the heir of X 's daughter ?")[0]
    one = align(gain, [0], unexplained, roles)
    two = align(gain, [0, 0], unexplained, roles)
    assert one.crossed == 1 or one.unexplained_chunks == 1  # "heir" continues "daughter" or names nothing
    assert two.crossed == 0 and two.unexplained_chunks == 0 and two.total > one.total
    # without the roles the structure is not read: continuing costs nothing more
    plain = align(gain, [0], unexplained)
    assert plain.crossed == 0 and plain.unexplained_chunks == 0 and plain.total >= one.total


def test_of_joins_the_words_of_one_relation_name_without_a_crossing() -> None:
    # "what is the place of birth of X": birth, place; relations place_of_birth (0), location (1)
    gain, unexplained = _gains([[0.8, 0.3], [0.6, 0.55]])
    roles = roles_of("what is the place of birth of X ?")[0]
    assert roles.joins == (APART, OF)
    names = name_words({"place_of_birth": 0, "location": 1})
    got = align(gain, [0], unexplained, roles, names)
    assert got.crossed == 0 and got.continued > 0
    # two nouns of different names joined by "of" ("the mother of parents of X") cross
    mother = roles_of("the mother of parents of X ?")[0]
    gain, unexplained = _gains([[0.9, 0.2], [0.8, 0.2]])
    assert align(gain, [0], unexplained, mother, name_words({"parents": 0, "gender": 1})).crossed == 1


def test_two_steps_named_in_one_chunk_are_a_split_and_kind_nouns_name_only_the_last_step() -> None:
    # "what were the release years of the movies acted by X": acted, movies, years, release; relations
    # starred_actors (0), release_year (1), genre (2)
    gain, unexplained = _gains([[0.7, 0.2, 0.25], [0.5, 0.45, 0.58], [0.2, 0.57, 0.3], [0.2, 0.77, 0.3]])
    roles = roles_of("what were the release years of the movies acted by X")[0]
    right = align(gain, [0, 1], unexplained, roles)
    back = align(gain, [0, 1, 1], unexplained, roles)  # the release year there and back, one word a step
    assert back.split >= 1 or back.unnamed >= 1
    assert right.split == 0 and right.total > back.total
    # "movies" (a kind noun) may not name the middle step of starred_actors, genre, release_year
    middle = align(gain, [0, 2, 1], unexplained, roles)
    assert middle.unnamed >= 1 and middle.unexplained == pytest.approx(0.0)


def _inputs() -> PathInputs:
    # "what is the sex of X 's darling": darling, sex; spouse (0), gender (1), children (2)
    gain, unexplained = _gains([[0.31, 0.2, 0.26], [0.5, 0.56, 0.2]])
    roles = roles_of("what is the sex of X 's darling ?")
    paths = [(("spouse", True),), (("spouse", True), ("gender", True)), (("children", True), ("gender", True))]
    return PathInputs([(gain, unexplained)] * len(roles), roles, {"spouse": 0, "gender": 1, "children": 2}, paths,
                      [math.log(0.2), math.log(0.7), None], [0.6, 0.64, 0.5])


def test_features_count_what_the_structure_says_against_a_path() -> None:
    inp = _inputs()
    f = inp.features()
    at = {n: i for i, n in enumerate(FEATURES)}
    assert f.shape == (3, len(FEATURES))
    assert f[0, at["crossed"]] + f[0, at["unexplained_chunks"]] >= 1  # spouse alone leaves "sex" out
    assert f[1, at["crossed"]] == 0 and f[1, at["unexplained_chunks"]] == 0 and f[1, at["split"]] == 0
    same = features(inp.readings, inp.col, inp.paths, inp.logp, inp.phrase, inp.roles)
    assert np.array_equal(f, same)


def test_a_weak_synonym_shrinks_the_words_of_one_gold_step_and_moves_the_classifier_to_the_shorter_path() -> None:
    inp = _inputs()
    weak = None
    rng = random.Random(3)
    while weak is None:
        weak = weak_synonym(inp, 1, rng)
    assert weak.logp[0] is not None and weak.logp[1] is not None
    assert weak.logp[1] < math.log(0.7) - 1.9 and weak.logp[0] >= math.log(0.7)  # the mass on spouse alone
    g0, g1 = inp.readings[0][0], weak.readings[0][0]
    changed = [j for j in range(len(g0)) if not np.allclose(g0[j], g1[j])]
    assert len(changed) == 1 and np.all(np.abs(g1[changed[0]]) <= np.abs(g0[changed[0]]) + 1e-9)
    assert inp.logp == [math.log(0.2), math.log(0.7), None]  # the original is left as it was
    # a path of one step has no variant
    assert weak_synonym(inp, 0, random.Random(0)) is None


def test_synonym_examples_are_a_share_of_the_examples_each_with_its_gold_row() -> None:
    examples = [(_inputs(), 1)] * 40
    half, every = synonym_examples(examples, share=0.5, seed=1), synonym_examples(examples, share=1.0, seed=1)
    assert all(g == 1 and f.shape == (3, len(FEATURES)) for f, g in half + every)
    # a variant drops the step its synonym names: only the gender step has a shorter path (spouse alone) here
    assert 0 < len(half) < len(every) < 40
    assert synonym_examples(examples, share=0.0) == []


def test_a_hyphenated_compound_is_one_reading_word() -> None:
    assert reading_words("which screenwriters co-wrote films with X", FUNCTION_WORDS)[0] == [
        "films", "co-wrote", "screenwriters"]
    assert tokens("X 's co-star 's mother") == ["x", "'s", "co-star", "'s", "mother"]
