"""ask, aask, ask_stream and aask_stream (and verify, averify) drive one answering pipeline: on the same inputs they
give the same answer, evidence, answers and failed stage, without and with a triple scorer, with an LLM that answers
and one that fails. A small KG in the real Neo4j and Milvus; the LLM is the real ``openai`` client against the
scripted local server (tests/helpers/llm_server.py), which answers by the kind of prompt so that every driver hears the
same replies."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

import pytest
from helpers.kg import shared_kg
from helpers.llm_server import Reply, Status

from engine import (
    NOT_ENOUGH_INFO,
    REFUTED,
    SUPPORTED,
    Answer,
    AnswerEvent,
    Engine,
    LLMConfig,
    LLMError,
    TokenEvent,
    Verdict,
)
from loaders._model import TripleRecord

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

QUESTION = "who directed Heat"
Q_PATTERN = '{"divided": ["who directed Heat"], "triples": [["Heat", "directed_by", "UNKNOWN director 1"]]}'
Q_ANSWER = "According to graph [1], the director is Michael Mann."
PATTERN = {"triples": [["Heat", "directed_by", "UNKNOWN director 1"]]}
NO_MATCH = {"triples": [["Top Gun", "starred_actors", "Al Pacino"], ["Top Gun", "release_year", "UNKNOWN 1"]]}
CLAIM = "Heat was directed by Michael Mann."
C_PATTERN = '{"divided": ["Heat was directed by Michael Mann"], "triples": [["Heat", "directed_by", "Michael Mann"]]}'
C_VERDICT = "As graph [1] says so, the answer is True."


@pytest.fixture(scope="module")
def kg(neo4j_uri: str, milvus_uri: str, embedder: Any) -> Any:
    """The movie KG, loaded once for the module; yields a factory of engines on it."""
    records = [TripleRecord(h, r, t, i) for i, (h, r, t) in enumerate(MOVIES, start=1)]
    yield from shared_kg("drivers", records, neo4j_uri, milvus_uri, embedder)


@pytest.fixture(scope="module")
def checkpoint(kg: Callable[..., Engine], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DDE+MLP scorer for the KG, untrained (seeded): what it scores does not matter here, only that every
    driver gets the same."""
    import torch

    from engine.scoring.checkpoint import make_model, save_checkpoint

    eng = kg()
    torch.manual_seed(0)
    model = make_model("dde_mlp", eng.embedder.dim, hidden=16)
    out = tmp_path_factory.mktemp("drivers") / "scorer.ckpt"
    save_checkpoint(out, model, kg=eng.kg, embedding_model=eng.config.embedding_model,
                    embedding_slug=eng.embedder.slug, relation_types=sorted(eng.graph.relation_types()), hops=2,
                    max_edges=1000)
    return out


def script(server: Any, *, pattern: str = Q_PATTERN, fail: str | None = None) -> None:
    """The server replies by the kind of prompt (``pattern``, ``answer``, ``verify``); ``fail``: that kind gets
    an HTTP 400 (an LLMError at once, no retry)."""
    replies = {"pattern": pattern, "answer": Q_ANSWER, "verify": C_VERDICT}

    def respond(body: dict[str, Any]) -> Any:
        prompt = body["messages"][-1]["content"]
        kind = ("pattern" if prompt.startswith("You need to segment") else
                "answer" if prompt.startswith("Please answer") else
                "verify" if prompt.startswith("Please verify") else "other")
        if kind == fail:
            return Status(400, f"scripted failure of the {kind} call")
        return Reply(replies.get(kind, "?"))

    server.responder = respond


def make(kg: Callable[..., Engine], server: Any | None, scorer: Path | None) -> Engine:
    llm = False if server is None else LLMConfig(base_url=server.base_url, model="test-model", max_retries=0,
                                                  timeout=10.0)
    return kg(llm=llm) if scorer is None else kg(llm=llm, scorer=str(scorer))


# ---------------------------------------------------------------------------------------------------------
# what must be the same
# ---------------------------------------------------------------------------------------------------------


def answer_facts(a: Answer) -> dict[str, Any]:
    return {
        "text": a.text,
        "answers": [(x.entity.name, x.gsd) for x in a.answers],
        "subgraphs": [sg.to_dict() for sg in a.subgraphs],
        "evidence": a.evidence,
        "pattern": a.pattern.to_json() if a.pattern is not None else None,
        "pattern_text": a.pattern_text,
        "failed_stage": a.failed_stage,
        "error_type": a.error_type,
        "answer_source": a.answer_source,
        "scored": None if a.scored is None else [(t.as_tuple(), round(t.score, 6)) for t in a.scored.triples],
        "scored_answers": [x.entity.name for x in a.scored_answers],
        "warnings": a.warnings,
        "stages": sorted(a.timings),
        "llm": {n: a.usage.get(n) for n in ("calls", "failures", "prompt_tokens", "completion_tokens")},
    }


def collect(events: list[Any]) -> Answer:
    """The stream's answer, after checking the events around it."""
    assert events and isinstance(events[-1], AnswerEvent)
    assert not any(isinstance(e, AnswerEvent) for e in events[:-1])
    ans = events[-1].answer
    kinds = [e.kind for e in events[:-1]]
    head = (["pattern"] if ans.pattern is not None else []) + (["subgraphs"] if ans.retrieval is not None else [])
    # with a triple scorer, its selected triples (ScoredEvent) come before the answer's tokens
    head += ["scored"] if ans.scored is not None and ans.scored.triples else []
    assert kinds[:len(head)] == head and set(kinds[len(head):]) <= {"token"}, kinds
    if ans.ok:
        assert "".join(e.text for e in events if isinstance(e, TokenEvent)) == ans.text
    return ans


def four_answers(eng: Engine, query: str, **kw: Any) -> dict[str, Answer]:
    async def astream() -> list[Any]:
        return [e async for e in eng.aask_stream(query, **kw)]

    return {
        "ask": eng.ask(query, **kw),
        "aask": asyncio.run(eng.aask(query, **kw)),
        "ask_stream": collect(list(eng.ask_stream(query, **kw))),
        "aask_stream": collect(asyncio.run(astream())),
    }


def assert_same(results: dict[str, Any], facts: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    first, *rest = results
    want = facts(results[first])
    for name in rest:
        got = facts(results[name])
        diff = {k: (want[k], got[k]) for k in want if want[k] != got[k]}
        assert not diff, f"{name} differs from {first}: {diff}"
    return want


# ---------------------------------------------------------------------------------------------------------
# ask, aask, ask_stream, aask_stream
# ---------------------------------------------------------------------------------------------------------

# (id, whether the engine has an LLM, what the LLM fails, ask's keyword arguments, what ask gives)
CASES = [
    ("no-llm pattern", False, None, {"pattern": PATTERN}, {"answer_source": "pattern", "failed_stage": None}),
    ("no-llm no-match", False, None, {"pattern": NO_MATCH, "k_node": 1, "k_rel": 1},
     {"answer_source": "pattern", "failed_stage": None}),
    ("no-llm no-pattern", False, None, {}, {"failed_stage": "pattern"}),
    ("llm", True, None, {}, {"answer_source": "llm", "text": Q_ANSWER}),
    ("llm given pattern", True, None, {"pattern": PATTERN}, {"answer_source": "llm", "text": Q_ANSWER}),
    ("llm unparsable pattern", True, "unparsable", {}, {"failed_stage": "llm_pattern"}),
    ("llm fails on the pattern", True, "pattern", {}, {"failed_stage": "llm_pattern", "error_type": "LLMError"}),
    ("llm fails on the answer", True, "answer", {}, {"failed_stage": "llm_answer", "error_type": "LLMError"}),
]
# with a scorer: the same inputs; where the scorer changes what ask gives
SCORED = {
    "no-llm no-match": {"answer_source": "scorer", "failed_stage": None},
    "no-llm no-pattern": {"answer_source": "scorer", "failed_stage": None},
    "llm unparsable pattern": {"answer_source": "llm", "failed_stage": None, "text": Q_ANSWER},
}


@pytest.mark.parametrize("with_scorer", [False, True], ids=["no-scorer", "scorer"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_the_four_ask_drivers_agree(kg: Callable[..., Engine], checkpoint: Path, llm_server: Any, case: tuple,
                                     with_scorer: bool) -> None:
    name, has_llm, fail, kw, expected = case
    if fail == "unparsable":
        script(llm_server, pattern="no idea what you mean")
    else:
        script(llm_server, fail=fail)
    eng = make(kg, llm_server if has_llm else None, checkpoint if with_scorer else None)
    got = assert_same(four_answers(eng, QUESTION, raise_errors=False, **kw), answer_facts)
    if with_scorer:
        expected = SCORED.get(name, expected)
    assert {k: got[k] for k in expected} == expected
    if with_scorer and got["failed_stage"] not in ("pattern", "llm_pattern"):
        assert got["scored"] is not None and "scoring" in got["stages"]
        if got["scored"]:
            assert "[confidence: " in got["evidence"]
    if not with_scorer:
        assert got["scored"] is None


@pytest.mark.parametrize("fail", ["pattern", "answer"])
def test_the_four_ask_drivers_raise_the_same(kg: Callable[..., Engine], checkpoint: Path, llm_server: Any,
                                             fail: str) -> None:
    script(llm_server, fail=fail)
    eng = make(kg, llm_server, checkpoint)

    async def astream() -> list[Any]:
        return [e async for e in eng.aask_stream(QUESTION)]

    calls = {
        "ask": lambda: eng.ask(QUESTION),
        "aask": lambda: asyncio.run(eng.aask(QUESTION)),
        "ask_stream": lambda: list(eng.ask_stream(QUESTION)),
        "aask_stream": lambda: asyncio.run(astream()),
    }
    for call in calls.values():
        with pytest.raises(LLMError, match=f"scripted failure of the {fail} call"):
            call()


def test_a_stream_closed_early_counts_its_calls(kg: Callable[..., Engine], llm_server: Any) -> None:
    script(llm_server)
    eng = make(kg, llm_server, None)
    stream = eng.ask_stream(QUESTION)
    kinds = [next(stream).kind for _ in range(3)]
    assert kinds == ["pattern", "subgraphs", "token"]
    stream.close()
    assert eng.llm.stats.calls == 2 and eng.llm.stats.failures == 0

    async def first_three() -> list[str]:
        events = eng.aask_stream(QUESTION)
        kinds = [(await events.__anext__()).kind for _ in range(3)]
        await events.aclose()
        # the LLM's stream is closed and counted at once, not when the generator is collected
        assert eng.llm.stats.calls == 4 and eng.llm.stats.failures == 0
        return kinds

    assert asyncio.run(first_three()) == ["pattern", "subgraphs", "token"]


def test_a_stage_time_leaves_out_the_caller_holding_tokens(kg: Callable[..., Engine], llm_server: Any) -> None:
    import time

    script(llm_server)
    eng = make(kg, llm_server, None)
    events = []
    for event in eng.ask_stream(QUESTION, pattern=PATTERN):
        events.append(event)
        if isinstance(event, TokenEvent):
            time.sleep(0.1)
    ans = events[-1].answer
    held_ms = 100.0 * sum(isinstance(e, TokenEvent) for e in events)
    assert held_ms >= 500 and ans.timings["total"] >= held_ms
    assert ans.timings["llm_answer"] < held_ms / 2, ans.timings


# ---------------------------------------------------------------------------------------------------------
# verify, averify
# ---------------------------------------------------------------------------------------------------------


def verdict_facts(v: Verdict) -> dict[str, Any]:
    return {
        "label": v.label,
        "method": v.method,
        "reason": v.reason,
        "text": v.text,
        "relaxed": v.relaxed,
        "gsd": v.gsd,
        "evidence": v.evidence,
        "subgraphs": [sg.to_dict() for sg in v.subgraphs],
        "pattern": v.pattern.to_json() if v.pattern is not None else None,
        "failed_stage": v.failed_stage,
        "error_type": v.error_type,
        "warnings": v.warnings,
        "stages": sorted(v.timings),
        "llm": {n: v.usage.get(n) for n in ("calls", "failures", "prompt_tokens", "completion_tokens")},
    }


VERIFY_CASES = [
    ("rule supported", False, None, {"pattern": {"triples": [["Heat", "directed_by", "Michael Mann"]]}},
     {"label": SUPPORTED, "method": "rule"}),
    ("rule refuted", False, None, {"pattern": {"triples": [["Heat", "directed_by", "Ridley Scott"]]}},
     {"label": REFUTED, "method": "rule"}),
    ("rule no pattern", False, None, {}, {"label": NOT_ENOUGH_INFO, "failed_stage": "pattern"}),
    ("llm", True, None, {}, {"label": SUPPORTED, "method": "llm"}),
    ("llm no evidence", True, None, {"pattern": {"triples": [["Top Gun", "directed_by", "Al Pacino"]]},
                                     "k_node": 1, "k_rel": 1}, {"label": NOT_ENOUGH_INFO, "method": "llm"}),
    ("llm fails on the pattern", True, "pattern", {}, {"label": NOT_ENOUGH_INFO, "failed_stage": "llm_pattern"}),
    ("llm fails on the verdict", True, "verify", {}, {"label": NOT_ENOUGH_INFO, "failed_stage": "llm_verify"}),
]


@pytest.mark.parametrize("case", VERIFY_CASES, ids=[c[0] for c in VERIFY_CASES])
def test_verify_and_averify_agree(kg: Callable[..., Engine], llm_server: Any, case: tuple) -> None:
    _, has_llm, fail, kw, expected = case
    script(llm_server, pattern=C_PATTERN, fail=fail)
    eng = make(kg, llm_server if has_llm else None, None)
    got = assert_same({"verify": eng.verify(CLAIM, raise_errors=False, **kw),
                       "averify": asyncio.run(eng.averify(CLAIM, raise_errors=False, **kw))}, verdict_facts)
    assert {k: got[k] for k in expected} == expected
    if fail is not None:
        with pytest.raises(LLMError):
            eng.verify(CLAIM, **kw)
        with pytest.raises(LLMError):
            asyncio.run(eng.averify(CLAIM, **kw))
