"""The linker's rules for names written with a typo or in lower case, without a server (engine.linking.text):
capitalized runs no candidate covers, the spelling rules inside them, the tie between a name and a tag, and the
capital feature of a candidate in a text written all in lower case. Each case is a learned-path miss of
benchmarks/names.py on MetaQA dev before these rules."""

from __future__ import annotations

import numpy as np

from engine.linking.search import EntityNames
from engine.linking import text as lt
from engine.linking.text import FEATURES, Candidate, LinkModel, _same_edges, _span_candidates, needs_fulltext, spans


def cand(text: str, mention: str, name: str | None = None, distance: float = 0.0, eid: int = 1) -> Candidate:
    a = text.index(mention)
    return Candidate(a, a + len(mention), mention, name or mention, (eid,), distance, name or mention)


def test_capitalized_runs_no_candidate_covers() -> None:
    text = "which movies have the same director of Me and Yu"
    assert lt.unknown_runs(text, []) == [(39, 48)]  # two runs joined by a stop word are one name
    assert lt.unknown_runs(text, [cand(text, "Me and Yu")]) == []
    tully = "what movies did To Tully act in"
    assert lt.unknown_runs(tully, [cand(tully, "Tully")]) == [(16, 24)]  # a candidate inside the run covers it not
    tom = "what movies did Tom Tully act in"
    assert lt.unknown_runs(tom, [cand(tom, "Tom Tully")]) == []
    assert lt.unknown_runs("Heat was directed by whom", []) == []  # a sentence's first word alone
    two = "Tom Hanks and Meg Ryan"
    assert lt.unknown_runs(two, [cand(two, "Tom Hanks"), cand(two, "Meg Ryan")]) == []  # each run known


def test_a_capitalized_stop_word_at_the_edge_of_an_unknown_run_is_the_names() -> None:
    assert not _same_edges("to tully", ["tom tully"])  # "to" as a question's word
    assert _same_edges("to tully", ["tom tully"], "To Tully")  # written as a name's first word
    assert not _same_edges("to tully", ["tom tully"], "to Tully")
    assert not _same_edges("is vincente minnelli", ["vincente minnelli"], "is Vincente Minnelli")


def _names(*names: str) -> dict[int, EntityNames]:
    return {i + 1: EntityNames(i + 1, n, f"k{i + 1}") for i, n in enumerate(names)}


def _linked(text: str, names: dict[int, EntityNames], runs: list[tuple[int, int]]) -> dict[str, str]:
    sp = spans(text)
    return {c.mention: c.name for c in _span_candidates(sp, {}, list(names), names, runs)}


def test_a_short_name_links_by_spelling_inside_an_unknown_run_only() -> None:
    names = _names("Safe", "Tom Tully")
    text = "who starred films for the screenwriter of Saf"
    assert "Saf" not in _linked(text, names, [])  # three letters: too short anywhere else
    assert _linked(text, names, lt.unknown_runs(text, []))["Saf"] == "Safe"
    tully = "what movies did To Tully act in"
    assert "To Tully" not in _linked(tully, names, [])
    assert _linked(tully, names, lt.unknown_runs(tully, []))["To Tully"] == "Tom Tully"
    # a three-letter question word is not in a capitalized run: never linked so
    assert "saf" not in _linked("who starred films for saf", names, lt.unknown_runs("who starred films for saf", []))


def test_a_capitalized_span_prefers_the_capitalized_name_of_a_tie() -> None:
    names = _names("mother", "Mother")  # a MetaQA tag and a film
    text = "the movies that share directors with the movie Mther are written by who"
    got = {c.mention: c for c in _span_candidates(spans(text), {}, list(names), names, [])}
    assert got["Mther"].name == "Mother" and got["Mther"].eids == (1, 2)


def test_a_lower_case_candidate_does_not_hide_an_unknown_word() -> None:
    text = "what are the languages spoken in the movies whose writers also wrote Sword of the east"
    known = {"what", "are", "the", "languages", "spoken", "in", "movies", "whose", "writers", "also", "wrote", "of"}
    cands = [cand(text, "Sword", "sword"), cand(text, "the east", "The East")]
    assert needs_fulltext(text, cands, known)  # "east" lies only in "the east", written in lower case
    assert not needs_fulltext(text, [cand(text, "Sword of the east", "Sword of the Beast", 0.2)], known)


def test_capitalized_runs_joined_by_stop_words_need_the_index() -> None:
    text = "who wrote films that share actors with the film Evil of Frankenstein"
    parts = [cand(text, "Evil"), cand(text, "Frankenstein", eid=2)]
    assert needs_fulltext(text, parts)  # "The Evil of Frankenstein" is no name in process
    assert not needs_fulltext(text, [cand(text, "Evil of Frankenstein", "The Evil of Frankenstein", 0.04)])


def test_in_lower_case_a_question_word_is_not_taken_for_a_capitalized_name() -> None:
    rate = {"what": 0.5, "the": 0.6, "movie": 0.3, "director": 0.4}
    model = LinkModel(np.zeros(len(FEATURES)), rate)
    cap = FEATURES.index("capital")
    text = "what are the movies that have the same actor of 44 inch chest"
    x = model.features([cand(text, "what", "What?")], text)
    assert x[0, cap] == 0.0  # "what" is the question's word, not the film "What?"
    hours = "who directed the desperate hours"
    x = model.features([cand(hours, "the desperate hours", "The Desperate Hours"),
                        cand(hours, "desperate hours", "Desperate Hours")], hours)
    assert list(x[:, cap]) == [0.0, 1.0]
    crazy = "who wrote movies that share directors with the movie crazy heart"
    x = model.features([cand(crazy, "movie crazy", "Movie Crazy"), cand(crazy, "crazy heart", "Crazy Heart")], crazy)
    assert list(x[:, cap]) == [0.0, 1.0]
    # with capitals in the text, the mention's own capital counts, as before
    x = model.features([cand("who directed What?", "What?")], "who directed What?")
    assert x[0, cap] == 1.0


def test_in_lower_case_the_words_around_a_name_choose_its_article() -> None:
    rate = {"the": 0.6, "movie": 0.3, "movie x were": 0.03, "the movie x": 0.06, "the x director": 0.02}
    model = LinkModel(np.zeros(len(FEATURES)), rate)
    cap = FEATURES.index("capital")
    battle = "the movies that share directors with the movie the battle of britain were in which genres"
    x = model.features([cand(battle, "the battle of britain", "The Battle of Britain"),
                        cand(battle, "battle of britain", "Battle of Britain")], battle)
    assert list(x[:, cap]) == [1.0, 1.0]  # "movie X were": the article is the name's (both read as names)
    diary = "who wrote movies that share actors with the movie the diary of a chambermaid"
    x = model.features([cand(diary, "the diary of a chambermaid", "The Diary of a Chambermaid")], diary)
    assert x[0, cap] == 1.0  # "the movie X" at the text's end
    hours = "who directed the desperate hours director"
    assert model.features([cand(hours, "the desperate hours", "The Desperate Hours")], hours)[0, cap] == 0.0
