"""Questions worded as people ask them, from a sampled tree of KG triples (``isorag synth``, no LLM).

A relation name is verbalised in the forms of :class:`engine.linking.relations.RelationForms` (its words, head
noun, singular and plural, and a participle's agent noun, active verb and passive). A question about a chain of
relations is a noun phrase for its answer, built hop by hop from the seed, each hop in one of several forms:

* forward (the KG's triple leaves the known node): "the director of X", "X's director", "the one who directed X";
* inverse (the triple enters it): "the ones directed by X", "the ones whose director is X", "what has X as its
  director";

wrapped in an opening ("what is ...", "which is ...", "who is ...", "name ...", "tell me ...", or the phrase
alone), or asking for the last relation by its noun ("which nationality is X's spouse?"), or, for a last forward
hop of a participle relation, a verb question ("who directed X?"). Each sample gets
several distinct wordings drawn with the sampler's seeded generator (:func:`wordings`); conjunctions (two or three
seeds) are worded as the answer that has each seed ("what has director X and actor Y"). A hop that enters an actor,
a director or a writer is also worded with the other verbs people use for the role (:data:`ROLE_VERBS`: "what does
X appear in", "the films X acted in", "what did X pen").
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from engine.linking.relations import RelationForms, agent_noun, plural, relation_forms, singular

__all__ = ["ROLE_VERBS", "RelationForms", "agent_noun", "plural", "relation_forms", "role_verbs", "singular",
           "wordings"]

# -- noun phrases, hop by hop ---------------------------------------------------------------------------------


# a phrase's kind: a name, "X's N" (possessive), "the N of X" (of) or a relative clause; "A's N" is written only
# after a name or a possessive, since "the spouse of X's nationality" reads as the spouse of X's nationality
NAME, POSSESSIVE, OF, RELATIVE = "name", "possessive", "of", "relative"


def _forward(inner: str, kind: str, rel: RelationForms, rng: random.Random, outer: bool = True) -> tuple[str, str]:
    """The far end of a triple that leaves the node described by ``inner`` (``outer``: the answer's own phrase)."""
    noun = rng.choice(rel.nouns)
    forms = [(f"the {noun} of {inner}", OF)]
    if kind != NAME and not outer:  # "the sex of kid of X's father": people drop the article inside a chain
        forms.append((f"{noun} of {inner}", OF))
    if kind in (NAME, POSSESSIVE):
        forms.append((f"{inner}'s {noun}", POSSESSIVE))
    if rel.participle:
        forms.append((f"the one who {_verb(rel)} {inner}", RELATIVE))
    return rng.choice(forms)


def _inverse(inner: str, rel: RelationForms, rng: random.Random, what: str) -> tuple[str, str]:
    """The near end of a triple that enters the node described by ``inner``."""
    noun = rng.choice(rel.nouns)
    forms = [f"the {what} whose {noun} is {inner}", f"the {what} with {noun} {inner}",
             f"the {what} that has {inner} as {noun}", f"the {what} that {inner} was the {singular(noun)} of",
             f"the {what} {inner} was {_a(singular(noun))} in"]
    if rel.passive:
        forms += [f"the {what} {rel.passive} {inner}", f"the {what} that {inner} {_verb(rel)}",
                  f"the {what} {inner} {rel.participle} in" if rel.leading else f"the {what} {inner} {_verb(rel)}"]
        forms += [f"the {what} {inner} {past}{' in' if rel.leading else ''}" for _, past in role_verbs(rel)]
    return rng.choice(forms), RELATIVE


def _shared(inner: str, rel: RelationForms, rng: random.Random, what: str) -> str:
    """The other near ends of the far end of a triple leaving ``inner`` (a relation walked there and back, out
    first): "the ones that share a director with X", "the ones whose directors also directed X"."""
    noun = min(rel.nouns, key=len)
    forms = [f"the {what} that share {plural(noun)} with {inner}", f"the {what} that have the same {noun} as {inner}",
             f"the {what} with the same {noun} as {inner}", f"the {what} that share the same {noun} of {inner}",
             f"the other {what} of the {noun} of {inner}"]
    if rel.participle:
        forms += [f"the {what} whose {plural(noun)} also {_verb(rel)} {inner}",
                  f"the {what} {rel.passive} the {noun} of {inner}"]
    return rng.choice(forms)


def _fellows(inner: str, rel: RelationForms, rng: random.Random, what: str) -> str:
    """The other far ends of the near end of a triple entering ``inner`` (a relation walked there and back, in
    first): "the co-stars of X", "the ones who acted together with X"."""
    noun = min(rel.nouns, key=len)
    forms = [f"the co-{plural(noun)} of {inner}", f"the fellow {plural(noun)} of {inner}",
             f"the {what} who are {plural(noun)} together with {inner}",
             f"the {what} that are {plural(noun)} in the same one as {inner}",
             f"the other {plural(noun)} beside {inner}", f"the {what} that share a {noun} role with {inner}"]
    if rel.participle:
        forms += [f"the {what} who {_verb(rel)} together with {inner}",
                  f"the {what} {inner} {rel.participle if rel.leading else _verb(rel)} with"]
    return rng.choice(forms)


def _last(phrase: str, hops: Sequence[tuple[RelationForms, bool]], i: int, rng: random.Random,
          what: str) -> str | None:
    """A question asked through its last hop ``i`` ("who directed X?", "which nationality is X's spouse?",
    "when was X released?"), or None (a noun phrase in an opening instead)."""
    rel, out = hops[i]
    ends = plural(what) if what != "one" else "ones"
    if out and rel.participle and rng.random() < 0.35:
        verb = _verb(rel)
        if rel.leading:
            return rng.choice([f"who {verb} {phrase}?", f"which {rel.nouns[-1]} {verb} {phrase}?",
                               f"who was {rel.participle} in {phrase}?", f"who was the {rel.nouns[-1]} in {phrase}?"])
        return rng.choice([f"who {verb} {phrase}?", f"by whom was {phrase} {rel.participle}?",
                           f"{phrase} was {rel.participle} by whom?", f"which one {verb} {phrase}?",
                           f"{phrase} was {rel.participle} by who?"])
    if not out and rel.passive and rng.random() < 0.35:
        tail = " in" if rel.leading else ""
        forms = [f"which {ends} were {rel.passive} {phrase}?", f"what did {phrase} {_base(rel)}{tail}?",
                 f"what was {rel.passive} {phrase}?", f"{phrase} {_verb(rel)} which {ends}?",
                 f"what does {phrase} {_base(rel)}{tail}?"]
        for base, past in role_verbs(rel):  # "what does X appear in", "which ones did X act in"
            forms += [f"what does {phrase} {base}{tail}?", f"what did {phrase} {base}{tail}?",
                      f"which {ends} did {phrase} {base}{tail}?", f"{phrase} {past}{tail} which {ends}?"]
        return rng.choice(forms)
    if not out and rng.random() < 0.3:
        # "X was the director of which films?", "what films was X an actor in?"
        noun = singular(rng.choice(rel.nouns))
        return rng.choice([f"{phrase} was the {noun} of which {ends}?", f"what {ends} was {phrase} {_a(noun)} in?",
                           f"which {ends} was {phrase} the {noun} of?"])
    words = rel.phrase.split()
    if out and not rel.participle and len(words) > 1 and words[-1] in _WHEN and rng.random() < 0.4:
        # release_year: "when was X released?", "when did X release?"
        return rng.choice([f"when was {phrase} {_past(words[0])}?", f"when did {phrase} {words[0]}?",
                           f"in which {words[-1]} was {phrase} {_past(words[0])}?"])
    if out and not rel.participle and rng.random() < 0.3:
        # the last relation's noun asked for: "which nationality is X's spouse?"
        noun = rng.choice(rel.nouns)
        return rng.choice([f"which {noun} is {phrase}?", f"what {noun} is {phrase}?",
                           f"which {noun} does {phrase} have?", f"what {noun} does {phrase} have?",
                           f"{phrase} has which {noun}?", f"{phrase} is in which {noun}?"])
    return None


_WHEN = frozenset({"year", "date", "time", "day"})

#: other verbs people use for the role a relation's far end plays, by its noun (the base form and the past): "what
#: does X appear in" for a relation whose far end is an actor, "what did X make" for a director
ROLE_VERBS: dict[str, tuple[tuple[str, str], ...]] = {
    "actor": (("act", "acted"), ("appear", "appeared"), ("play", "played"), ("feature", "featured"),
              ("perform", "performed")),
    "director": (("make", "made"), ("film", "filmed")),
    "writer": (("write", "wrote"), ("pen", "penned"), ("author", "authored")),
}


def role_verbs(rel: RelationForms) -> tuple[tuple[str, str], ...]:
    """The verbs of :data:`ROLE_VERBS` for the relation's far end (none for a relation with no participle)."""
    if not rel.participle:
        return ()
    return tuple(v for n in rel.nouns for v in ROLE_VERBS.get(singular(n), ()))

#: how a question calls its answer and the unknown entities it passes through (a noun where people say "films",
#: "people"), and how often a relation walked there and back is worded as one ("share a director with")
_WHATS = ("ones", "ones", "ones", "items", "entities", "things")
THERE_AND_BACK = 0.6


def chain_wording(names: Sequence[str], hops: Sequence[tuple[RelationForms, bool]], rng: random.Random,
                  what: str = "one") -> str:
    """One wording of a question about a chain: ``names[0]`` the seed, hop i of relation ``hops[i][0]`` leaving
    its near node when ``hops[i][1]``. A relation walked there and back (hops i and i + 1 of one relation in
    opposite directions) is worded as one step most of the time ("the ones that share a director with X")."""
    phrase, kind = names[0], NAME
    last = len(hops) - 1
    many = rng.choice(_WHATS)
    i = 0
    while i <= last:
        rel, out = hops[i]
        if (i < last and hops[i + 1][0] == rel and hops[i + 1][1] != out
                and rng.random() < THERE_AND_BACK):
            here = many if i + 1 < last or what == "one" else plural(what)
            if i + 1 == last and rng.random() < 0.4:
                return _shared_question(phrase, rel, out, rng, here)
            phrase = _shared(phrase, rel, rng, here) if out else _fellows(phrase, rel, rng, here)
            kind, i = RELATIVE, i + 2
            continue
        if i == last:
            asked = _last(phrase, hops, i, rng, what)
            if asked is not None:
                return asked
        phrase, kind = (_forward(phrase, kind, rel, rng, i == last) if out
                        else _inverse(phrase, rel, rng, many if i < last else what))
        i += 1
    if kind == POSSESSIVE and rng.random() < 0.25:
        return rng.choice(["what is the {}?", "the {}?"]).format(phrase)  # "what is the X's mom's nationality?"
    return rng.choice(_OPENINGS).format(phrase)


def _shared_question(inner: str, rel: RelationForms, out: bool, rng: random.Random, what: str) -> str:
    """A question whose last two hops walk one relation there and back: "the director of X also directed which
    ones?", "who co-starred with X?"."""
    noun = min(rel.nouns, key=len)
    if out:
        forms = [f"which {what} share the same {noun} of {inner}?", f"which {what} have the same {noun} as {inner}?",
                 f"the {noun} of {inner} is also the {noun} of which {what}?"]
        if rel.participle:
            forms.append(f"the {noun} of {inner} also {_verb(rel)} which {what}?")
        return rng.choice(forms)
    forms = [f"who are the co-{plural(noun)} of {inner}?", f"{inner} is a co-{noun} of who?",
             f"who was {noun} together with {inner}?", f"who shares a {noun} role with {inner}?"]
    if rel.participle:
        forms += [f"who {_verb(rel)} together with {inner}?", f"who co-{_verb(rel)} with {inner}?",
                  f"{inner} {_verb(rel)} together with who?"]
    return rng.choice(forms)


def _verb(rel: RelationForms) -> str:
    """The relation as an active verb: "directed" (X directed Y), "starred in" (X starred in Y)."""
    return f"{rel.participle} in" if rel.leading else _active(rel.participle or "")


def _active(participle: str) -> str:
    """The simple past of a participle (written -> wrote, other -> the same)."""
    return {"written": "wrote", "given": "gave", "taken": "took", "made": "made", "done": "did",
            "sung": "sang", "begun": "began", "drawn": "drew", "driven": "drove", "shown": "showed"}.get(participle,
                                                                                                        participle)


def _a(noun: str) -> str:
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def _past(verb: str) -> str:
    """release -> released, open -> opened (regular verbs)."""
    return verb + ("d" if verb.endswith("e") else "ed")


_OPENINGS = ("what is {}?", "which is {}?", "who is {}?", "name {}.", "{}?", "tell me {}.", "what are {}?",
             "do you know {}?", "give {}.", "who are {}?", "list {}.", "which are {}?")


def _base(rel: RelationForms) -> str:
    p = rel.participle or ""
    irregular = {"written": "write", "given": "give", "taken": "take", "made": "make", "done": "do",
                 "sung": "sing", "drawn": "draw", "driven": "drive", "shown": "show"}
    if p in irregular:
        return irregular[p]
    if p.endswith(("ced", "sed", "zed", "ved", "ged")):
        return p[:-1]
    if len(p) > 5 and p.endswith("ed") and p[-3] == p[-4] and p[-3] not in "ls":
        return p[:-3]  # starred -> star
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
