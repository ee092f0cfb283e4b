"""Questions worded as people ask them, from a sampled tree of KG triples (``isorag synth``, no LLM).

A relation name is verbalised in several forms (:class:`RelationForms`): its words (``place_of_birth`` -> "place
of birth"), its head noun ("year" of ``release_year``), singular and plural ("child", "children"), and for a
relation written as a participle (``directed_by``) the agent noun ("director"), the active verb ("directed") and
the passive ("directed by"). A question about a chain of relations is a noun phrase for its answer, built hop by
hop from the seed, each hop in one of several forms:

* forward (the KG's triple leaves the known node): "the director of X", "X's director", "the one who directed X";
* inverse (the triple enters it): "the ones directed by X", "the ones whose director is X", "what has X as its
  director";

wrapped in an opening ("what is ...", "which is ...", "who is ...", "name ...", "tell me ...", or the phrase
alone), or asking for the last relation by its noun ("which nationality is X's spouse?"), or, for a last forward
hop of a participle relation, a verb question ("who directed X?"). Each sample gets
several distinct wordings drawn with the sampler's seeded generator (:func:`wordings`); conjunctions (two or three
seeds) are worded as the answer that has each seed ("what has director X and actor Y").
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["RelationForms", "relation_forms", "wordings"]

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
    participle: str | None  # "directed" of directed_by, else None

    @property
    def passive(self) -> str | None:
        return f"{self.participle} by" if self.participle else None


def relation_forms(name: str) -> RelationForms:
    """The forms of relation ``name`` (see the module docstring)."""
    words = _words(name)
    participle = words[-2] if len(words) >= 2 and words[-1] == "by" else None
    core = [w for w in words if w != "by"] if participle else list(words)
    while len(core) > 1 and core[0] in _PREFIXES:
        core = core[1:]
    nouns: list[str] = []
    if participle:
        agent = agent_noun(participle)
        if agent:
            nouns.append(agent)
    else:
        nouns.append(" ".join(core))
        if "of" not in core:  # "place of birth" is no "birth"
            nouns += [core[-1], singular(core[-1])]
    nouns = [n for n in dict.fromkeys(nouns) if n]
    if not nouns:
        nouns = [" ".join(words)]
    return RelationForms(" ".join(words), tuple(nouns), participle)


# -- noun phrases, hop by hop ---------------------------------------------------------------------------------


# a phrase's kind: a name, "X's N" (possessive), "the N of X" (of) or a relative clause; "A's N" is written only
# after a name or a possessive, since "the spouse of X's nationality" reads as the spouse of X's nationality
NAME, POSSESSIVE, OF, RELATIVE = "name", "possessive", "of", "relative"


def _forward(inner: str, kind: str, rel: RelationForms, rng: random.Random) -> tuple[str, str]:
    """The far end of a triple that leaves the node described by ``inner``."""
    noun = rng.choice(rel.nouns)
    forms = [(f"the {noun} of {inner}", OF)]
    if kind in (NAME, POSSESSIVE):
        forms.append((f"{inner}'s {noun}", POSSESSIVE))
    if rel.participle:
        forms.append((f"the one who {_active(rel.participle)} {inner}", RELATIVE))
    return rng.choice(forms)


def _inverse(inner: str, rel: RelationForms, rng: random.Random, what: str) -> tuple[str, str]:
    """The near end of a triple that enters the node described by ``inner``."""
    noun = rng.choice(rel.nouns)
    forms = [f"the {what} whose {noun} is {inner}", f"the {what} with {noun} {inner}",
             f"the {what} that has {inner} as {noun}"]
    if rel.passive:
        forms += [f"the {what} {rel.passive} {inner}", f"the {what} that {inner} {_active(rel.participle or '')}"]
    return rng.choice(forms), RELATIVE


def _active(participle: str) -> str:
    """The simple past of a participle (written -> wrote, other -> the same)."""
    return {"written": "wrote", "given": "gave", "taken": "took", "made": "made", "done": "did",
            "sung": "sang", "begun": "began", "drawn": "drew", "driven": "drove", "shown": "showed"}.get(participle,
                                                                                                        participle)


_OPENINGS = ("what is {}?", "which is {}?", "who is {}?", "name {}.", "{}?", "tell me {}.", "what are {}?",
             "do you know {}?", "give {}.")


def chain_wording(names: Sequence[str], hops: Sequence[tuple[RelationForms, bool]], rng: random.Random,
                  what: str = "one") -> str:
    """One wording of a question about a chain: ``names[0]`` the seed, hop i of relation ``hops[i][0]`` leaving
    its near node when ``hops[i][1]``."""
    phrase, kind = names[0], NAME
    last = len(hops) - 1
    for i, (rel, out) in enumerate(hops):
        if i == last and out and rel.participle and rng.random() < 0.35:
            verb = _active(rel.participle)
            return rng.choice([f"who {verb} {phrase}?", f"by whom was {phrase} {rel.participle}?",
                               f"{phrase} was {rel.participle} by whom?", f"which one {verb} {phrase}?"])
        if i == last and not out and rel.passive and rng.random() < 0.35:
            ends = plural(what) if what != "one" else "ones"
            return rng.choice([f"which {ends} were {rel.passive} {phrase}?", f"what did {phrase} {_base(rel)}?",
                               f"what was {rel.passive} {phrase}?"])
        if i == last and out and not rel.participle and rng.random() < 0.3:
            # the last relation's noun asked for: "which nationality is X's spouse?"
            noun = rng.choice(rel.nouns)
            return rng.choice([f"which {noun} is {phrase}?", f"what {noun} is {phrase}?",
                               f"which {noun} does {phrase} have?", f"what {noun} does {phrase} have?"])
        phrase, kind = _forward(phrase, kind, rel, rng) if out else _inverse(phrase, rel, rng,
                                                                              "ones" if i < last else what)
    return rng.choice(_OPENINGS).format(phrase)


def _base(rel: RelationForms) -> str:
    p = rel.participle or ""
    irregular = {"written": "write", "given": "give", "taken": "take", "made": "make", "done": "do",
                 "sung": "sing", "drawn": "draw", "driven": "drive", "shown": "show"}
    if p in irregular:
        return irregular[p]
    if p.endswith(("ced", "sed", "zed", "ved", "ged")):
        return p[:-1]
    return p[:-2] if p.endswith("ed") else p


def conjunction_wording(seeds: Sequence[tuple[str, RelationForms, bool]], rng: random.Random,
                        what: str = "one") -> str:
    """One wording of "the answer joined to each seed": ``(seed name, relation, the triple leaves the answer)``."""
    parts = []
    for name, rel, answer_is_head in seeds:
        noun = rng.choice(rel.nouns)
        if answer_is_head:
            parts.append(rng.choice([f"{noun} {name}", f"{name} as {noun}"]
                                    + ([f"{rel.passive} {name}"] if rel.passive else [])))
        else:
            parts.append(rng.choice([f"{name} as its {noun}", f"{noun} of {name}"]))
    body = " and ".join(parts)
    return rng.choice([f"which {what} has {body}?", f"what has {body}?", f"name the {what} with {body}.",
                       f"which {what} is with {body}?"])


def wordings(first: Sequence[str], make: Callable[[], str], n: int, tries: int = 6) -> list[str]:
    """The distinct wordings of ``first``, then more from ``make()`` (which draws one), ``n`` in all when it
    finds them (sentence-cased)."""
    out = list(dict.fromkeys(first))[:n]
    for _ in range(max(0, n - len(out)) * tries):
        if len(out) >= n:
            break
        w = make()
        w = w[:1].upper() + w[1:] if w else w
        if w and w not in out:
            out.append(w)
    return out
