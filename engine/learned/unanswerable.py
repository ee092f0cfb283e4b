"""Questions the KG cannot answer, made by the training itself (:func:`engine.learned.train.train_generator`).

A generator that has only seen answerable questions has no way to say "none of my templates": asked "what is the
budget of Heat" on a KG without budgets, it picks the closest template and answers with a wrong entity. So the
training makes questions about relations the KG lacks: words that name a relation in many KGs (:data:`NOUNS`:
"budget", "population", "producer"; :data:`VERBS`: "produced", "founded") in the ways people ask ("what is the
budget of X", "who founded X"), each about a topic of the training questions. A word is used only when it is far
in meaning from every relation name of the KG (cosine under :data:`NEAR`) and none of the training questions
uses it: "director" is never made unanswerable on a movie KG.

The training also rewords its own questions: in a question of the training set (or, for the calibration, of the
held-out set), each word that names one of the KG's relations is replaced by such a word ("who directed X" ->
"who sponsored X", "what genre is X" -> "what salary is X"): the way the KG's users ask, about something it lacks,
the hardest kind to tell.

The words fall in two halves by a stable hash (:func:`half`): the *none* class of the classifier learns from one,
the router's threshold is calibrated on questions made from the other, so the calibration measures how the model
does on relations it never saw called unanswerable.
"""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

__all__ = ["NOUNS", "VERBS", "NEAR", "half", "reworded_questions", "usable_words", "unanswerable_questions"]

#: attribute and role nouns that name a relation in many KGs
NOUNS = tuple("""
budget;box office;revenue;population;area;capital;currency;height;weight;age;birthday;date of birth;birthplace;
place of birth;hometown;salary;net worth;price;cost;color;colour;size;length;width;depth;altitude;elevation;
temperature;climate;mayor;governor;president;prime minister;king;queen;ceo;chairman;founder;owner;headquarters;
employer;employees;spouse;wife;husband;children;parents;father;mother;siblings;brother;sister;religion;
nationality;ethnicity;political party;education;alma mater;school;university;degree;occupation;profession;
job;hobby;nickname;motto;slogan;anthem;flag;logo;website;email address;phone number;address;zip code;
time zone;area code;coordinates;latitude;longitude;continent;border;neighbour;river;mountain;island;
producer;composer;editor;cinematographer;narrator;publisher;distributor;studio;label;manager;coach;team;
league;stadium;position;jersey number;record;award;prize;nomination;rank;ranking;score;grade;rating agency;
sponsor;investor;shareholder;subsidiary;parent company;competitor;customer;supplier;product;brand;
manufacturer;engine;fuel;horsepower;top speed;mileage;battery;screen size;memory;processor;operating system;
version;license;source code;programming language;inventor;discoverer;architect;designer;builder;material;
ingredients;calories;recipe;vitamin;symptom;cause;cure;treatment;dosage;side effects;blood type;diet;
habitat;lifespan;predator;prey;species;genus;diameter;orbit;moon;mass;distance;speed;cause of death;
place of death;burial place;grave;funeral;will;inheritance;tax;debt;loan;interest rate;stock price;
market value;dividend;patent;trademark;copyright;sequel;prequel;soundtrack;filming location;running time;
runtime;aspect ratio;camera;costume designer;stunt double;voice actor;choreographer;translator;illustrator
""".replace("\n", "").split(";"))

#: past-tense verbs that name a relation in many KGs ("who produced X")
VERBS = tuple("""
produced;composed;founded;owned;edited;financed;sponsored;photographed;narrated;designed;built;invented;
discovered;painted;sang;published;translated;distributed;animated;choreographed;coached;managed;sold;bought;
married;adopted;funded;acquired;manufactured;patented;recorded;illustrated;sculpted;engineered;programmed;
launched;hosted;organised;organized;governed;ruled;conquered;colonised;inherited;donated;endorsed;
commissioned;restored;renovated;demolished;insured;audited;taught;trained;mentored;interviewed;arrested;
sued;defeated;elected;appointed;nominated;awarded;banned;censored;premiered;broadcast;streamed;dubbed
""".replace("\n", "").split(";"))

#: a word this close in meaning (cosine) to a relation name of the KG names it: never made unanswerable
NEAR = 0.55

_NOUN_FRAMES = ("what is the {w} of {x}", "what was the {w} of {x}", "which {w} does {x} have", "{x} has what {w}",
                "tell me the {w} of {x}", "what is {x}'s {w}", "name the {w} of {x}", "who is the {w} of {x}",
                "what {w} is {x}", "do you know the {w} of {x}", "how about the {w} of {x}")
_VERB_FRAMES = ("who {w} {x}", "what {w} {x}", "{x} was {w} by whom", "by whom was {x} {w}", "which one {w} {x}",
                "who {w} {x} originally", "who has {w} {x}")


def half(word: str) -> int:
    """0 or 1: which half of the words ``word`` is in (stable across runs and machines)."""
    return zlib.crc32(word.encode("utf-8")) & 1


def usable_words(relations: Sequence[str], question_words: Iterable[str],
                 encode: Callable[[Sequence[str]], Any]) -> list[tuple[str, str]]:
    """``(word, "noun" | "verb")`` of :data:`NOUNS` and :data:`VERBS` that no training question uses and that are
    far in meaning from every relation name (``relations``, as words)."""
    seen = {w.lower() for w in question_words}
    words = [(w.strip(), kind) for kind, ws in (("noun", NOUNS), ("verb", VERBS)) for w in ws if w.strip()]
    words = [(w, k) for w, k in words if not set(w.split()) & seen]
    if not words or not relations:
        return words
    vecs = np.asarray(encode([w for w, _ in words] + list(relations)), dtype=np.float32)
    vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    near = (vecs[:len(words)] @ vecs[len(words):].T).max(1)
    return [wk for wk, s in zip(words, near) if s < NEAR]


def unanswerable_questions(words: Sequence[tuple[str, str]], topics: Sequence[str], n: int, part: int,
                           rng: random.Random) -> list[tuple[str, str, tuple[int, int]]]:
    """``n`` questions ``(text, topic, topic span)`` from the words of half ``part`` (:func:`half`), each about a
    topic drawn from ``topics``."""
    pool = [(w, k) for w, k in words if half(w) == part]
    if not pool or not topics:
        return []
    out = []
    for _ in range(n):
        w, kind = rng.choice(pool)
        frame = rng.choice(_NOUN_FRAMES if kind == "noun" else _VERB_FRAMES)
        x = rng.choice(topics)
        a = frame.index("{x}")
        before = frame[:a].format(w=w)
        text = before + x + frame[a + 3:].format(w=w)
        out.append((text, x, (len(before), len(before) + len(x))))
    return out


_TOKEN = re.compile(r"[^\W\d_][\w'’-]*")


def reworded_questions(questions: Sequence[tuple[str, Sequence[tuple[int, int]]]],
                       names_relation: Callable[[Sequence[str]], Sequence[bool]],
                       words: Sequence[tuple[str, str]], n: int, part: int,
                       rng: random.Random) -> list[tuple[str, str, tuple[int, int]]]:
    """Up to ``n`` questions ``(text, topic, topic span)`` made from ``questions`` (``(text, topic spans)``, the first
    span the topic kept) by replacing each word outside the topics that names a relation (``names_relation``, one
    call for all the words) with a word of half ``part``: a past-tense verb for a word ending in "ed", else a noun."""
    pool = {k: [w for w, kind in words if kind == k and half(w) == part] for k in ("noun", "verb")}
    if not questions or not pool["noun"]:
        return []
    picked = [questions[rng.randrange(len(questions))] for _ in range(n)]
    found = [[(m.start(), m.end(), m.group(0)) for m in _TOKEN.finditer(text)
              if not any(a < m.end() and m.start() < b for a, b in spans)] for text, spans in picked]
    vocab = list(dict.fromkeys(t.lower() for toks in found for _, _, t in toks))
    named = dict(zip(vocab, names_relation(vocab))) if vocab else {}
    out = []
    for (text, spans), toks in zip(picked, found):
        hits = [(a, b, t) for a, b, t in toks if named.get(t.lower())]
        if not hits or not spans:
            continue
        new, shift, (ta, tb) = text, 0, spans[0]
        for a, b, t in hits:
            kind = "verb" if t.lower().endswith("ed") and pool["verb"] else "noun"
            w = rng.choice(pool[kind])
            new = new[:a + shift] + w + new[b + shift:]
            if a < ta:
                ta, tb = ta + len(w) - (b - a), tb + len(w) - (b - a)
            shift += len(w) - (b - a)
        out.append((new, new[ta:tb], (ta, tb)))
    return out
