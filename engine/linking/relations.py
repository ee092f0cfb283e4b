"""How a relation is named in words: :class:`RelationForms` of a relation name.

A relation name is verbalised in several forms: its words (``place_of_birth`` -> "place of birth"), its head noun
("year" of ``release_year``), singular and plural ("child", "children"), and for a relation written as a participle
(``directed_by``) the agent noun ("director"), the active verb ("directed") and the passive ("directed by"). The
synthetic questions (:mod:`engine.evaluation.wording`) word relations in these forms, and the learned path
composer (:mod:`engine.learned.compose`) reads them back out of a question, a compound word as its head
(:func:`compound_head`: "screenwriter" names what "writer" names).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["HEAD", "HEAD_PART", "RelationForms", "agent_noun", "compound_head", "compound_heads", "naming_forms",
           "plural", "relation_forms", "singular"]

#: a compound's head: a name of one word of HEAD letters or more, after a part of HEAD_PART letters or more
HEAD, HEAD_PART = 4, 3

_IRREGULAR_PLURAL = {"child": "children", "person": "people", "man": "men", "woman": "women", "wife": "wives",
                     "life": "lives"}
_IRREGULAR_SINGULAR = {v: k for k, v in _IRREGULAR_PLURAL.items()}
_PREFIXES = ("has", "is", "in", "of", "was", "the")


def _words(name: str) -> list[str]:
    tail = re.split(r"[/#:]", name.rstrip("/#"))[-1] or name
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", tail).replace("_", " ").replace("-", " ").replace(".", " ")
    return spaced.lower().split() or [name.lower()]


def singular(word: str) -> str:
    if word in _IRREGULAR_SINGULAR:
        return _IRREGULAR_SINGULAR[word]
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        return word[:-1]
    return word


def plural(word: str) -> str:
    if word in _IRREGULAR_PLURAL:
        return _IRREGULAR_PLURAL[word]
    if word in _IRREGULAR_SINGULAR or word.endswith("s"):
        return word
    if word.endswith("y") and len(word) > 2 and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + ("es" if word.endswith(("ch", "sh", "x")) else "s")


def agent_noun(participle: str) -> str | None:
    """directed -> director, written -> writer, produced -> producer (a guess from the spelling; None when the
    word is no participle)."""
    w = participle
    if w.endswith("tten"):
        return w[:-3] + "er"  # written -> writer
    if w.endswith("ted"):
        return w[:-2] + "or"  # directed -> director, edited -> editor
    if w.endswith(("ced", "sed", "zed", "ved", "ged")):
        return w[:-1] + "r"  # produced -> producer, composed -> composer
    if w.endswith("ed") and len(w) > 4:
        return w[:-2] + "er"  # owned -> owner
    return None


@dataclass(frozen=True)
class RelationForms:
    """The ways a relation may be named (see the module docstring)."""

    phrase: str  # its words: "release year", "directed by"
    nouns: tuple[str, ...]  # what the far end is called: "release year", "year"; "director"
    participle: str | None  # "directed" of directed_by, "starred" of starred_actors, else None
    leading: bool = False  # the participle leads the name (starred_actors: "X starred in", not "X starred")

    @property
    def passive(self) -> str | None:
        return f"{self.participle} by" if self.participle else None


def relation_forms(name: str) -> RelationForms:
    """The forms of relation ``name`` (see the module docstring)."""
    words = _words(name)
    participle = words[-2] if len(words) >= 2 and words[-1] == "by" else None
    if participle is None and len(words) >= 2 and words[0].endswith("ed") and len(words[0]) > 4:
        # starred_actors: "the ones starred by X", "who starred in X"; its other words name the far end
        return RelationForms(" ".join(words), _nouns(words[1:]), words[0], leading=True)
    core = [w for w in words if w != "by"] if participle else list(words)
    while len(core) > 1 and core[0] in _PREFIXES:
        core = core[1:]
    nouns: list[str] = []
    if participle:
        agent = agent_noun(participle)
        if agent:
            nouns.append(agent)
    else:
        nouns += _nouns(core)
    nouns = [n for n in dict.fromkeys(nouns) if n]
    if not nouns:
        nouns = [" ".join(words)]
    return RelationForms(" ".join(words), tuple(nouns), participle)


def _nouns(core: Sequence[str]) -> tuple[str, ...]:
    """What the far end of a relation of these words is called: its words, and their last word alone (singular
    too) unless "of" joins them ("place of birth" is no "birth")."""
    nouns = [" ".join(core)]
    if "of" not in core:
        nouns += [core[-1], singular(core[-1])]
    return tuple(n for n in dict.fromkeys(nouns) if n)


def naming_forms(name: str, words: str) -> list[str]:
    """The names a question may call relation ``name`` by: ``words`` (its name as words), and for a relation named
    by a participle its agent nouns and the participle ("written by", "writer", "written"); the other relations'
    nouns are left out (their singular would bring "child" as near "parent" as "children" is to "parents")."""
    f = relation_forms(name)
    return list(dict.fromkeys([words, *((*f.nouns, f.participle) if f.participle else ())]))


def _is_head(name: str) -> bool:
    return name.isalpha() and len(name) >= HEAD


def compound_heads(names: Iterable[str]) -> tuple[str, ...]:
    """The names a compound word may end in: those of one word of :data:`HEAD` letters or more, each once."""
    return tuple(dict.fromkeys(n for n in names if _is_head(n)))


def compound_head(word: str, heads: Sequence[str]) -> str | None:
    """The longest of ``heads`` that may be a compound's head (:func:`compound_heads`) and that ``word`` or its
    singular is a compound of, ending in it after a part of :data:`HEAD_PART` letters or more (English compounds
    are right-headed: "screenwriters" -> "writer"; "factor" is no "actor"), or None."""
    best = None
    for w in dict.fromkeys([word, singular(word)]):
        for h in heads:
            if (_is_head(h) and len(w) - len(h) >= HEAD_PART and w.endswith(h)
                    and (best is None or len(h) > len(best))):
                best = h
    return best
