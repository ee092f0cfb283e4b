"""Synthetic questions worded as people ask them (no LLM): relation names in several forms, forward and inverse
hops, possessives only where they cannot be misread, several distinct wordings per sample."""

from __future__ import annotations

import random
import re

from hypothesis import assume, given, settings, strategies as st

from engine.evaluation.wording import (agent_noun, chain_wording, conjunction_wording, plural, relation_forms,
                                       role_verbs, singular, wordings)


def test_relation_forms() -> None:
    d = relation_forms("directed_by")
    assert d.phrase == "directed by" and d.nouns == ("director",) and d.participle == "directed"
    assert d.passive == "directed by"
    assert relation_forms("written_by").nouns == ("writer",)
    assert relation_forms("release_year").nouns == ("release year", "year")
    assert relation_forms("has_genre").nouns == ("genre",)
    assert relation_forms("children").nouns == ("children", "child")
    assert relation_forms("place_of_birth").nouns == ("place of birth",)  # no "birth"
    assert relation_forms("placeOfBirth").nouns == ("place of birth",)
    assert relation_forms("http://schema.org/author").nouns == ("author",)
    assert [agent_noun(w) for w in ("directed", "written", "produced", "owned", "by")] == \
        ["director", "writer", "producer", "owner", None]
    assert singular("parents") == "parent" and singular("children") == "child" and singular("class") == "class"
    assert plural("child") == "children" and plural("city") == "cities" and plural("children") == "children"


def test_a_chain_is_worded_hop_by_hop_in_its_direction() -> None:
    rng = random.Random(0)
    directed, year = relation_forms("directed_by"), relation_forms("release_year")
    seen = {chain_wording(["Heat"], [(directed, True)], rng) for _ in range(200)}
    assert {"who directed Heat?", "what is Heat's director?", "what is the director of Heat?"} <= seen
    inverse = {chain_wording(["Michael Mann"], [(directed, False)], rng) for _ in range(200)}
    assert "which ones were directed by Michael Mann?" in inverse and "what did Michael Mann direct?" in inverse
    assert not any("Michael Mann's director" in q for q in inverse)  # the seed is the director here
    two = {chain_wording(["Heat"], [(directed, True), (directed, False), (year, True)], rng) for _ in range(300)}
    assert any(re.search(r"year of the ones (directed by|whose director is) (the director of Heat|Heat's director)", q)
               for q in two)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["spouse", "nationality", "children", "parents", "place_of_birth"]),
       st.sampled_from(["spouse", "nationality", "children", "parents", "place_of_birth"]))
def test_a_possessive_never_follows_an_of_phrase(seed: int, first: str, second: str) -> None:
    """"the spouse of X's nationality" reads as the spouse of (X's nationality): a possessive is written only
    after a name or another possessive, so no wording of "X's spouse's nationality" says it the other way."""
    assume(first != second)  # the same relation twice reads the same either way
    r1, r2 = relation_forms(first), relation_forms(second)
    q = chain_wording(["Zed Q"], [(r1, True), (r2, True)], random.Random(seed))
    assert "Zed Q" in q
    for n1 in r1.nouns:
        for n2 in r2.nouns:
            assert f"{n1} of Zed Q's {n2}" not in q, q


def test_conjunctions_and_the_number_of_wordings() -> None:
    rng = random.Random(3)
    q = conjunction_wording([("Tom Cruise", relation_forms("starred_actors"), True),
                             ("Michael Mann", relation_forms("directed_by"), True)], rng)
    assert "Tom Cruise" in q and "Michael Mann" in q and " and " in q
    drawn = iter(["a", "b", "a", "c", "d"])
    assert wordings(["What is X?"], lambda: next(drawn), 4) == ["What is X?", "A", "B", "C"]
    # distinct, the drawn ones sentence-cased; it gives up after a few draws that bring nothing new
    assert wordings(["one", "one", "two"], lambda: "two", 5, tries=2) == ["one", "two", "Two"]


def test_a_relation_walked_there_and_back_is_worded_as_one_step() -> None:
    """X -directed_by-> D <-directed_by- A: "the ones that share a director with X", not "the ones whose director
    is the director of X" only; X <-starred_actors- F -starred_actors-> A: "the co-actors of X"."""
    rng = random.Random(5)
    directed, starred, genre = (relation_forms(r) for r in ("directed_by", "starred_actors", "has_genre"))
    shared = {chain_wording(["Heat"], [(directed, True), (directed, False), (genre, True)], rng) for _ in range(400)}
    assert any("share directors with Heat" in q or "same director as Heat" in q for q in shared)
    assert any("whose directors also directed Heat" in q for q in shared)
    assert any("the director of Heat" in q for q in shared)  # the hop-by-hop wording stays among them
    costars = {chain_wording(["Tom Hanks"], [(starred, False), (starred, True)], rng) for _ in range(400)}
    assert any("co-actors of Tom Hanks" in q or "together with Tom Hanks" in q for q in costars)
    # "what does X appear in" asks the films, not the co-stars: the co-stars as one step never "appear" ("the actors
    # of the ones X appeared in", hop by hop, is worded)
    assert not any(re.search(r"appear\w* (together|with)", q) for q in costars)
    assert all("Heat" in q for q in shared) and all("Tom Hanks" in q for q in costars)


def test_more_forms_of_a_relation() -> None:
    """A relation named by a leading participle (starred_actors) reads "starred by", "starred in"; a year asks
    "when"."""
    s = relation_forms("starred_actors")
    assert s.participle == "starred" and s.leading and s.nouns == ("actors", "actor") and s.passive == "starred by"
    rng = random.Random(2)
    films = {chain_wording(["Tom Hanks"], [(s, False)], rng) for _ in range(600)}
    assert "which ones were starred by Tom Hanks?" in films and "what did Tom Hanks star in?" in films
    years = {chain_wording(["Heat"], [(relation_forms("release_year"), True)], rng) for _ in range(200)}
    assert "when was Heat released?" in years and "when did Heat release?" in years
    assert not any("star in in" in q or "starred in in" in q for q in films)


def test_the_role_of_an_actor_or_a_writer_is_worded_with_the_verbs_people_use() -> None:
    """"what does X appear in", "the films X acted in": the verbs of the role the relation's far end plays, for a
    hop that enters it; a relation with no participle has none, and a forward hop keeps its own verb."""
    starred, written, genre = (relation_forms(r) for r in ("starred_actors", "written_by", "has_genre"))
    assert ("appear", "appeared") in role_verbs(starred) and ("pen", "penned") in role_verbs(written)
    assert role_verbs(genre) == () and role_verbs(relation_forms("spouse")) == ()
    rng = random.Random(2)
    one = {chain_wording(["Tom Hanks"], [(starred, False)], rng) for _ in range(400)}
    assert {"what does Tom Hanks appear in?", "what did Tom Hanks act in?", "what did Tom Hanks star in?"} <= one
    assert "Tom Hanks starred in which ones?" in one and not any("Tom Hanks starred which" in q for q in one)
    two = {chain_wording(["Tom Hanks"], [(starred, False), (genre, True)], rng) for _ in range(400)}
    assert any("the ones Tom Hanks acted in" in q for q in two)
    wrote = {chain_wording(["Ang Lee"], [(written, False)], rng) for _ in range(300)}
    assert "Ang Lee wrote which ones?" in wrote and not any("Ang Lee written" in q for q in wrote)
    forward = {chain_wording(["Heat"], [(starred, True)], rng) for _ in range(300)}
    assert not any("appear" in q or "acted" in q for q in forward)  # "who appeared in Heat" is not worded here
