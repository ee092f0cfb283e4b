"""The linker's in-process names (engine.linking.local): exact and folded look-ups over a replica's names, and when
the linker must still ask the full-text index (engine.linking.text.needs_fulltext)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.linking.local import LocalNames, local_names
from engine.linking.text import Candidate, needs_fulltext


class Names:
    """A replica's names as LocalNames reads them (entity numbers 0..n-1, eids 10 apart)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.n = len(names)
        self.eids = np.arange(self.n, dtype=np.int64) * 10 + 10

    def name(self, i: int) -> str:
        return self.names[i]

    def key_of(self, i: int) -> str:
        return f"key{i}"


NAMES = Names(["Heat", "heat", "Amélie", "Hello, Dolly!", "Tom", "Tom Hanks", "1975", "The Matrix"])


def test_exact_names_and_folded_names_are_found_in_process() -> None:
    by_text, by_name, names = LocalNames(NAMES).lookup(["Heat", "HEAT", "amelie", "hello dolly", "Tom Hnaks", "!"])
    assert by_name == [[10], [], [], [], [], []]  # written exactly as a name is: "Heat" only
    assert by_text == [[10, 20], [10, 20], [30], [40], [], []]  # the same once folded
    assert names[30].name == "Amélie" and names[30].key == "key2"


def test_one_index_per_replica() -> None:
    assert local_names(NAMES) is local_names(NAMES)
    assert local_names(Names(["Heat"])) is not local_names(NAMES)


def cand(text: str, mention: str, name: str | None = None) -> Candidate:
    a = text.index(mention)
    return Candidate(a, a + len(mention), mention, name or mention, (1,), 0.0)


@pytest.mark.parametrize("text, mentions, needed", [
    ("what movies did Tom Hanks star in", ["Tom Hanks"], False),
    ("which film of 1975 did Steven Spielberg direct", ["1975", "Steven Spielberg"], False),
    ("What did Heat win", ["Heat"], False),                  # a sentence's capitalized first word is no name
    ("what movies did Tom Hnaks star in", ["Tom"], True),    # a run of capitals that no one candidate holds whole
    ("which film of 1975 did Steven Spielberg direct", ["1975"], True),
    ("who directed heat", ["heat"], True),                   # no capitals: they cannot say where names are
    ("what movies did Tom Hanks star in", [], True),          # nothing found
    ("who starred in Heat.", ["Heat"], False),               # a run's trailing full stop is no part of the name
])
def test_the_fulltext_index_is_asked_only_for_a_name_left_unknown(text: str, mentions: list[str],
                                                                    needed: bool) -> None:
    assert needs_fulltext(text, [cand(text, m) for m in mentions]) is needed


KNOWN = frozenset("what movies did star in who wrote share directors with the movie of a".split())


@pytest.mark.parametrize("text, mentions, needed", [
    ("what movies did Kim Myers star in", ["Kim Myers"], False),
    ("what movies did Kim yers star in", ["Kim"], True),     # a typo took the name's capital: "yers" is no known word
    ("who wrote movies that share directors with the movie Crazy eHart", ["Crazy"], True),
    ("who wrote movies that share directors with the movie Farewell to hte King", ["Farewell"], True),
    ("who wrote movies that share directors with the movie Crazy Heart", ["Crazy Heart"], True),  # "that": unknown
])
def test_a_word_neither_known_nor_in_a_candidate_asks_the_fulltext_index(text: str, mentions: list[str],
                                                                         needed: bool) -> None:
    """Given the words the texts are made of besides their names (the generator's training questions), a word that
    is neither (a name's word whose typo took its capital away) asks the full-text index; without them, only the
    runs of capitals do."""
    cands = [cand(text, m) for m in mentions]
    assert needs_fulltext(text, cands, KNOWN) is needed
    if mentions == ["Kim"]:
        assert needs_fulltext(text, cands) is False  # the capitals alone miss it
