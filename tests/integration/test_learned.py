"""Questions and claims in plain text answered with no LLM: the learned generator trained on a small movie KG in the
real Neo4j and Milvus, driven by every driver (ask, aask, ask_stream, aask_stream, verify), routed against the
scripted LLM, through the LangChain retriever and the CLI."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Callable

import pytest
from helpers.kg import shared_kg
from helpers.llm_server import Reply

from engine import SUPPORTED, REFUTED, AnswerEvent, ConfigError, Engine, LLMConfig
from engine.learned.train import GeneratorSettings, make_record
from loaders._model import TripleRecord

MOVIES = [
    ("Heat", "directed_by", "Michael Mann"), ("Heat", "starred_actors", "Al Pacino"),
    ("Heat", "starred_actors", "Robert De Niro"), ("Heat", "release_year", "1995"),
    ("Collateral", "directed_by", "Michael Mann"), ("Collateral", "starred_actors", "Tom Cruise"),
    ("Collateral", "release_year", "2004"), ("Alien", "directed_by", "Ridley Scott"),
    ("Alien", "starred_actors", "Sigourney Weaver"), ("Alien", "release_year", "1979"),
    ("Gladiator", "directed_by", "Ridley Scott"), ("Gladiator", "starred_actors", "Russell Crowe"),
    ("Gladiator", "release_year", "2000"), ("Top Gun", "starred_actors", "Tom Cruise"),
    ("Top Gun", "directed_by", "Tony Scott"), ("Top Gun", "release_year", "1986"),
    ("Casino", "starred_actors", "Robert De Niro"), ("Casino", "directed_by", "Martin Scorsese"),
]
FILMS = ["Heat", "Collateral", "Alien", "Gladiator", "Top Gun", "Casino"]
PEOPLE = {"Michael Mann": "directed_by", "Ridley Scott": "directed_by", "Tony Scott": "directed_by",
          "Martin Scorsese": "directed_by", "Al Pacino": "starred_actors", "Robert De Niro": "starred_actors",
          "Tom Cruise": "starred_actors", "Russell Crowe": "starred_actors", "Sigourney Weaver": "starred_actors"}
FORMS = {
    ("film", "directed_by"): ["who directed {}", "who is the director of {}", "{} was directed by whom"],
    ("film", "starred_actors"): ["who acted in {}", "who starred in {}", "which actors appear in {}"],
    ("film", "release_year"): ["when was {} released", "what year did {} come out"],
    ("directed_by", "film"): ["what films did {} direct", "which movies were directed by {}"],
    ("starred_actors", "film"): ["what films did {} act in", "which movies star {}"],
}


def questions() -> list[dict[str, Any]]:
    """Training questions with their gold patterns (a film's attribute, or a person's films)."""
    out = []
    for film in FILMS:
        for rel in ("directed_by", "starred_actors", "release_year"):
            for form in FORMS[("film", rel)]:
                out.append({"question": form.format(f"[{film}]"), "pattern": [[film, rel, "UNKNOWN 1"]]})
    for person, rel in PEOPLE.items():
        for form in FORMS[(rel, "film")]:
            out.append({"question": form.format(f"[{person}]"), "pattern": [["UNKNOWN 1", rel, person]]})
    return out


@pytest.fixture(scope="module")
def kg(neo4j_uri: str, milvus_uri: str, embedder: Any) -> Any:
    records = [TripleRecord(h, r, t, i) for i, (h, r, t) in enumerate(MOVIES, start=1)]
    yield from shared_kg("learned", records, neo4j_uri, milvus_uri, embedder)


@pytest.fixture(scope="module")
def generator(kg: Callable[..., Engine], tmp_path_factory: pytest.TempPathFactory) -> Path:
    eng = kg()
    out = tmp_path_factory.mktemp("learned") / "gen.pt"
    records = [make_record(q["question"], None, [], {"triples": q["pattern"]}) for q in questions()]
    res = eng.train_generator(records, out=out, settings=GeneratorSettings(seed=3, dev_fraction=0.2),
                              progress=False)
    assert res.checkpoint == str(out) and res.seed == 3 and res.templates == 5
    assert res.linking_acc >= 0.9, res.to_dict()
    return out


def test_ask_plain_text_without_llm(kg: Callable[..., Engine], generator: Path) -> None:
    eng = kg(generator=str(generator))
    ans = eng.ask("who directed Heat")
    assert ans.answer_source == "learned" and ans.pattern_source == "learned" and ans.ok
    assert ans.answers[0].entity.name == "Michael Mann" and ans.text.startswith("Michael Mann")
    assert ans.pattern is not None and ans.pattern.triples == (("Heat", "directed_by", "UNKNOWN 1"),)
    assert ans.proposal is not None and [t.name for t in ans.proposal.linked] == ["Heat"]
    assert 0 < (ans.pattern_probability or 0) <= 1 and ans.pattern_probability == ans.proposal.probability
    assert ans.subgraphs and ans.subgraphs[0].gsd == pytest.approx(0.0, abs=1e-4)
    for stage in ("link", "generate", "embed", "vector", "graph", "total"):
        assert stage in ans.timings, ans.timings
    assert list(ans.timings).index("link") < list(ans.timings).index("generate")
    # the stages are disjoint: none of them counts another's time (generate's clock ran over the linking too)
    assert sum(ans.timings[s] for s in ("link", "generate", "embed", "vector", "graph")) <= ans.timings["total"]
    d = ans.to_dict()
    assert d["proposal"]["linked"][0]["name"] == "Heat" and d["pattern_source"] == "learned"
    films = eng.ask("which movies star Tom Cruise")
    assert sorted(a.entity.name for a in films.answers[:2]) == ["Collateral", "Top Gun"]


def facts(a: Any) -> dict[str, Any]:
    return {"text": a.text, "answers": [x.entity.name for x in a.answers], "pattern": a.pattern.to_json(),
            "source": a.answer_source, "probability": a.pattern_probability, "evidence": a.evidence}


def test_every_driver_gives_the_same_learned_answer(kg: Callable[..., Engine], generator: Path) -> None:
    eng = kg(generator=str(generator))
    q = "who starred in Alien"
    want = facts(eng.ask(q))
    assert want["answers"][0] == "Sigourney Weaver"
    assert facts(asyncio.run(eng.aask(q))) == want
    events = list(eng.ask_stream(q))
    assert [e.kind for e in events] == ["pattern", "subgraphs", "token", "answer"]
    assert isinstance(events[-1], AnswerEvent) and facts(events[-1].answer) == want

    async def collect() -> list[Any]:
        return [e async for e in eng.aask_stream(q)]

    events = asyncio.run(collect())
    assert isinstance(events[-1], AnswerEvent) and facts(events[-1].answer) == want


def test_claims_are_verified_with_the_learned_pattern(kg: Callable[..., Engine], generator: Path) -> None:
    eng = kg(generator=str(generator))
    v = eng.verify("Heat was directed by Michael Mann")
    assert v.pattern_source == "learned" and v.method == "rule"
    assert v.pattern is not None and v.pattern.triples == (("Heat", "directed_by", "Michael Mann"),)
    assert v.label == SUPPORTED, v.reason
    v = eng.verify("Alien was directed by Michael Mann")
    assert v.label == REFUTED and "Ridley Scott" in v.reason
    assert asyncio.run(eng.averify("Heat was directed by Michael Mann")).label == SUPPORTED


def test_the_router_asks_the_llm_only_when_unsure(kg: Callable[..., Engine], generator: Path, llm_server: Any) -> None:
    llm_server.responder = lambda body: Reply(
        '{"triples": [["Heat", "directed_by", "UNKNOWN 1"]]}' if "segment" in body["messages"][-1]["content"]
        else "Michael Mann")
    llm = LLMConfig(base_url=llm_server.base_url, model="test", max_retries=0, timeout=10.0)
    eng = kg(llm=llm, generator=str(generator))
    gen = eng.generator
    assert gen is not None
    gen.ckpt.threshold = 0.0  # sure enough: no LLM call at all
    ans = eng.ask("who directed Heat")
    assert ans.pattern_source == "learned" and ans.answer_source == "learned" and llm_server.requests == []
    gen.ckpt.threshold = 1.01  # never sure: the LLM writes the pattern (and the answer)
    ans = eng.ask("who directed Heat")
    assert ans.pattern_source == "llm" and ans.answer_source == "llm" and len(llm_server.requests) == 2
    assert ans.proposal is not None and any("threshold" in w for w in ans.warnings)
    before = len(llm_server.requests)
    forced = eng.ask("who directed Heat", route="learned")
    assert forced.pattern_source == "learned" and len(llm_server.requests) == before
    assert eng.ask("who directed Heat", route="llm").pattern_source == "llm"


def test_learned_route_needs_a_generator(kg: Callable[..., Engine], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ISORAG_HOME", str(tmp_path))  # no default generator file for the KG there
    eng = kg()
    with pytest.raises(ConfigError, match="train-generator"):
        eng.ask("who directed Heat", route="learned")
    with pytest.raises(ConfigError, match="ISORAG_LLM"):
        eng.ask("who directed Heat")  # no LLM, no generator: as before


def test_langchain_retriever_answers_plain_text(kg: Callable[..., Engine], generator: Path) -> None:
    pytest.importorskip("langchain_core")
    eng = kg(generator=str(generator))
    retriever = eng.as_retriever(k=2)
    docs = retriever.invoke("who acted in Heat")
    assert len(docs) == 2 and {d.metadata["mapping"]["UNKNOWN 1"] for d in docs} == {"Al Pacino", "Robert De Niro"}
    assert len(retriever.invoke("who acted in Heat", k=1)) == 1
    assert len(asyncio.run(retriever.ainvoke("who acted in Heat"))) == 2


def test_cli_trains_and_answers_with_no_llm(kg: Callable[..., Engine], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from engine.cli import main

    eng = kg()
    qa = tmp_path / "qa.jsonl"
    qa.write_text("".join(json.dumps({"question": q["question"].replace("[", "").replace("]", ""),
                                      "topics": [q["pattern"][0][0] if "UNKNOWN" in q["pattern"][0][2]
                                                 else q["pattern"][0][2]],
                                      "answers": []}) + "\n" for q in questions()), encoding="utf-8")
    monkeypatch.setenv("ISORAG_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NEO4J_URI", eng.config.neo4j.uri or "")
    monkeypatch.setenv("MILVUS_URI", eng.config.milvus.uri or "")
    for var in ("ISORAG_LLM_BASE_URL", "ISORAG_LLM_MODEL", "OPENAI_BASE_URL", "ISORAG_GENERATOR"):
        monkeypatch.delenv(var, raising=False)
    # no answers and no patterns in the file: the relation paths come from the KG, which has no answers to
    # follow, so there is nothing to train on (said in one line)
    assert main(["train-generator", "--qa", str(qa), "--kg", eng.kg, "--quiet"]) == 2
    assert "nothing to train the generator on" in capsys.readouterr().err
    qa.write_text("".join(json.dumps({"question": f"who directed {f}", "topics": [f],
                                      "answers": [h for h2, r, h in MOVIES if h2 == f and r == "directed_by"]}) + "\n"
                          for f in FILMS for _ in range(3)), encoding="utf-8")
    assert main(["train-generator", "--qa", str(qa), "--kg", eng.kg, "--quiet", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    assert "seed 5" in out and str(tmp_path / "home" / "generators" / f"{eng.kg}.pt") in out
    assert main(["ask", "who directed Gladiator", "--kg", eng.kg, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["answer_source"] == "learned" and got["answers"][0]["name"] == "Ridley Scott"


def test_synth_then_train_sets_up_a_kg_without_questions(kg: Callable[..., Engine], tmp_path: Path) -> None:
    """`isorag synth` records carry their gold patterns (conjunctions too): training on them needs no question of
    the KG's own, and the generator then answers synth's questions as their gold patterns do."""
    from engine.evaluation.synth import synthesize, write_jsonl
    from engine.learned.train import read_records

    eng = kg()
    records = synthesize(eng.graph, 24, ["path1", "path2", "conj2"], seed=1)
    assert records and any(len(r["seeds"]) == 2 for r in records)
    path = tmp_path / "synth.jsonl"
    write_jsonl(records, path)
    read = read_records(path)
    assert all(r.template is not None for r in read) and {r.template.topics for r in read if r.template} >= {1, 2}
    res = eng.train_generator(path, out=tmp_path / "synth_gen.pt", settings=GeneratorSettings(seed=1, dev_fraction=0.0),
                              progress=False)
    assert res.questions == len(read) and res.skipped == {} and res.threshold == 1.0
    learned = kg(generator=str(tmp_path / "synth_gen.pt"))
    # several wordings of each sample, read as records of their own, its template shared
    assert len(read) > len(records) and {r.source for r in read} == {f"synth.jsonl:{i}" for i in
                                                                       range(1, len(records) + 1)}
    first = {r.source: r for r in reversed(read)}
    right = 0
    for i, rec in enumerate(records, start=1):
        r = first[f"synth.jsonl:{i}"]
        assert r.text == rec["question"] and len(rec["questions"]) >= 2
        # no held-out questions (dev_fraction 0): nothing to calibrate the router on, so only a forced route uses
        # the learned pattern
        ans = learned.ask(rec["question"], raise_errors=False, route="learned")
        if ans.proposal is not None and ans.proposal.templates and ans.proposal.templates[0] == r.template:
            right += 1
            assert rec["answer"] in {a.entity.name for a in ans.answers}, rec["question"]
    assert right >= len(records) // 2, f"{right} of {len(records)} synth questions got their gold template back"


def test_the_replica_changes_no_proposal(kg: Callable[..., Engine], generator: Path) -> None:
    """With a fresh graph read replica the generator links the question and reads its topics' relations in process
    (Neo4j's full-text index only for a name left unknown) and does not embed the topics' names: its proposals are
    those it makes without one."""
    eng = kg(generator=str(generator))
    eng.retrieve([("Heat", "directed_by", "UNKNOWN 1")], graph="replica")  # the version read, the replica built
    gen = eng.generator
    assert gen is not None and eng.retriever.replica_now() is not None
    texts = ["who directed Heat", "which movies star Tom Cruise", "what films did Ridley Scott direct",
             "when was Top Gun released", "who directed heat", "who directed Haet", "who is the director of Gladiator",
             "what did Heat direct"]
    here = [gen.propose(t) for t in texts]
    replica, gen.replica = gen.replica, None
    try:
        there = [gen.propose(t) for t in texts]
    finally:
        gen.replica = replica
    for text, a, b in zip(texts, here, there):
        assert [t.name for t in a.linked] == [t.name for t in b.linked], text
        assert [p.to_json() for p, _ in a.beam] == [p.to_json() for p, _ in b.beam], text
        assert [x for _, x in a.beam] == pytest.approx([x for _, x in b.beam], abs=1e-5), text
        assert a.why == b.why, text


def test_a_question_made_of_training_words_is_scored_with_no_embedding(kg: Callable[..., Engine],
                                                                       generator: Path) -> None:
    """The generator file keeps its training questions' words and word pairs with their vectors, and the question's
    own vector ``e(q)`` is the mean of its words' (no sentence embedding): an engine that has just loaded the file
    scores a question made of those words without calling the embedding model, and embeds only a word it never saw."""
    eng = kg(generator=str(generator))
    eng.retrieve([("Heat", "directed_by", "UNKNOWN 1")], graph="replica")  # the version read: linking in process
    gen = eng.generator
    assert gen is not None and eng.retriever.replica_now() is not None
    assert {"who", "directed", "movies", "star"} <= set(gen.ckpt.vocab)
    assert gen.ckpt.vocab_vectors is not None and gen.ckpt.vocab_vectors.shape == (len(gen.ckpt.vocab),
                                                                                    eng.embedder.dim)
    real = eng.retriever.embedder
    calls: list[list[str]] = []

    class Counting:
        dim, slug = real.dim, real.slug

        def encode(self, texts: Any, **kw: Any) -> Any:
            calls.append(list(texts))
            return real.encode(texts, **kw)

    eng.retriever.embedder = Counting()
    try:
        props = [gen.propose(text) for text in ("who directed Collateral", "which movies star Al Pacino")]
        assert calls == []
        prop = gen.propose("who directed Collateral quickly")
        assert calls == [["quickly"]] and prop.pattern is not None
    finally:
        eng.retriever.embedder = real
    assert [p.pattern.triples if p.pattern else None for p in props] == [
        (("Collateral", "directed_by", "UNKNOWN 1"),), (("UNKNOWN 1", "starred_actors", "Al Pacino"),)]
