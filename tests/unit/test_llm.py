"""engine.llm and engine.answering.prompting, with the real ``openai`` client over HTTP against a scripted local
server."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from engine._errors import ConfigError, LLMError, PatternParseError
from engine.llm import LLM, LangChainLLM, LLMConfig, OpenAILLM, make_llm
from engine.retrieval.pattern import Pattern
from engine.answering.prompting import (
    agenerate_pattern,
    generate_pattern,
    load_fewshot,
    load_prompt,
    parse_verdict,
    render_answer_prompt,
    render_pattern_prompt,
    render_verify_prompt,
)
from helpers.llm_server import Raw, Reply, Status
from helpers.marks import withPackage

GOOD = (
    'Sure! {"divided": ["the director of Heat", "this director also directed other films"], '
    '"triples": [["Heat", "directed_by", "UNKNOWN director 1"], '
    '["UNKNOWN movie 1", "directed_by", "UNKNOWN director 1"]]}'
)
GOOD_TRIPLES = (
    ("Heat", "directed_by", "UNKNOWN director 1"),
    ("UNKNOWN movie 1", "directed_by", "UNKNOWN director 1"),
)
QUERY = "the director of Heat also directed which films"
ENV_NAMES = [f"ISORAG_LLM_{n.upper()}" for n in LLMConfig.__dataclass_fields__] + [
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
]


@pytest.fixture
def clean_env(monkeypatch):
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def make(server, **kw) -> OpenAILLM:
    kw = {"retry_backoff": 0.01, "timeout": 10.0, **kw}
    return OpenAILLM(LLMConfig(base_url=server.base_url, model="test-model", **kw))


# ---------------------------------------------------------------------------------------------------------
# Pattern generation over HTTP
# ---------------------------------------------------------------------------------------------------------


def test_good_pattern(llm_server):
    llm_server.reply(GOOD)
    llm = make(llm_server)
    pattern, text = generate_pattern(llm, QUERY, "demo")
    assert isinstance(pattern, Pattern)
    assert pattern.triples == GOOD_TRIPLES
    assert text == GOOD
    assert len(llm_server.requests) == 1
    body = llm_server.requests[0]
    assert body["model"] == "test-model"
    assert body["temperature"] == 0.2 and body["top_p"] == 0.1 and body["max_tokens"] == 1024
    assert body["seed"] == 0
    assert body["messages"] == [{"role": "user", "content": render_pattern_prompt(QUERY, "demo")}]
    prompt = llm_server.prompts[0]
    assert prompt.startswith("You need to segment the given query")
    assert prompt.rstrip().endswith(f'query: "{QUERY}"')
    assert "12. query:" in prompt and "13. query:" not in prompt
    assert llm.stats.calls == 1 and llm.stats.retries == 0 and llm.stats.prompt_tokens == 11


def test_malformed_then_good(llm_server):
    bad = "Here is the extracted knowledge graph structure: Heat was directed by somebody."
    llm_server.reply(bad).reply(GOOD)
    pattern, text = generate_pattern(make(llm_server), QUERY, "demo")
    assert pattern.triples == GOOD_TRIPLES and text == GOOD
    first, second = llm_server.prompts
    assert second.startswith(first)
    assert "Your previous output was:\n" + bad in second
    assert "each triple a JSON list of three strings" in second


def test_malformed_twice_raises_keeping_text(llm_server):
    llm_server.reply("no idea").reply('{"triples": [["Heat", "directed_by"]]}')
    with pytest.raises(PatternParseError) as info:
        generate_pattern(make(llm_server), QUERY, "demo")
    assert info.value.text == '{"triples": [["Heat", "directed_by"]]}'
    assert "2 attempt(s)" in str(info.value)
    assert len(llm_server.requests) == 2


def test_no_retry_when_retries_is_zero(llm_server):
    llm_server.reply("nothing useful")
    with pytest.raises(PatternParseError) as info:
        generate_pattern(make(llm_server), QUERY, "demo", retries=0)
    assert info.value.text == "nothing useful" and len(llm_server.requests) == 1


def test_claim_pattern_uses_claim_examples(llm_server):
    llm_server.reply('{"divided": ["x"], "triples": [("Heat", "directed_by", "Michael Mann"),]}')
    pattern, _ = generate_pattern(make(llm_server), "Heat was directed by Michael Mann.", "demo", claim=True)
    assert pattern.triples == (("Heat", "directed_by", "Michael Mann"),)  # tuples and trailing comma: read
    assert "Jack Nicholson starred in a film written by Robert Towne" in llm_server.prompts[0]


# ---------------------------------------------------------------------------------------------------------
# Retries, timeouts, refusals
# ---------------------------------------------------------------------------------------------------------


def test_429_then_success_honours_retry_after(llm_server):
    llm_server.status(429, retry_after=1).reply("fine")
    llm = make(llm_server)
    started = time.perf_counter()
    assert llm.complete("hi") == "fine"
    assert time.perf_counter() - started >= 0.95  # waited as asked, not the 0.01 s backoff
    assert llm.stats.retries == 1 and llm.stats.calls == 1 and llm.stats.failures == 0
    assert len(llm_server.requests) == 2


def test_500_then_success(llm_server):
    llm_server.status(500).status(503).reply("fine")
    llm = make(llm_server)
    assert llm.complete("hi") == "fine"
    assert llm.stats.retries == 2 and len(llm_server.requests) == 3


def test_5xx_until_retries_run_out(llm_server):
    llm_server.push(*[Status(502, "bad gateway")] * 5)
    llm = make(llm_server, max_retries=2)
    with pytest.raises(LLMError, match="HTTP 502.*3 attempt"):
        llm.complete("hi")
    assert len(llm_server.requests) == 3
    assert llm.stats.retries == 2 and llm.stats.failures == 1


def test_4xx_fails_at_once(llm_server):
    llm_server.status(400, message="model not found").reply("never")
    llm = make(llm_server)
    with pytest.raises(LLMError, match="HTTP 400") as info:
        llm.complete("hi")
    assert "model not found" in info.value.text
    assert len(llm_server.requests) == 1 and llm.stats.retries == 0


def test_too_long_retry_after_fails(llm_server):
    llm_server.status(429, retry_after=3600).reply("never")
    with pytest.raises(LLMError, match="retry after 3600s"):
        make(llm_server).complete("hi")
    assert len(llm_server.requests) == 1


def test_connection_error_is_retried_then_reported():
    # a port nobody listens on: connection refused on every attempt
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = OpenAILLM(
        LLMConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=2, retry_backoff=0.01)
    )
    with pytest.raises(LLMError, match="connection error"):
        llm.complete("hi")
    assert llm.stats.retries == 2


def test_timeout(llm_server):
    llm_server.delay(5.0)
    llm = make(llm_server, timeout=0.5)
    started = time.perf_counter()
    with pytest.raises(LLMError, match=r"timed out after 0.5s"):
        llm.complete("hi")
    elapsed = time.perf_counter() - started
    assert 0.45 <= elapsed < 3.0
    assert llm.stats.failures == 1


def test_refusal(llm_server):
    llm_server.refusal("I cannot help with that request.")
    with pytest.raises(LLMError, match="refused") as info:
        make(llm_server).complete("hi")
    assert info.value.text == "I cannot help with that request."


def test_content_filter_and_empty_answers(llm_server):
    llm_server.reply("partial", finish_reason="content_filter").reply("   ")
    llm = make(llm_server)
    with pytest.raises(LLMError, match="content filter") as info:
        llm.complete("hi")
    assert info.value.text == "partial"
    with pytest.raises(LLMError, match="empty answer"):
        llm.complete("hi")
    assert llm.stats.failures == 2


def test_garbled_response_is_an_llm_error(llm_server):
    llm_server.push(Raw(b"<html>502 from some proxy</html>"))
    with pytest.raises(LLMError, match="JSONDecodeError"):
        make(llm_server, max_retries=0).complete("hi")


def test_system_message_is_sent(llm_server):
    make(llm_server).complete("question", system="be brief")
    assert llm_server.requests[0]["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "question"},
    ]


def test_optional_sampling_settings_are_left_out(llm_server):
    make(llm_server, top_p=None, seed=None, temperature=0.0, max_tokens=50).complete("hi")
    body = llm_server.requests[0]
    assert "top_p" not in body and "seed" not in body
    assert body["temperature"] == 0.0 and body["max_tokens"] == 50


# ---------------------------------------------------------------------------------------------------------
# Streaming and async
# ---------------------------------------------------------------------------------------------------------


def test_streaming_tokens(llm_server):
    llm_server.reply("According to graph [1], the director is Michael Mann.")
    llm = make(llm_server)
    tokens = list(llm.stream("who directed Heat"))
    assert len(tokens) > 5
    assert "".join(tokens) == "According to graph [1], the director is Michael Mann."
    body = llm_server.requests[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert llm.stats.calls == 1 and llm.stats.completion_tokens == len(tokens)


def test_streaming_refusal(llm_server):
    llm_server.refusal("no")
    with pytest.raises(LLMError, match="refused"):
        list(make(llm_server).stream("hi"))


def test_streaming_timeout_between_tokens(llm_server):
    llm_server.push(Reply("one two three", token_delay=5.0))
    llm = make(llm_server, timeout=0.5)
    started = time.perf_counter()
    with pytest.raises(LLMError, match="timed out after 0.5s while streaming"):
        list(llm.stream("hi"))
    assert time.perf_counter() - started < 3.0
    assert llm.stats.failures == 1


def test_streaming_retries_before_the_first_token(llm_server):
    llm_server.status(500).reply("a b")
    llm = make(llm_server)
    assert list(llm.stream("hi")) == ["a", " b"]
    assert llm.stats.retries == 1


def test_async_complete_stream_and_pattern(llm_server):
    llm_server.status(429, retry_after=0).reply("async answer").reply("x y z").reply(GOOD)
    llm = make(llm_server)

    async def main():
        text = await llm.acomplete("hi")
        tokens = [t async for t in llm.astream("hi")]
        pattern, _ = await agenerate_pattern(llm, QUERY, "demo")
        await llm.aclose()
        return text, tokens, pattern

    text, tokens, pattern = asyncio.run(main())
    assert text == "async answer" and tokens == ["x", " y", " z"]
    assert pattern.triples == GOOD_TRIPLES
    assert llm.stats.retries == 1 and llm.stats.calls == 3
    # a second event loop gets its own client
    llm_server.reply("again")
    assert asyncio.run(llm.acomplete("hi")) == "again"


def test_async_timeout(llm_server):
    llm_server.delay(5.0)
    llm = make(llm_server, timeout=0.5)
    started = time.perf_counter()
    with pytest.raises(LLMError, match="timed out after 0.5s"):
        asyncio.run(llm.acomplete("hi"))
    assert time.perf_counter() - started < 3.0


# ---------------------------------------------------------------------------------------------------------
# Concurrency
# ---------------------------------------------------------------------------------------------------------


def test_concurrency_limit_across_threads(llm_server):
    llm_server.default = None
    llm_server.push(*[_slow(f"answer {i}") for i in range(6)])
    llm = make(llm_server, concurrency=2)
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda i: llm.complete(f"q{i}"), range(6)))
    assert sorted(answers) == sorted(f"answer {i}" for i in range(6))
    assert llm_server.max_active == 2
    assert llm.stats.calls == 6


def test_concurrency_limit_across_tasks(llm_server):
    llm_server.push(*[_slow("ok") for _ in range(6)])
    llm = make(llm_server, concurrency=2)

    async def main():
        return await asyncio.gather(*(llm.acomplete(f"q{i}") for i in range(6)))

    assert asyncio.run(main()) == ["ok"] * 6
    assert llm_server.max_active == 2


def test_concurrency_limit_shared_by_threads_and_tasks(llm_server):
    llm_server.push(*[_slow("ok") for _ in range(8)])
    llm = make(llm_server, concurrency=2)

    async def tasks():
        return await asyncio.gather(*(llm.acomplete("a") for _ in range(4)))

    with ThreadPoolExecutor(5) as pool:
        thread_calls = [pool.submit(llm.complete, "t") for _ in range(4)]
        async_calls = pool.submit(asyncio.run, tasks())
        assert [f.result() for f in thread_calls] == ["ok"] * 4
        assert async_calls.result() == ["ok"] * 4
    assert llm_server.max_active == 2


def test_cancelled_waiter_does_not_leak_a_slot(llm_server):
    llm_server.push(*[_slow("ok", 0.5) for _ in range(3)])
    llm = make(llm_server, concurrency=1)

    async def main():
        first = asyncio.create_task(llm.acomplete("a"))
        await asyncio.sleep(0.1)
        waiting = asyncio.create_task(llm.acomplete("b"))
        await asyncio.sleep(0.05)
        waiting.cancel()
        assert await first == "ok"
        with pytest.raises(asyncio.CancelledError):
            await waiting
        return await asyncio.wait_for(llm.acomplete("c"), 5)

    assert asyncio.run(main()) == "ok"
    assert len(llm_server.requests) == 2


def _slow(text: str, delay: float = 0.3) -> Reply:
    return Reply(text, delay=delay)


# ---------------------------------------------------------------------------------------------------------
# langchain-core
# ---------------------------------------------------------------------------------------------------------


@withPackage("langchain_core")
def test_langchain_fake_chat_model():
    from langchain_core.language_models import fake_chat_models as fake_models

    model = fake_models.FakeListChatModel(responses=["not a pattern", GOOD, "stream me", "async"])
    llm = make_llm(model)
    assert isinstance(llm, LangChainLLM) and llm.model is model
    pattern, _ = generate_pattern(llm, QUERY, "demo")
    assert pattern.triples == GOOD_TRIPLES
    assert "".join(llm.stream("hi")) == "stream me"
    assert asyncio.run(llm.acomplete("hi")) == "async"
    assert llm.stats.calls == 4


@withPackage("langchain_core")
def test_langchain_errors_become_llm_errors():
    from langchain_core.language_models import fake_chat_models as fake_models

    llm = LangChainLLM(fake_models.FakeListChatModel(responses=["abc"], error_on_chunk_number=1))
    with pytest.raises(LLMError, match="chat model failed"):
        list(llm.stream("hi"))
    llm = LangChainLLM(fake_models.FakeListChatModel(responses=[""]))
    with pytest.raises(LLMError, match="empty"):
        llm.complete("hi")
    assert llm.stats.failures == 1


# ---------------------------------------------------------------------------------------------------------
# Configuration and make_llm
# ---------------------------------------------------------------------------------------------------------


def test_config_from_env(clean_env, llm_server):
    clean_env.setenv("OPENAI_BASE_URL", "http://ignored.example/v1")
    clean_env.setenv("ISORAG_LLM_BASE_URL", llm_server.base_url)
    clean_env.setenv("OPENAI_API_KEY", "sk-test")
    clean_env.setenv("ISORAG_LLM_MODEL", "llama3:70b")
    clean_env.setenv("ISORAG_LLM_TEMPERATURE", "0")
    clean_env.setenv("ISORAG_LLM_TOP_P", "none")
    clean_env.setenv("ISORAG_LLM_CONCURRENCY", "7")
    config = LLMConfig.from_env(max_tokens=64)
    assert config.base_url == llm_server.base_url and config.api_key == "sk-test"
    assert config.model == "llama3:70b" and config.temperature == 0.0 and config.top_p is None
    assert config.concurrency == 7 and config.max_tokens == 64 and config.seed == 0
    assert config.configured
    assert "sk-test" not in repr(config)
    llm = make_llm()  # None + configured environment
    assert isinstance(llm, OpenAILLM)
    assert llm.complete("hi") == "ok"
    assert llm_server.requests[0]["model"] == "llama3:70b"
    assert llm_server.headers[0]["authorization"] == "Bearer sk-test"


def test_config_from_env_errors(clean_env):
    clean_env.setenv("ISORAG_LLM_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match="ISORAG_LLM_TIMEOUT"):
        LLMConfig.from_env()
    with pytest.raises(ConfigError, match="unknown LLM setting"):
        LLMConfig.from_env(temprature=0.1)


def test_config_from_files(tmp_path):
    toml = tmp_path / "isorag.toml"
    toml.write_text('[neo4j]\nuri = "bolt://x"\n\n[llm]\nbase_url = "http://h:8000/v1"\nmodel = "m"\n'
                    "temperature = 0\ntop_p = 0.5\nconcurrency = 2\n")
    config = LLMConfig.from_file(toml)
    assert (config.base_url, config.model, config.temperature, config.top_p, config.concurrency) == (
        "http://h:8000/v1", "m", 0, 0.5, 2)
    js = tmp_path / "llm.json"
    js.write_text(json.dumps({"model": "gpt-x", "api_key": "k", "timeout": 5}))
    config = LLMConfig.from_file(js)
    assert config.model == "gpt-x" and config.timeout == 5 and config.configured
    bad = tmp_path / "bad.toml"
    bad.write_text('[llm]\nmodle = "m"\n')
    with pytest.raises(ConfigError, match="modle"):
        LLMConfig.from_file(bad)
    with pytest.raises(ConfigError, match="concurrency"):
        LLMConfig.from_file(_write(tmp_path / "c.json", {"concurrency": 0}))
    with pytest.raises(ConfigError, match="cannot read"):
        LLMConfig.from_file(tmp_path / "missing.toml")


def _write(path, obj):
    path.write_text(json.dumps(obj))
    return path


def test_configured_and_make_llm(clean_env):
    assert not LLMConfig().configured
    assert not LLMConfig(base_url="http://x/v1").configured
    assert LLMConfig(base_url="http://x/v1", model="m").configured
    assert LLMConfig(api_key="k", model="m").configured
    assert make_llm() is None  # nothing in the environment
    with pytest.raises(ConfigError, match="model"):
        make_llm(LLMConfig(base_url="http://x/v1"))
    llm = make_llm(LLMConfig(base_url="http://x/v1", model="m"))
    assert isinstance(llm, OpenAILLM) and make_llm(llm) is llm
    with pytest.raises(ConfigError, match="cannot use"):
        make_llm(42)


def test_base_class_defaults():
    class Echo(LLM):
        def complete(self, prompt, *, system=None):
            return prompt.upper()

    llm = Echo()
    assert list(llm.stream("ab")) == ["AB"]

    async def main():
        return await llm.acomplete("x"), [t async for t in llm.astream("y")]

    assert asyncio.run(main()) == ("X", ["Y"])


# ---------------------------------------------------------------------------------------------------------
# Prompts and few-shot files
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["pattern", "claim", "answer", "verify"])
def test_bundled_fewshot(kind):
    examples = load_fewshot("demo", kind=kind)
    assert len(examples) == 12
    assert load_fewshot(f"demo_{kind}", n=4) == examples[:4]
    assert len({ex["query"] for ex in examples}) == 12


def test_bundled_pattern_examples_use_kg_relations():
    relations = {"directed_by", "written_by", "starred_actors", "release_year", "in_language", "has_tags",
                 "has_genre", "has_imdb_votes", "has_imdb_rating"}
    hops = set()
    for ex in load_fewshot("demo", kind="pattern"):
        pattern = Pattern.from_json(ex["output"])
        assert {e.label for e in pattern.edges} <= relations
        assert pattern.unknown_nodes, ex["query"]
        hops.add(len(pattern))
    assert hops == {1, 2, 3}


def test_prompt_templates_keep_the_papers_instructions():
    question = load_prompt("pattern_question")
    assert "NEVER use unspecific words like 'in', 'appear in', 'for', 'of' etc." in question
    assert "'UNKNOWN artist 1', 'UNKNOWN relation 1'" in question
    assert '"triples": [ ["head", "relation", "tail"], ... ]' in question
    assert load_prompt("pattern_claim.txt") == question  # Table 17 differs only in its examples
    assert "Return all possible answer for every evidence graph" in load_prompt("answer")
    assert "the answer is 'True' or 'False'" in load_prompt("verify")
    with pytest.raises(ConfigError, match="known"):
        load_prompt("nope")


def test_render_answer_and_verify_prompts():
    graphs = [[("Heat", "directed_by", "Michael Mann")], [("Heat", "written_by", "Michael Mann")]]
    prompt = render_answer_prompt("who directed {examples} Heat", graphs, "demo")
    assert prompt.rstrip().endswith(
        'query: "who directed {examples} Heat"\nevidences: graph [1]: [("Heat", "directed_by", "Michael Mann")],'
        '\ngraph [2]: [("Heat", "written_by", "Michael Mann")]'
    )
    assert "12. query:" in prompt and "answer: According to graph [1], the director is Michael Mann." in prompt
    verify = render_verify_prompt("Heat is a comedy.", 'graph [1]: [("Heat", "has_genre", "Crime")]', [])
    assert "(none)" in verify and 'evidences: graph [1]: [("Heat", "has_genre", "Crime")]' in verify


def test_user_fewshot_file(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text(
        "# my KG\n"
        + json.dumps({"query": "who founded Acme", "output": {"divided": ["x"],
                                                              "triples": [["Acme", "founder", "UNKNOWN person 1"]]}})
        + "\n\n"
    )
    examples = load_fewshot(str(path))
    assert len(examples) == 1
    prompt = render_pattern_prompt("who runs Acme", path)
    assert '["Acme", "founder", "UNKNOWN person 1"]' in prompt
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"query": "q", "output": {"triples": [["a", "b"]]}}) + "\n")
    with pytest.raises(ConfigError, match=r"bad.jsonl:1: .*triple 1"):
        load_fewshot(bad)
    with pytest.raises(ConfigError, match="bundled"):
        load_fewshot("no_such_kg", kind="pattern")
    with pytest.raises(ConfigError, match="not found"):
        load_fewshot(tmp_path / "missing.jsonl")


@pytest.mark.parametrize(
    "text, verdict",
    [
        ("As graph [1] says that Heat was directed by Michael Mann, the answer is True.", True),
        ("Mick Walker is the manager but not the leader, the answer is 'False'.", False),
        ("The answer is: FALSE", False),
        ("True", True),
        ("false.", False),
        ("It is a false claim that True Grit is a comedy, so the answer is False.", False),
        ("Graph [1] shows nothing relevant. False", False),
        ("I do not know.", None),
        ("", None),
    ],
)
def test_parse_verdict(text, verdict):
    assert parse_verdict(text) is verdict


def test_stats_are_thread_safe(llm_server):
    llm = make(llm_server)
    threads = [threading.Thread(target=lambda: [llm.stats.add(calls=1) for _ in range(1000)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert llm.stats.snapshot()["calls"] == 4000
    llm.stats.reset()
    assert llm.stats.calls == 0
