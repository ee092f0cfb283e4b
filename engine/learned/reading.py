"""How a question's words are put together around its topic, as the path composer (:mod:`engine.learned.compose`)
reads them: the orders in which the words may name the relations walked from the topic, and the role of each word in
the sentence's structure.

* :func:`reading_positions`: the reading orders (the possessive chain after the topic, then the words before it from
  the nearest outwards, ...), as positions in the question's tokens, without the participles that only link a
  subject to its noun ("who is listed as director of X": :func:`copular_participles`);
* :func:`word_roles`: per word of an order, how it joins the word read before it (in one *chunk*, next to it in the
  text with at most an article between, or the noun of "what/which N"; joined by "of"; or apart) and whether it is a
  *kind noun*: a noun that says what kind of thing an entity is rather than naming a relation, the head of a relative
  or participial clause ("the movies directed by X", "films that share...", "X written movies") or a noun set before
  the topic ("the film X");
* :func:`predicate_verbs`: the verb a question ends on after its subject ("where does X 's son work for", "where is
  X 's mother living", "how X 's mom died") or asks by ("what killed X 's father"), which says something of the
  subject rather than being part of its name.

Every relation of a chain is named in a chunk of its own ("the heir of X 's daughter": heir, daughter), so a word of
another chunk that the alignment reads as continuing a step ("daughter 's heir" as one relation) is a *crossing*,
and a chunk of which no word names a step is left unexplained; two words of one chunk naming two steps ("release
years" read as the release year walked there and back) are a *split*. Kind nouns neither open a chunk nor need to
name a step. A predicate verb is a chunk of its own, apart from the noun it follows ("X 's son | work for": the
son's workplace, a step of its own, not a kind of son). The rules are about English sentence structure, never about a
KG's relations.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from engine.linking.text import MASK

__all__ = ["APART", "OF", "SAME", "Roles", "copular_participles", "is_participle", "kind_nouns", "predicate_verbs",
           "reading_positions", "reading_words", "word_roles"]

#: how a word joins the word read before it: in one chunk, joined by "of", apart
SAME, OF, APART = 0, 1, 2

_BE = frozenset({"is", "was", "are", "were"})
_ARTICLES = frozenset({"a", "an", "the"})
_WH = frozenset({"what", "which"})
_RELATIVE = frozenset({"that", "which", "whose", "who", "whom", "where"})
_QUESTION = frozenset({"what", "which", "who", "whom", "whose", "where", "when", "why", "how"})
_DO = frozenset({"do", "does", "did"})
#: verbs of having, which ask for the noun of "what N" ("what genre does X have") and name nothing themselves
_HAVE = frozenset({"have", "has", "had"})
_POSSESSIVE = re.compile(r"\s*['’]s\b")
_TOKENS = re.compile(r"'s|[^\W_]+(?:-[^\W_]+)*")
#: "grand" and a word of at least three letters ("granddaughter", "grand-parents"): the kin of the kin
_GRAND = re.compile(r"grand-?([a-z]{3,})")
#: the English words of "grand" and three letters or more that are no kin ("grandeur" is no "eur 's eur")
_NOT_KIN = frozenset({"grandeur", "grandeurs", "grandest", "grandiose", "grandiosity", "grandness", "grandstand",
                      "grandstands", "grandstanding", "grandiloquent", "grandiloquence", "grandioso"})


def tokens(masked: str) -> list[str]:
    """The lower-cased tokens of a masked question, a possessive ``'s`` one token and a hyphenated compound one word
    ("co-wrote" names a writer; its "co" alone is as near a director); a kin word of two generations read as the kin
    of the kin ("granddaughter": daughter 's daughter; "grandparents": parents 's parents)."""
    out: list[str] = []
    for w in (t.lower() for t in _TOKENS.findall(_POSSESSIVE.sub(" 's ", masked))):
        kin = _GRAND.fullmatch(w) if w not in _NOT_KIN else None
        out.extend((kin.group(1), "'s", kin.group(1)) if kin else (w,))
    return out


def reading_positions(masked: str, function_words: Iterable[str]) -> tuple[list[str], list[list[int]]]:
    """The question's tokens and the orders in which its words may name the relations walked from its topic, the
    likeliest first, as positions in the tokens (distinct by their words). The likeliest: where a word that names
    something follows the (first) mask at once and "by" does not come before it, the topic is inside a clause of its
    own and the words after it come first ("the films X acted in ...", "the X written movies"); else the words of the
    possessive chain right after it ("X 's children 's mother", or the relation it is named by: "the ones that have
    X as director", "the ones X was the director of"), then the words before it from the nearest outwards ("the
    place of birth of X ..." -> birth, place), then the other words after it ("the films directed by X were written
    by whom" -> directed, films, written). Without a mask, the words from the last backwards."""
    skip = set(function_words) | {MASK.lower()}
    toks = tokens(masked)
    at = toks.index(MASK.lower()) if MASK.lower() in toks else len(toks)
    after = list(range(at + 1, len(toks)))
    linking = copular_participles(toks)
    before = [i for i in reversed(range(at)) if toks[i] not in skip and i not in linking]

    def content(ix: Sequence[int]) -> list[int]:
        return [i for i in ix if toks[i] not in skip and toks[i] != "'s" and i not in linking]

    def named(k: int) -> bool:  # the word after the mask at k names something
        return k < len(after) and toks[after[k]] not in skip and toks[after[k]] != "'s"

    def distinct(orders: Sequence[list[int]]) -> tuple[list[str], list[list[int]]]:
        words = [[toks[i] for i in o] for o in orders]
        return toks, [o for k, o in enumerate(orders) if words[k] not in words[:k]]

    # the topic begins a clause of its own when a word follows it at once, and either a noun comes before it ("the
    # films X acted in") or a second word follows ("the director of X written movies"); not after "by" ("directed
    # by X released") nor inside "of X" ("where did the father of X die": the father died)
    others = [content(after) + before, before + content(after)]  # the two plain orders, for the others' sake
    if named(0) and (at == 0 or toks[at - 1] not in skip or named(1)) and not (at > 0 and toks[at - 1] == "by"):
        return distinct([content(after) + before, *others])
    end = _chain_end([toks[i] for i in after], skip)
    return distinct([content(after[:end]) + before + content(after[end:]), *others])


def copular_participles(toks: Sequence[str]) -> set[int]:
    """Positions of the participles that, between a copula and "as", only say what something is ("who is listed as
    director of X": who is the director; "is credited as", "was known as"): they name nothing of their own and are
    not read."""
    return {p for p in range(1, len(toks) - 1)
            if toks[p - 1] in _BE and toks[p + 1] == "as" and is_participle(toks[p])}


def _chain_end(after: Sequence[str], skip: set[str]) -> int:
    """Where the words right after the topic that name its own relation end: the possessive chain ("'s" and the
    name after each: "X 's other half 's father"), "as N" ("X as director"), "was the N of"."""

    def named(i: int) -> bool:
        return i < len(after) and after[i] not in skip and after[i] != "'s"

    def name_from(i: int) -> int:  # the end of the name that starts at i ("of" may join its words)
        while i < len(after) and (after[i] not in skip or (after[i] == "of" and named(i + 1))):
            i += 1
        return i

    end = 0
    while end < len(after) and after[end] == "'s":
        end += 1
        while end < len(after) and after[end] in skip and after[end] != "'s" and named(end + 1):
            end += 1
        end = name_from(end)
    if end == 0 and after[:1] == ["as"]:
        end = name_from(1)
    elif end == 0 and len(after) > 2 and after[0] in _BE and after[1] in _ARTICLES:
        end = name_from(2)
    return end


def reading_words(masked: str, function_words: Iterable[str]) -> list[list[str]]:
    """:func:`reading_positions` as words."""
    toks, orders = reading_positions(masked, function_words)
    return [[toks[i] for i in o] for o in orders]


def is_participle(word: str) -> bool:
    """A past participle by its spelling: "directed", "starred", "written", "spoken", "given" (a guess)."""
    return (len(word) > 3 and word.endswith("ed")) or word.endswith(("tten", "ken", "iven"))


def kind_nouns(toks: Sequence[str], function_words: Iterable[str]) -> set[int]:
    """Positions of the nouns that say what kind of thing an entity is: the head of a relative or participial clause
    ("the movies directed by", "films that share", "movies whose"), a noun a participle modifies ("X written
    movies"), a noun set right before the topic ("the film X"); never a noun of a possessive ("X 's movies")."""
    skip = set(function_words) | {MASK.lower(), "'s"}
    out = set()
    for p, t in enumerate(toks):
        if t in skip or is_participle(t):
            continue
        prev = toks[p - 1] if p > 0 else ""
        nxt = toks[p + 1] if p + 1 < len(toks) else ""
        if "'s" in (prev, nxt):
            continue
        if nxt == MASK.lower() or nxt in _RELATIVE or is_participle(nxt) or is_participle(prev):
            out.add(p)
    return out


def predicate_verbs(toks: Sequence[str], function_words: Iterable[str], kinds: set[int]) -> set[int]:
    """Positions of the verbs that say something of the question's subject (a guess from the sentence's shape): a
    past form right after "what/which" ("what killed X 's father"), and the last content word when it follows a
    noun at once and is a verb, by its spelling (a past participle, a form in -ing: "X 's mother living", "how X 's
    mom died") or because the question asks with "do" ("where does X 's son work for", "where did X 's parents
    die"). Verbs of having name nothing of their own ("what genre does X have")."""
    skip = set(function_words) | {MASK.lower(), "'s"}
    out = {p for p in range(1, len(toks)) if toks[p - 1] in _WH and is_participle(toks[p])}
    content = [p for p, t in enumerate(toks) if t not in skip]
    do = bool(toks) and toks[0] in _QUESTION and any(t in _DO for t in toks[1:3])
    if content and content[-1] > 0:
        p = content[-1]
        if toks[p - 1] not in skip and p - 1 not in kinds and (is_participle(toks[p]) or toks[p].endswith("ing") or do):
            out.add(p)
    return {p for p in out if toks[p] not in _HAVE}


@dataclass(frozen=True)
class Roles:
    """Per word of a reading order: its word, how it joins the word before it in the order (:data:`SAME`,
    :data:`OF`, :data:`APART`; the first word :data:`APART`), and whether it is a kind noun."""

    words: tuple[str, ...]
    joins: tuple[int, ...]
    kinds: tuple[bool, ...]


def word_roles(toks: Sequence[str], order: Sequence[int], kinds: set[int], verbs: Iterable[int] = ()) -> Roles:
    """The :class:`Roles` of a reading order (positions in ``toks``; ``kinds``: :func:`kind_nouns`; ``verbs``:
    :func:`predicate_verbs`). A word joins the one before it in one chunk when nothing but articles stands between
    them in the text, or either is the noun of "what/which N" or a kind noun, except where a copula parts the noun
    of "what N" from a kind noun or a noun of a possessive chain ("what types | are the movies directed by X",
    "what sex | is X 's wife": the noun asks something of the movies, of the wife, and must name a step) and where
    a predicate verb follows the noun at once ("X 's son | work for"); by "of" when "of" alone stands between
    them."""
    predicates = set(verbs)

    def wh_noun(p: int) -> bool:
        return p > 0 and toks[p - 1] in _WH and p not in predicates

    def possessed(p: int) -> bool:  # a noun of a possessive chain ("X 's wife")
        return p > 0 and toks[p - 1] == "'s"

    joins = []
    for k, i in enumerate(order):
        if k == 0:
            joins.append(APART)
            continue
        j = order[k - 1]
        between = [t for t in toks[min(i, j) + 1:max(i, j)] if t not in _ARTICLES]
        if not between and (i in predicates or j in predicates):
            joins.append(APART)  # "X 's son | work for": the subject, and what is said of it
        elif (wh_noun(i) or wh_noun(j)) and between and between[0] in _BE and (
                i in kinds or j in kinds or possessed(j if wh_noun(i) else i)):
            # "what types | are the movies directed by", "what sex | is X 's wife": the subject, asked about
            joins.append(APART)
        elif not between or wh_noun(i) or wh_noun(j) or i in kinds or j in kinds:
            joins.append(SAME)
        else:
            joins.append(OF if between == ["of"] else APART)
    return Roles(tuple(toks[i] for i in order), tuple(joins), tuple(i in kinds for i in order))
