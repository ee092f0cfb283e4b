"""The router that knows when it does not know, without a server: the threshold's lower confidence bound, the
decision (learned, LLM, or no answer and why), the questions the training makes about relations a KG lacks, the
bound on a question's length."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from engine._errors import InputError
from engine.learned.generator import Proposal, check_text, content_ngrams, relation_words
from engine.learned.router import LEARNED, LLM, REFUSE, decide
from engine.learned.train import calibrate, wilson_lower
from engine.learned.unanswerable import NOUNS, VERBS, half, unanswerable_questions, usable_words
from engine.retrieval.pattern import Pattern


def test_wilson_lower_bound_hand_computed() -> None:
    # 95% one-sided, z = 1.6449: 100 of 100 right -> n / (n + z^2) = 100 / 102.706
    assert wilson_lower(100, 100, 0.95) == pytest.approx(100 / (100 + 1.6448536**2), abs=1e-6)
    assert wilson_lower(0, 10, 0.95) == 0.0 and wilson_lower(0, 0, 0.95) == 0.0
    assert wilson_lower(5, 10, 0.5) == pytest.approx(0.5)
    assert wilson_lower(990, 1000, 0.95) < 0.99 < wilson_lower(999, 1000, 0.95)


def test_threshold_is_never_zero_even_when_every_held_out_pattern_is_right() -> None:
    scored = [(0.3 + 0.001 * i, True) for i in range(400)]
    cal = calibrate(scored, 0.99)
    assert cal.threshold == pytest.approx(0.3) and cal.certified and cal.kept == 400
    # a wrong one below: the threshold stays at the lowest kept, the top of the gap
    cal = calibrate(scored + [(0.1, False)], 0.99)
    assert cal.kept == 400 and cal.threshold == pytest.approx(0.3)
    # the smallest probability there is: the threshold stays above 0 (found by hypothesis with an earlier rule)
    assert calibrate([(5e-324, False)], 1.0, 0.5).threshold == 5e-324
    # patterns of probability 0 (no template fits) are never kept, even when they are all there is
    cal = calibrate([(0.0, True), (0.0, False)], 0.9)
    assert cal.threshold == 1.0 and cal.kept == 0 and not cal.certified
    assert calibrate([], 0.99).threshold == 1.0


def test_too_few_questions_to_certify_the_precision() -> None:
    # 50 of 50 right: the 95% bound is 0.948, short of 0.99; the threshold is the one with the highest bound
    cal = calibrate([(0.5 + 0.005 * i, True) for i in range(50)], 0.99)
    assert not cal.certified and cal.kept == 50 and cal.threshold == pytest.approx(0.5)
    assert cal.lower_bound == pytest.approx(wilson_lower(50, 50, 0.95))


def test_unanswerable_questions_raise_the_threshold_above_them() -> None:
    right = [(0.6 + 0.0004 * i, True) for i in range(1000)]
    wrong = [(0.2 + 0.001 * i, False) for i in range(200)]  # questions the KG cannot answer, lower
    cal = calibrate(right + wrong, 0.99, unanswerable=200)
    assert cal.unanswerable == 200 and cal.questions == 1200 and cal.certified
    # the lowest threshold whose bound reaches 0.99 lets in only the few wrong ones the bound allows
    kept_wrong = sum(1 for p, _ in wrong if p >= cal.threshold)
    assert 0.39 < cal.threshold <= 0.6 and 0 < kept_wrong <= 4
    # some of them overconfident: they spend the error the bound allows, so fewer low ones get in
    high = [(0.99 + 0.001 * i, False) for i in range(3)]
    cal2 = calibrate(right + high + wrong, 0.99, unanswerable=203)
    assert cal2.certified and cal2.threshold > cal.threshold
    assert sum(1 for p, _ in wrong if p >= cal2.threshold) < kept_wrong


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.booleans()), max_size=60), st.floats(0.5, 1.0),
       st.floats(0.5, 0.99))
def test_calibration_properties(scored: list[tuple[float, bool]], precision: float, confidence: float) -> None:
    cal = calibrate(scored, precision, confidence)
    assert 0 < cal.threshold <= 1.0
    kept = [ok for p, ok in scored if p >= cal.threshold and p > 0]
    assert cal.kept == len(kept)
    if kept:
        assert cal.precision == pytest.approx(sum(kept) / len(kept))
        assert cal.lower_bound == pytest.approx(wilson_lower(sum(kept), len(kept), confidence))
    if cal.certified:
        assert cal.lower_bound >= precision
        # the lowest such threshold: one step lower (the next distinct probability) is not certified
        lower = sorted({p for p, _ in scored if 0 < p < cal.threshold})
        if lower:
            more = [ok for p, ok in scored if p >= lower[-1]]
            assert wilson_lower(sum(more), len(more), confidence) < precision


def _proposal(prob: float | None, why: str | None = None) -> Proposal:
    beam = [(Pattern.from_triples([("Heat", "directed_by", "UNKNOWN 1")]), prob)] if prob is not None else []
    return Proposal("q", [], beam, [], {"link": 0.0, "generate": 0.0}, [], why)


def test_decide_who_writes_the_pattern() -> None:
    sure, unsure, none = _proposal(0.9), _proposal(0.3), _proposal(None, "no entity of the KG is named in it")
    assert decide("auto", sure, 0.5, has_llm=True) == (LEARNED, None)
    assert decide("auto", sure, 0.5, has_llm=False) == (LEARNED, None)
    who, why = decide("auto", unsure, 0.5, has_llm=True, note="right 99.0% of the time")
    assert who == LLM and why is not None and "0.300" in why and "0.500" in why and "99.0%" in why
    who, why = decide("auto", unsure, 0.5, has_llm=False)
    assert who == REFUSE and why is not None and "no LLM" in why
    assert decide("learned", unsure, 0.5, has_llm=False) == (LEARNED, None)  # forced
    assert decide("auto", none, 0.5, has_llm=True) == (LLM, "no entity of the KG is named in it")
    assert decide("auto", none, 0.5, has_llm=False) == (REFUSE, "no entity of the KG is named in it")
    assert decide("learned", none, 0.5, has_llm=True)[0] == REFUSE


def test_question_length_bound() -> None:
    assert check_text("x" * 10, 10) == "x" * 10
    with pytest.raises(InputError, match="11 characters, more than the 10 allowed"):
        check_text("x" * 11, 10)
    with pytest.raises(InputError, match="claim has 100,000 characters"):
        check_text("y" * 100_000, 2_000, "claim")
    with pytest.raises(InputError, match="must be a string"):
        check_text(b"bytes", 10)


def test_relation_words_and_question_words() -> None:
    assert relation_words("directed_by") == "directed by" and relation_words("has_genre") == "genre"
    assert relation_words("placeOfBirth") == "place of birth"
    assert relation_words("http://dbpedia.org/ontology/birthPlace") == "birth place"
    assert content_ngrams("what is the nation of X 's couple ?") == ["nation", "couple"]
    grams = content_ngrams("which films did X direct")
    assert grams == ["films", "direct"]  # "did" is a function word, "X" the mask: no pair spans them
    assert content_ngrams("release year of X") == ["release", "year", "release year"]
    assert len(content_ngrams(" ".join(f"w{i}" for i in range(500)))) == 48


def _encode(texts: list[str]) -> np.ndarray:
    """A stand-in embedder: texts sharing a first letter are close, others far."""
    out = np.zeros((len(texts), 27), dtype=np.float32)
    for i, t in enumerate(texts):
        c = t.strip().lower()[:1]
        out[i, (ord(c) - 97) % 26 if c.isalpha() else 26] = 1.0
        out[i, 26] += 0.1
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_unanswerable_words_keep_away_from_the_kg_and_its_questions() -> None:
    words = usable_words(["budget_of_film"], {"population"}, _encode)
    assert words and all(not w.startswith("b") for w, _ in words)  # near "budget of film" by the stand-in
    assert "population" not in {w for w, _ in words}  # a word of the training questions
    assert {k for _, k in words} == {"noun", "verb"}
    assert all(half(w) in (0, 1) for w in NOUNS + VERBS) and half("budget") == half("budget")
    rng = random.Random(0)
    qs = unanswerable_questions(words, ["Heat", "Top Gun"], 50, 1, rng)
    assert len(qs) == 50
    for text, topic, (a, b) in qs:
        assert text[a:b] == topic and topic in ("Heat", "Top Gun")
    # the halves share no word: the calibration sees words the none class never learned
    used0 = {w for w, _ in words if half(w) == 0}
    assert not any(w in text for text, _, _ in qs for w in used0 if len(w) > 8 and half(w) == 0
                   and not any(w in u for u in {x for x, _ in words if half(x) == 1}))
    assert unanswerable_questions([], ["Heat"], 5, 0, rng) == []


def test_the_training_rewords_its_own_questions_about_what_the_kg_lacks() -> None:
    from engine.learned.unanswerable import reworded_questions

    words = [("budget", "noun"), ("salary", "noun"), ("sponsored", "verb"), ("financed", "verb")]
    part = half("budget")
    pool = {w for w, _ in words if half(w) == part}
    questions = [("who directed Heat", [(13, 17)]), ("what genre is Top Gun in", [(14, 21)]),
                 ("the director of Directed Genre", [(16, 30)])]
    seen: list[list[str]] = []

    def names(tokens: list[str]) -> list[bool]:
        seen.append(list(tokens))
        return [t in ("directed", "genre", "director") for t in tokens]

    got = reworded_questions(questions, names, words, 30, part, random.Random(1))
    assert got and len(seen) == 1  # one call for all the words
    for text, topic, (a, b) in got:
        assert text[a:b] == topic and topic in ("Heat", "Top Gun", "Directed Genre")
        assert not {"directed", "genre", "director"} & set(text.replace(topic, "").split())
        assert any(w in text for w in pool)
    # the topic's own words are never replaced, even when they name a relation
    assert any(t == "Directed Genre" for _, t, _ in got)
    assert reworded_questions(questions, lambda ts: [False] * len(ts), words, 5, part, random.Random(1)) == []
