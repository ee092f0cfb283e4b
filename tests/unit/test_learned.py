"""The learned pattern generator's parts that need no server: spans and masks, templates, the linking acceptance,
the router's calibration and choices, the generator file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine._config import EngineConfig
from engine._errors import CheckpointError, ConfigError, PatternError
from engine.learned.generator import (GeneratorCheckpoint, TemplateClassifier, load_generator, ngram_ids,
                                      save_generator)
from engine.linking.text import Candidate, LinkModel, fit_link_model, mask, spans, unbracket
from engine.learned.router import check_route, keeps_learned
from engine.learned.templates import Template, chain
from engine.learned.train import calibrate, make_record
from engine.retrieval.pattern import Pattern


def test_spans_keep_inner_punctuation_and_drop_trailing() -> None:
    text = "who directed Cassandra's Dream."
    got = {s for _, _, s in spans(text)}
    assert "Cassandra's Dream" in got and "Cassandra's Dream." in got and "who directed" in got
    assert "Hello, Dolly!" in {s for _, _, s in spans("who directed Hello, Dolly! and when")}
    assert "Who's Harry Crumb?" in {s for _, _, s in spans("actors of Who's Harry Crumb?")}
    for a, b, s in spans(text):
        assert text[a:b] == s


def test_unbracket_and_mask_round_trip() -> None:
    text, found = unbracket("what films did [Tom Hanks] star in with [Meg Ryan]")
    assert text == "what films did Tom Hanks star in with Meg Ryan"
    assert [text[a:b] for a, b, _ in found] == ["Tom Hanks", "Meg Ryan"]
    assert mask(text, [(a, b) for a, b, _ in found]) == "what films did X star in with X"


def test_template_from_a_pattern_and_back() -> None:
    pat = Pattern.from_triples([("Heat", "directed_by", "UNKNOWN director 1"),
                                ("UNKNOWN movie 2", "directed_by", "UNKNOWN director 1")])
    tpl = Template.from_pattern(pat, ["Heat"])
    assert tpl.triples == (("T1", "directed_by", "U1"), ("U2", "directed_by", "U1"))
    assert tpl.types == {"U1": "director", "U2": "movie"} and tpl.answer_slot() == "U2"
    assert tpl.slot_relations("T1") == {("directed_by", True)} and tpl.slot_relations("U2") == {("directed_by", True)}
    filled = tpl.fill(["Collateral"])
    assert filled.triples == (("Collateral", "directed_by", "UNKNOWN director 1"),
                              ("UNKNOWN movie 2", "directed_by", "UNKNOWN director 1"))
    assert filled.answer_node() == "UNKNOWN movie 2"
    assert tpl.skeleton() == "T1 - U1 ; U2 - U1"  # the structure alone
    # equality ignores the type hints: a template is its structure and relations
    assert Template.from_pattern(pat, ["Heat"], keep_types=False) == tpl
    assert Template.from_json(tpl.to_json()) == tpl and Template.from_json(tpl.to_json()).types == tpl.types


def test_template_of_a_conjunction_orders_topics_as_given() -> None:
    pat = Pattern.from_triples([("UNKNOWN 1", "starred_actors", "Tom Cruise"),
                                ("UNKNOWN 1", "directed_by", "Michael Mann")])
    tpl = Template.from_pattern(pat, ["Michael Mann", "Tom Cruise"])
    assert tpl.triples == (("U1", "starred_actors", "T2"), ("U1", "directed_by", "T1")) and tpl.topics == 2
    assert tpl.fill(["Michael Mann", "Tom Cruise"]) == Pattern.from_triples(
        [("UNKNOWN 1", "starred_actors", "Tom Cruise"), ("UNKNOWN 1", "directed_by", "Michael Mann")])


def test_template_refusals() -> None:
    with pytest.raises(PatternError, match="none of the topics"):
        Template.from_pattern(Pattern.from_triples([("Heat", "directed_by", "UNKNOWN 1")]), ["Alien"])
    with pytest.raises(PatternError, match="unknown answer"):
        Template.from_pattern(Pattern.from_triples([("Heat", "directed_by", "Michael Mann")]), ["Heat"])


def test_chain_writes_each_hop_in_its_direction() -> None:
    tpl = chain(["starred_actors", "directed_by"], [False, True], "person")
    assert tpl.triples == (("U1", "starred_actors", "T1"), ("U1", "directed_by", "U2"))
    assert tpl.types == {"U2": "person"}


def test_make_record_finds_topics_in_plain_text() -> None:
    rec = make_record("who directed heat", ["Heat"], ["Michael Mann"],
                      {"triples": [["Heat", "directed_by", "UNKNOWN 1"]]})
    assert rec.spans == [(13, 17)] and rec.template is not None
    assert rec.template.triples == (("T1", "directed_by", "U1"),)
    rec = make_record("what did [Michael Mann] direct", None, ["Heat"])
    assert rec.text == "what did Michael Mann direct" and rec.topics == ["Michael Mann"] and rec.template is None


def _cand(text: str, mention: str, eid: int) -> Candidate:
    a = text.index(mention)
    return Candidate(a, a + len(mention), mention, mention, (eid,), 0.0)


def test_fitted_acceptance_learns_the_questions_own_words() -> None:
    # "Up" and "Her" are films, and also words of the questions' templates: the fitted acceptance learns that
    examples = []
    names = ["Heat", "Alien", "Top Gun", "Gladiator", "Collateral", "Ran", "Jaws", "Big"]
    for i, n in enumerate(names * 4):
        text = f"who directed {n} and what is up with her"
        cands = [_cand(text, n, i), _cand(text, "up", 100), _cand(text, "her", 101)]
        examples.append((text, cands, [n]))
    rate = {"who": 1.0, "directed": 1.0, "up": 1.0, "her": 1.0, "who directed": 1.0}
    model = fit_link_model(examples, rate, 1)
    text = "who directed Psycho and what is up with her"
    chosen = model.choose([_cand(text, "Psycho", 7), _cand(text, "up", 100), _cand(text, "her", 101)], text)
    assert [c.name for c in chosen] == ["Psycho"] and 0.5 < chosen[0].confidence <= 1.0
    again = LinkModel.from_json(model.to_json())
    text, cands = examples[0][0], examples[0][1]
    assert np.allclose(again.probabilities(cands, text), model.probabilities(cands, text))


def test_choose_takes_more_topics_only_when_sure_and_apart() -> None:
    model = LinkModel(np.zeros(9), {}, max_topics=2)
    model.weights[0] = 5.0  # every candidate sure
    text = "films with Tom Cruise directed by Michael Mann"
    c1, c2, inner = _cand(text, "Tom Cruise", 1), _cand(text, "Michael Mann", 2), _cand(text, "Mann", 3)
    got = model.choose([inner, c2, c1], text)
    assert [t.name for t in got] == ["Tom Cruise", "Michael Mann"]  # in the text's order, "Mann" overlaps
    model.weights[0] = -5.0  # none sure: the best alone
    assert len(model.choose([c1, c2], text)) == 1


def test_calibrate_keeps_the_share_asked_for() -> None:
    # a bound of 0.5 confidence is the observed precision (z = 0): the plain share, as before
    scored = [(0.9, True), (0.8, True), (0.7, False), (0.6, True), (0.2, False), (0.1, False)]
    cal = calibrate(scored, 0.75, confidence=0.5)
    kept = [ok for p, ok in scored if p >= cal.threshold]
    assert cal.threshold == 0.6 and sum(kept) / len(kept) >= 0.75 and cal.kept == 4 and cal.certified
    assert cal.precision == 0.75 and cal.lower_bound == pytest.approx(0.75)


def test_routing_functions() -> None:
    assert keeps_learned("learned", 0.0, 0.9)
    assert not keeps_learned("auto", 0.1, 0.9)  # with no LLM too: the router then does not answer
    assert keeps_learned("auto", 0.95, 0.9) and not keeps_learned("auto", 0.5, 0.9)
    assert not keeps_learned("auto", 0.0, 0.0)  # probability 0 (no template fits) is never sure enough
    assert check_route("llm") == "llm"
    with pytest.raises(ConfigError, match="route must be one of"):
        check_route("sometimes")


def test_route_and_generator_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="route"):
        EngineConfig(route="sometimes")
    monkeypatch.setenv("ISORAG_ROUTE", "never")
    with pytest.raises(ConfigError, match="ISORAG_ROUTE"):
        EngineConfig.from_env()
    monkeypatch.setenv("ISORAG_ROUTE", "learned")
    monkeypatch.setenv("ISORAG_GENERATOR", " /x/gen.pt ")
    cfg = EngineConfig.from_env()
    assert cfg.route == "learned" and cfg.generator == "/x/gen.pt"


def test_max_question_chars_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert EngineConfig().max_question_chars == 2000
    for bad in (0, -1, True, 2.5, 2_000_000):
        with pytest.raises(ConfigError, match="max_question_chars"):
            EngineConfig(max_question_chars=bad)  # type: ignore[arg-type]
    monkeypatch.setenv("ISORAG_MAX_QUESTION_CHARS", "many")
    with pytest.raises(ConfigError, match="ISORAG_MAX_QUESTION_CHARS"):
        EngineConfig.from_env()
    monkeypatch.setenv("ISORAG_MAX_QUESTION_CHARS", "500")
    assert EngineConfig.from_env().max_question_chars == 500


def test_the_shape_of_a_question() -> None:
    from engine.learned.generator import shape_ids

    # the words that name relations are one w, however many and whichever: the shape is how it is put together
    assert shape_ids("what is the nation of X 's couple ?") == shape_ids("what is the nationality of X's spouse")
    assert shape_ids("what is the release year of X") == shape_ids("what is the genre of X")
    assert shape_ids("what is the genre of X") != shape_ids("what is the genre of X's director")


def test_ngram_ids_are_stable_and_bounded() -> None:
    ids = ngram_ids("who directed X")
    assert ids == ngram_ids("Who  directed X") and all(0 <= i < 1 << 14 for i in ids) and len(ids) == 6
    # a possessive is a word of its own however it is written
    assert ngram_ids("what is X's spouse") == ngram_ids("what is X 's spouse") == ngram_ids("what is X’s spouse")


def test_generator_file_round_trip_and_refusals(tmp_path: Path) -> None:
    import torch

    torch.manual_seed(0)
    tpl = Template((("T1", "directed_by", "U1"),), {"U1": "director"})
    model = TemplateClassifier(8, 1, buckets=64, hidden=4, shape_buckets=32)
    ckpt = GeneratorCheckpoint("kg_a", "slug", 8, [tpl], model, LinkModel(np.ones(9), {"who": 1.0}), 0.42, 7)
    path = save_generator(ckpt, tmp_path / "g" / "gen.pt")
    back = load_generator(path, kg="kg_a", embedding_slug="slug")
    assert back.templates == [tpl] and back.templates[0].types == {"U1": "director"}
    assert back.threshold == 0.42 and back.seed == 7 and back.link.template_rate == {"who": 1.0}
    assert back.relations == ["directed_by"]
    x = torch.ones(1, 8)
    ids, offsets = torch.tensor([1, 2]), torch.tensor([0])
    feats = (x, ids, offsets, ids, offsets, torch.tensor([[0.5]]), torch.tensor([[0.0]]), torch.tensor([[0.3]]))
    assert torch.equal(back.model(*feats), model.eval()(*feats))
    with pytest.raises(CheckpointError, match="KG 'kg_a', not of 'kg_b'"):
        load_generator(path, kg="kg_b")
    with pytest.raises(CheckpointError, match="embedding model"):
        load_generator(path, embedding_slug="other")
    with pytest.raises(CheckpointError, match="no generator file"):
        load_generator(tmp_path / "none.pt")
    (tmp_path / "junk.pt").write_text("junk")
    with pytest.raises(CheckpointError, match="not a generator file"):
        load_generator(tmp_path / "junk.pt")


def test_question_files_are_read_by_one_row_reader_for_both_trainers(tmp_path: Path) -> None:
    """The scorer's and the generator's question files share one reader: blank lines skipped, ``limit`` counts
    questions, a bad line is an error at its line in either."""
    from engine._errors import MalformedInputError
    from engine.learned.train import read_records
    from engine.scoring.qa import question_rows, read_qa

    qa = tmp_path / "qa.txt"
    qa.write_text("who directed [Heat]\tMichael Mann\n\nwhat did [A] write\tx||y\nwho is [C]\tz\n", encoding="utf-8")
    rows = list(question_rows(qa, jsonl=False))
    assert rows == [(1, ("who directed [Heat]", ["Michael Mann"])), (3, ("what did [A] write", ["x", "y"])),
                    (4, ("who is [C]", ["z"]))]
    assert [n for n, _ in question_rows(qa, jsonl=False, limit=2)] == [1, 3]
    assert [r.source for r in read_qa(qa, limit=2)] == ["qa.txt:1", "qa.txt:3"]
    recs = read_records(qa, limit=2)
    assert [r.source for r in recs] == ["qa.txt:1", "qa.txt:3"] and recs[1].answers == ["x", "y"]
    bad = tmp_path / "bad.txt"
    bad.write_text("who directed [Heat]\tMichael Mann\nno tab here\n", encoding="utf-8")
    for read in (read_qa, read_records):
        with pytest.raises(MalformedInputError, match=r"bad.txt:2.*question<TAB>answer"):
            read(bad)
    jl = tmp_path / "q.jsonl"
    jl.write_text('{"question": "who directed Heat", "topics": ["Heat"], "answers": ["Michael Mann"]}\n[1]\n',
                  encoding="utf-8")
    assert next(question_rows(jl, jsonl=True))[1]["topics"] == ["Heat"]
    for read in (read_qa, read_records):
        with pytest.raises(MalformedInputError, match=r"q.jsonl:2.*\"question\" string"):
            read(jl)


def test_the_question_vector_is_its_words_mean_or_its_sentence_embedding() -> None:
    """``e(q)`` (engine.learned.generator): ``words``, the masked question's distinct words, the mask left out,
    each embedded alone, their unit vectors averaged and made a unit vector again (a question of known words needs
    no embedding call); ``sentence``, the masked question's own embedding."""
    from engine.learned.generator import question_vectors, sentence_words

    assert sentence_words("Who directed X's films? Who") == ["who", "directed", "'s", "films"]
    vec = {"who": [2.0, 0.0, 0.0], "directed": [0.0, 5.0, 0.0], "'s": [0.0, 0.0, 1.0], "who directed X": [1, 2, 3]}
    seen: list[list[str]] = []

    def encode(texts: list[str]) -> np.ndarray:
        seen.append(list(texts))
        return np.array([vec[t] for t in texts], dtype=np.float32)

    got = question_vectors(["who directed X", "X 's who who", "X"], encode, 3, "words")
    assert seen == [["who", "directed", "'s"]]  # every distinct word of all the questions once
    assert got.shape == (3, 3) and got.dtype == np.float32
    assert np.allclose(got[0], np.array([1.0, 1.0, 0.0]) / np.sqrt(2))
    assert np.allclose(got[1], np.array([1.0, 0.0, 1.0]) / np.sqrt(2))  # each word once
    assert np.array_equal(got[2], np.zeros(3))  # nothing but the mask
    seen.clear()
    got = question_vectors(["who directed X"], encode, 3, "sentence")
    assert seen == [["who directed X"]] and np.array_equal(got, np.array([[1, 2, 3]], dtype=np.float32))


def test_the_question_vector_follows_where_the_training_questions_come_from(tmp_path: Path) -> None:
    """``auto``: the sentence embedding (and the path composer) when most training questions are ``isorag
    synth``'s (their rows carry ``seeds``), the words' mean (and no composer) for people's questions; a setting
    given is kept; anything else is refused."""
    from engine._errors import ConfigError
    from engine.learned.train import GeneratorSettings, composes, question_vector_of, read_records

    synth = tmp_path / "synth.jsonl"
    synth.write_text(json.dumps({"question": "who directed Heat", "questions": ["who directed Heat", "Heat's "
                                 "director"], "seeds": ["Heat"], "answers": ["Michael Mann"],
                                 "pattern": {"triples": [["Heat", "directed_by", "UNKNOWN 1"]]}}) + "\n")
    people = tmp_path / "qa.txt"
    people.write_text("who directed [Heat]\tMichael Mann\nwho acted in [Heat]\tAl Pacino\n")
    made, asked = read_records(synth), read_records(people)
    assert [r.synthetic for r in made] == [True, True] and [r.synthetic for r in asked] == [False, False]
    auto = GeneratorSettings()
    assert auto.question_vector == "auto"
    assert question_vector_of(auto, made) == "sentence" and question_vector_of(auto, asked) == "words"
    assert question_vector_of(auto, made + asked + asked[:1]) == "words"  # (3 of 5 asked by people)
    assert question_vector_of(GeneratorSettings(question_vector="words"), made) == "words"
    # the path composer likewise: fitted for synth's questions, not for people's, unless asked
    assert composes(auto, made) and not composes(auto, asked)
    assert composes(GeneratorSettings(compose=True), asked) and not composes(GeneratorSettings(compose=False), made)
    with pytest.raises(ConfigError, match="question_vector must be auto, words or sentence"):
        GeneratorSettings(question_vector="tokens")
