"""Engine.ask / aask / ask_stream / verify on a small KG in the real Neo4j and Milvus; the LLM is the real
``openai`` client over HTTP against the scripted local server (tests/llm_server.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Callable

import pytest

from engine import (
    NOT_ENOUGH_INFO,
    REFUTED,
    SUPPORTED,
    Answer,
    AnswerEvent,
    ConfigError,
    Engine,
    EngineConfig,
    LLMConfig,
    LLMError,
    PatternEvent,
    PatternParseError,
    SubgraphsEvent,
    TokenEvent,
    Verdict,
)
from loaders._model import TripleRecord

from helpers.kg import shared_kg
from helpers.marks import withPackage


MOVIES = [
    ("Heat", "directed_by", "Michael Mann"),
    ("Heat", "starred_actors", "Al Pacino"),
    ("Heat", "starred_actors", "Robert De Niro"),
    ("Heat", "release_year", "1995"),
    ("Collateral", "directed_by", "Michael Mann"),
    ("Collateral", "starred_actors", "Tom Cruise"),
    ("Alien", "directed_by", "Ridley Scott"),
    ("Alien", "release_year", "1979"),
    ("Gladiator", "directed_by", "Ridley Scott"),
    ("Gladiator", "starred_actors", "Russell Crowe"),
    ("Top Gun", "starred_actors", "Tom Cruise"),
    ("Top Gun", "has_genre", "Action"),
]

Q_PATTERN = '{"divided": ["who directed Heat"], "triples": [["Heat", "directed_by", "UNKNOWN director 1"]]}'
Q_ANSWER = "According to graph [1], the director is Michael Mann."


@pytest.fixture(scope="module")
def kg(neo4j_uri: str, milvus_uri: str, embedder: Any) -> Any:
    """A small movie KG, loaded once for the module; yields a factory of engines on it."""
    records = [TripleRecord(h, r, t, i) for i, (h, r, t) in enumerate(MOVIES, start=1)]
    yield from shared_kg("ask", records, neo4j_uri, milvus_uri, embedder)


def llm_config(server: Any, **kw: Any) -> LLMConfig:
    kw.setdefault("max_retries", 2)
    kw.setdefault("retry_backoff", 0.01)
    kw.setdefault("timeout", 10.0)
    return LLMConfig(base_url=server.base_url, model="test-model", **kw)


def roundtrip(obj: Any) -> dict[str, Any]:
    """to_json() is valid JSON and says the same as to_dict()."""
    data = json.loads(obj.to_json())
    assert data == json.loads(json.dumps(obj.to_dict()))
    return data


# ---------------------------------------------------------------------------------------------------------
# the LLM path
# ---------------------------------------------------------------------------------------------------------


def test_ask_llm_pattern_then_answer(kg: Callable[..., Engine], llm_server: Any) -> None:
    llm_server.reply(Q_PATTERN).reply(Q_ANSWER)
    eng = kg(llm=llm_config(llm_server))
    ans = eng.ask("who directed Heat")
    assert isinstance(ans, Answer) and ans.ok
    assert ans.text == Q_ANSWER
    assert ans.pattern is not None and ans.pattern.triples == (("Heat", "directed_by", "UNKNOWN director 1"),)
    assert ans.pattern_text == Q_PATTERN
    assert [a.entity.name for a in ans.answers][:1] == ["Michael Mann"]
    assert ans.subgraphs and ans.subgraphs[0].gsd == pytest.approx(0.0, abs=1e-3)
    assert 'graph [1]: [("Heat", "directed_by", "Michael Mann")]' in ans.evidence
    for stage in ("llm_pattern", "embed", "vector", "graph", "retrieve", "verbalize", "llm_answer", "total"):
        assert stage in ans.timings, stage
    assert ans.usage["calls"] == 2 and ans.usage["prompt_tokens"] == 22 and ans.usage["failures"] == 0
    # the prompts: SimGRAG's pattern prompt with the 12 demo shots, then the answer prompt with the evidence
    first, second = llm_server.prompts
    assert first.startswith("You need to segment the given query")
    assert "12. query:" in first and "13. query:" not in first and '"who directed Heat"' in first
    assert second.startswith("Please answer the question") and ans.evidence in second
    data = roundtrip(ans)
    assert data["answers"][0]["name"] == "Michael Mann" and data["failed_stage"] is None


def test_ask_malformed_pattern_then_good(kg: Callable[..., Engine], llm_server: Any) -> None:
    llm_server.reply("Here is the knowledge graph structure you asked for: Heat was directed by someone.")
    llm_server.reply(Q_PATTERN).reply(Q_ANSWER)
    eng = kg(llm=llm_config(llm_server))
    ans = eng.ask("who directed Heat")
    assert ans.ok and ans.text == Q_ANSWER
    assert ans.usage["calls"] == 3
    assert "Your previous output was" in llm_server.prompts[1]
    assert [a.entity.name for a in ans.answers][:1] == ["Michael Mann"]


def test_ask_unparsable_pattern_twice(kg: Callable[..., Engine], llm_server: Any) -> None:
    eng = kg(llm=llm_config(llm_server))
    llm_server.reply("no idea").reply("still no idea")
    with pytest.raises(PatternParseError) as err:
        eng.ask("who directed Heat")
    assert err.value.text == "still no idea"
    llm_server.reply("no idea").reply("still no idea")
    ans = eng.ask("who directed Heat", raise_errors=False)
    assert ans.failed_stage == "llm_pattern" and ans.error_type == "PatternParseError"
    assert not ans.subgraphs and ans.text == ""
    assert roundtrip(ans)["failed_stage"] == "llm_pattern"


def test_ask_429_then_success(kg: Callable[..., Engine], llm_server: Any) -> None:
    llm_server.status(429, retry_after=0).reply(Q_PATTERN).reply(Q_ANSWER)
    eng = kg(llm=llm_config(llm_server))
    ans = eng.ask("who directed Heat")
    assert ans.ok and ans.text == Q_ANSWER
    assert ans.usage["retries"] == 1 and ans.usage["calls"] == 2
    assert len(llm_server.requests) == 3


def test_ask_timeout_reported_as_failed_stage(kg: Callable[..., Engine], llm_server: Any) -> None:
    eng = kg(llm=llm_config(llm_server, timeout=0.5))
    llm_server.reply(Q_PATTERN).delay(3.0)
    ans = eng.ask("who directed Heat", raise_errors=False)
    assert ans.failed_stage == "llm_answer" and ans.error_type == "LLMError"
    assert "timed out" in (ans.error or "")
    # what was done before the failure is kept: the pattern, the subgraphs, the evidence
    assert ans.pattern is not None and ans.subgraphs and "Michael Mann" in ans.evidence
    assert ans.timings["llm_answer"] >= 400
    assert roundtrip(ans)["error_type"] == "LLMError"
    # and raised, typed, by default
    llm_server.reply(Q_PATTERN).delay(3.0)
    with pytest.raises(LLMError, match="timed out"):
        eng.ask("who directed Heat")


def test_ask_refusal(kg: Callable[..., Engine], llm_server: Any) -> None:
    eng = kg(llm=llm_config(llm_server))
    llm_server.refusal("I can't help with movies.")
    with pytest.raises(LLMError, match="refused"):
        eng.ask("who directed Heat")
    llm_server.refusal("I can't help with movies.")
    ans = eng.ask("who directed Heat", raise_errors=False)
    assert ans.failed_stage == "llm_pattern" and "refused" in (ans.error or "")
    assert ans.usage["failures"] == 1


def test_aask_with_llm(kg: Callable[..., Engine], llm_server: Any) -> None:
    llm_server.reply(Q_PATTERN).reply(Q_ANSWER)
    eng = kg(llm=llm_config(llm_server))
    ans = asyncio.run(eng.aask("who directed Heat"))
    assert ans.ok and ans.text == Q_ANSWER and ans.usage["calls"] == 2
    assert [a.entity.name for a in ans.answers][:1] == ["Michael Mann"]


def test_ask_stream_with_llm(kg: Callable[..., Engine], llm_server: Any) -> None:
    llm_server.reply(Q_PATTERN).reply(Q_ANSWER)
    eng = kg(llm=llm_config(llm_server))
    events = list(eng.ask_stream("who directed Heat"))
    assert isinstance(events[0], PatternEvent) and isinstance(events[1], SubgraphsEvent)
    assert isinstance(events[-1], AnswerEvent)
    tokens = [e for e in events[2:-1]]
    assert len(tokens) > 3 and all(isinstance(t, TokenEvent) for t in tokens)
    assert "".join(t.text for t in tokens) == Q_ANSWER == events[-1].answer.text
    assert events[1].subgraphs[0].triples[0].tail.name == "Michael Mann"
    assert llm_server.requests[-1].get("stream") is True
    assert events[-1].answer.usage["calls"] == 2
    for e in events:
        json.dumps(e.to_dict())


def test_ask_stream_failure_reported(kg: Callable[..., Engine], llm_server: Any) -> None:
    llm_server.reply(Q_PATTERN).delay(3.0)
    eng = kg(llm=llm_config(llm_server, timeout=0.5))
    events = list(eng.ask_stream("who directed Heat", raise_errors=False))
    assert [e.kind for e in events] == ["pattern", "subgraphs", "answer"]
    assert events[-1].answer.failed_stage == "llm_answer" and "timed out" in events[-1].answer.error
    llm_server.reply(Q_PATTERN).delay(3.0)
    with pytest.raises(LLMError):
        list(eng.ask_stream("who directed Heat"))


def test_aask_stream_with_llm(kg: Callable[..., Engine], llm_server: Any) -> None:
    llm_server.reply(Q_PATTERN).reply(Q_ANSWER)
    eng = kg(llm=llm_config(llm_server))

    async def collect() -> list[Any]:
        return [e async for e in eng.aask_stream("who directed Heat")]

    events = asyncio.run(collect())
    assert [e.kind for e in events[:2]] == ["pattern", "subgraphs"] and events[-1].kind == "answer"
    assert "".join(e.text for e in events if e.kind == "token") == Q_ANSWER


def test_verify_with_llm(kg: Callable[..., Engine], llm_server: Any) -> None:
    eng = kg(llm=llm_config(llm_server))
    claim_pattern = ('{"divided": ["Heat was directed by Michael Mann"], '
                     '"triples": [["Heat", "directed_by", "Michael Mann"]]}')
    llm_server.reply(claim_pattern).reply("As graph [1] says so, the answer is True.")
    v = eng.verify("Heat was directed by Michael Mann.")
    assert v.label == SUPPORTED and v.method == "llm" and v.ok
    assert llm_server.prompts[0].startswith("You need to segment") and "Heat was directed by" in llm_server.prompts[0]
    assert llm_server.prompts[1].startswith("Please verify the statement")
    # the caller's pattern, the LLM's verdict
    llm_server.reply("The evidence shows another director, so the answer is False.")
    v = eng.verify("Heat was directed by Ridley Scott.", pattern={"triples": [["Heat", "directed_by", "Ridley Scott"]]})
    assert v.label == REFUTED and v.text and v.usage["calls"] == 1
    assert roundtrip(v)["label"] == REFUTED
    # async twin
    llm_server.reply("Graph [1] supports it: the answer is True.")
    v = asyncio.run(eng.averify("Heat was directed by Michael Mann.",
                                pattern={"triples": [["Heat", "directed_by", "Michael Mann"]]}))
    assert v.label == SUPPORTED
    # neither True nor False
    llm_server.reply("Hard to say from these graphs.")
    v = eng.verify("x", pattern={"triples": [["Heat", "directed_by", "Michael Mann"]]})
    assert v.label == NOT_ENOUGH_INFO and v.method == "llm" and v.text == "Hard to say from these graphs."
    # no evidence at all: no LLM call
    calls = len(llm_server.requests)
    v = eng.verify("x", pattern={"triples": [["Top Gun", "directed_by", "Al Pacino"]]}, k_node=1, k_rel=1)
    assert v.label == NOT_ENOUGH_INFO and not v.subgraphs and len(llm_server.requests) == calls


# ---------------------------------------------------------------------------------------------------------
# without an LLM
# ---------------------------------------------------------------------------------------------------------


def test_ask_with_pattern_no_llm(kg: Callable[..., Engine]) -> None:
    eng = kg()
    ans = eng.ask("who starred in Heat", pattern={"triples": [["Heat", "starred_actors", "UNKNOWN actor 1"]]}, k=2)
    assert ans.ok and ans.usage["calls"] == 0
    names = {a.entity.name for a in ans.answers}
    assert names == {"Al Pacino", "Robert De Niro"}
    assert ans.text in ("Al Pacino, Robert De Niro", "Robert De Niro, Al Pacino")
    assert "llm_answer" not in ans.timings and "retrieve" in ans.timings
    data = roundtrip(ans)
    assert data["pattern"] == {"triples": [["Heat", "starred_actors", "UNKNOWN actor 1"]]}
    assert len(data["subgraphs"]) == 2 and data["exact"] is True


def test_ask_two_hop_pattern(kg: Callable[..., Engine]) -> None:
    eng = kg()
    pattern = {"triples": [["UNKNOWN movie 1", "directed_by", "Michael Mann"],
                           ["UNKNOWN movie 1", "starred_actors", "UNKNOWN actor 2"]]}
    ans = eng.ask("who acted in films directed by Michael Mann", pattern=pattern, k=5)
    assert {a.entity.name for a in ans.answers if a.gsd < 1e-3} == {"Al Pacino", "Robert De Niro", "Tom Cruise"}
    assert [sg.gsd for sg in ans.subgraphs] == sorted(sg.gsd for sg in ans.subgraphs)


def test_neither_llm_nor_pattern(kg: Callable[..., Engine]) -> None:
    eng = kg()
    with pytest.raises(ConfigError) as err:
        eng.ask("who directed Heat")
    msg = str(err.value)
    assert "ISORAG_LLM_BASE_URL" in msg and "ISORAG_LLM_MODEL" in msg and "pattern=" in msg and "LLMConfig" in msg
    ans = eng.ask("who directed Heat", raise_errors=False)
    assert ans.failed_stage == "pattern" and ans.error_type == "ConfigError"
    v = eng.verify("Heat was directed by Michael Mann.", raise_errors=False)
    assert v.failed_stage == "pattern" and v.label == NOT_ENOUGH_INFO


def test_bad_caller_pattern(kg: Callable[..., Engine]) -> None:
    eng = kg()
    ans = eng.ask("?", pattern={"triples": [["UNKNOWN 1", "directed_by", "UNKNOWN 2"]]}, raise_errors=False)
    assert ans.failed_stage == "retrieve" and ans.error_type == "PatternError"
    ans = eng.ask("?", pattern="not a pattern", raise_errors=False)
    assert ans.failed_stage == "pattern" and ans.error_type == "PatternParseError"


def test_no_match(kg: Callable[..., Engine]) -> None:
    eng = kg()
    # only the nearest entity and relation as candidates (MatchSettings overrides for this call)
    ans = eng.ask("?", pattern={"triples": [["Top Gun", "starred_actors", "Al Pacino"],
                                            ["Top Gun", "release_year", "UNKNOWN 1"]]}, k_node=1, k_rel=1)
    assert ans.ok and not ans.subgraphs and "No subgraph" in ans.text and ans.warnings


def test_ask_stream_no_llm(kg: Callable[..., Engine]) -> None:
    eng = kg()
    events = list(eng.ask_stream("who directed Alien", pattern={"triples": [["Alien", "directed_by", "UNKNOWN 1"]]}))
    assert [e.kind for e in events] == ["pattern", "subgraphs", "token", "answer"]
    assert events[2].text == events[-1].answer.text
    # the text names the best answers; the others stay in Answer.answers with their (larger) GSD
    assert events[2].text.startswith("Ridley Scott (and ")
    assert events[-1].answer.answers[0].entity.name == "Ridley Scott"


def test_verify_rule_supported(kg: Callable[..., Engine]) -> None:
    eng = kg()
    v = eng.verify("Heat was directed by Michael Mann.", pattern={"triples": [["Heat", "directed_by", "Michael Mann"]]})
    assert isinstance(v, Verdict) and v.label == SUPPORTED and v.method == "rule"
    assert v.gsd == pytest.approx(0.0, abs=1e-3) and "Michael Mann" in v.evidence
    assert v.relaxed is None and "verify" in v.timings
    # direction-agnostic, as SimGRAG; case and spacing of names do not matter to the (uncased) embedder
    v = eng.verify("x", pattern={"triples": [["michael mann", "directed_by", "heat"]]})
    assert v.label == SUPPORTED
    # a two-triple claim
    v = eng.verify("x", pattern={"triples": [["Heat", "directed_by", "Michael Mann"],
                                             ["Heat", "release_year", "1995"]]})
    assert v.label == SUPPORTED and len(v.subgraphs[0].triples) == 2
    assert roundtrip(v)["label"] == SUPPORTED


def test_verify_rule_refuted(kg: Callable[..., Engine]) -> None:
    eng = kg()
    # another entity of the same relation: the KG has Heat's director, and it is someone else
    v = eng.verify("Heat was directed by Ridley Scott.", pattern={"triples": [["Heat", "directed_by", "Ridley Scott"]]})
    assert v.label == REFUTED and v.relaxed == "Ridley Scott"
    assert "Michael Mann" in v.evidence and "Michael Mann" in v.reason
    # a wrong year: the nearest-entity rule does not take 1995 for 1996
    v = eng.verify("Heat came out in 1996.", pattern={"triples": [["Heat", "release_year", "1996"]]})
    assert v.label in (REFUTED, NOT_ENOUGH_INFO)
    v = eng.verify("Heat came out in 1979.", pattern={"triples": [["Heat", "release_year", "1979"]]})
    assert v.label == REFUTED and "1995" in v.evidence
    # a wrong relation between entities the KG links otherwise
    v = eng.verify("Michael Mann starred in Heat.", pattern={"triples": [["Heat", "starred_actors", "Michael Mann"]]})
    assert v.label == REFUTED and v.relaxed is not None
    assert roundtrip(v)["relaxed"] == v.relaxed


def test_verify_rule_not_enough_info(kg: Callable[..., Engine]) -> None:
    eng = kg()
    # an entity the KG does not have
    v = eng.verify("Heat was directed by Steven Spielberg.",
                   pattern={"triples": [["Heat", "directed_by", "Steven Spielberg"]]})
    assert v.label == NOT_ENOUGH_INFO and "Steven Spielberg" in v.reason
    # a relation the KG does not have
    v = eng.verify("x", pattern={"triples": [["Heat", "filmed at altitude of", "Michael Mann"]]}, threshold=0.5)
    # (a far relation still has a nearest one: NOT_ENOUGH_INFO only when it is farther than relation_threshold)
    assert v.label in (NOT_ENOUGH_INFO, REFUTED)
    # every entity known, nothing about them in that relation
    v = eng.verify("Al Pacino was directed by Tom Cruise.",
                   pattern={"triples": [["Al Pacino", "directed_by", "Tom Cruise"]]})
    assert v.label == NOT_ENOUGH_INFO and "nothing" in v.reason
    # a threshold of 0 grounds only exact names
    v = eng.verify("x", pattern={"triples": [["Heat", "directed_by", "Michael Man"]]}, threshold=0.0)
    assert v.label == NOT_ENOUGH_INFO


def test_verify_many(kg: Callable[..., Engine]) -> None:
    eng = kg()
    claims = [
        ("Heat was directed by Michael Mann.", {"triples": [["Heat", "directed_by", "Michael Mann"]]}),
        {"claim": "Alien was directed by Michael Mann.",
         "pattern": {"triples": [["Alien", "directed_by", "Michael Mann"]]}},
        ("Heat was directed by Steven Spielberg.", {"triples": [["Heat", "directed_by", "Steven Spielberg"]]}),
        "Heat is good.",  # no pattern, no LLM: reported, not raised
    ]
    got = eng.verify_many(claims, concurrency=2)
    assert [v.label for v in got] == [SUPPORTED, REFUTED, NOT_ENOUGH_INFO, NOT_ENOUGH_INFO]
    assert [v.failed_stage for v in got] == [None, None, None, "pattern"]
    got = asyncio.run(eng.averify_many(claims[:2], concurrency=2))
    assert [v.label for v in got] == [SUPPORTED, REFUTED]


@withPackage("langchain_core")
def test_langchain_retriever(kg: Callable[..., Engine], llm_server: Any) -> None:
    from engine.integrations.langchain import IsoragRetriever

    eng = kg(llm=llm_config(llm_server))
    retriever = IsoragRetriever(engine=eng, k=2)
    docs = retriever.invoke('{"triples": [["Heat", "starred_actors", "UNKNOWN actor 1"]]}')
    assert len(docs) == 2 and llm_server.requests == []
    assert {d.metadata["mapping"]["UNKNOWN actor 1"] for d in docs} == {"Al Pacino", "Robert De Niro"}
    assert docs[0].metadata["gsd"] <= docs[1].metadata["gsd"] and docs[0].metadata["rank"] == 1
    assert docs[0].page_content.startswith('("Heat", "starred_actors", ')
    assert docs[0].metadata["pattern"] == {"triples": [["Heat", "starred_actors", "UNKNOWN actor 1"]]}
    llm_server.reply(Q_PATTERN)
    docs = eng.as_retriever(k=1).invoke("who directed Heat")
    assert docs[0].metadata["triples"] == [["Heat", "directed_by", "Michael Mann"]]
    assert docs[0].metadata["pattern_text"] == Q_PATTERN
    docs = asyncio.run(retriever.ainvoke('{"triples": [["Alien", "directed_by", "UNKNOWN 1"]]}'))
    assert docs[0].metadata["mapping"]["UNKNOWN 1"] == "Ridley Scott"
    with pytest.raises(ConfigError):
        IsoragRetriever(engine=kg()).invoke("who directed Heat")


# ---------------------------------------------------------------------------------------------------------
# few-shot examples (no database)
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shots", [0, 2, 12])
def test_fewshot_shots(shots: int) -> None:
    eng = Engine(EngineConfig(kg="fewshot_test", shots=shots), llm=False)
    for kind in ("pattern", "claim", "answer", "verify"):
        assert len(eng.fewshot(kind)) == shots


def test_fewshot_directory(tmp_path: Path) -> None:
    ex = {"query": "who founded Acme", "output": {"divided": ["Acme founded by"],
                                                  "triples": [["Acme", "founded_by", "UNKNOWN person 1"]]}}
    (tmp_path / "pattern.jsonl").write_text(json.dumps(ex) + "\n")
    (tmp_path / "mykg_answer.jsonl").write_text(json.dumps(
        {"query": "who founded Acme", "evidences": {"graph [1]": [["Acme", "founded_by", "Wile E."]]},
         "answer": "Wile E."}) + "\n")
    eng = Engine(EngineConfig(kg="fewshot_test", fewshot=str(tmp_path)), llm=False)
    assert eng.fewshot("pattern")[0]["query"] == "who founded Acme"
    assert eng.fewshot("answer")[0]["answer"] == "Wile E."
    with pytest.raises(ConfigError, match="verify.jsonl"):
        eng.fewshot("verify")
    assert Engine(EngineConfig(kg="fewshot_test", fewshot=None), llm=False).fewshot("pattern") == []
    with pytest.raises(ConfigError, match="directory"):
        Engine(EngineConfig(kg="fewshot_test", fewshot=str(tmp_path / "pattern.jsonl")), llm=False).fewshot("pattern")
