"""SimGRAG's prompts (Cai, Guo, Pei, Bian, Zheng, "SimGRAG: Leveraging Similar Subgraphs for Knowledge Graphs
Driven Retrieval-Augmented Generation", Appendix B, Tables 16-19) and their few-shot examples.

The instruction blocks live as text files in ``engine/answering/prompts/`` (``pattern_question``, ``pattern_claim``,
``answer``, ``verify``), with ``{examples}``, ``{query}`` and ``{evidences}`` placeholders. Few-shot examples
are per KG, one JSON object a line, in ``engine/answering/prompts/fewshot/<kg>_<kind>.jsonl`` for the bundled demo KG
(``kind``: ``pattern``, ``claim``, ``answer``, ``verify``); a user points at their own file by path instead.

Example lines::

    pattern, claim:   {"query": "...", "output": {"divided": ["..."], "triples": [["h", "r", "t"], ...]}}
    answer, verify:   {"query": "...", "evidences": {"graph [1]": [["h", "r", "t"], ...], ...}, "answer": "..."}

``evidences`` may also be a plain list of graphs; a verify example may say ``"claim"`` for ``"query"``.

:func:`pattern_exchange` gets a pattern from the LLM and parses it strictly (:meth:`Pattern.parse`), retrying
with a short corrective message (:func:`generate_pattern` runs it); :func:`parse_verdict` reads a True/False answer.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Generator, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from engine._errors import ConfigError, PatternError, PatternParseError
from engine.llm import LLM
from engine.retrieval.pattern import Pattern
from engine.retrieval.verbalize import verbalize_subgraphs

__all__ = [
    "DEFAULT_FEWSHOT_KG",
    "DEFAULT_SHOTS",
    "FEWSHOT_KINDS",
    "agenerate_pattern",
    "generate_pattern",
    "load_fewshot",
    "load_prompt",
    "parse_verdict",
    "pattern_exchange",
    "render_answer_prompt",
    "render_pattern_prompt",
    "render_verify_prompt",
]

log = logging.getLogger("isorag.prompting")

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
FEWSHOT_DIR = PROMPTS_DIR / "fewshot"
#: The bundled examples: the MetaQA-style movie demo KG.
DEFAULT_FEWSHOT_KG = "demo"
#: SimGRAG uses 12 shots for both the pattern and the answer prompt.
DEFAULT_SHOTS = 12
FEWSHOT_KINDS = ("pattern", "claim", "answer", "verify")
_PLACEHOLDER = re.compile(r"\{(examples|query|evidences)\}")
_MAX_ECHO = 2000  # characters of a bad answer quoted back to the LLM


# ---------------------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def load_prompt(name: str) -> str:
    """The bundled prompt template ``name`` (``"pattern_question"``, ``"pattern_claim"``, ``"answer"``,
    ``"verify"``; a ``.txt`` suffix is optional)."""
    stem = name[:-4] if name.endswith(".txt") else name
    path = PROMPTS_DIR / f"{stem}.txt"
    if "/" in stem or "\\" in stem or not path.is_file():
        known = sorted(p.stem for p in PROMPTS_DIR.glob("*.txt"))
        raise ConfigError(f"no bundled prompt {name!r}; known: {known}")
    return path.read_text(encoding="utf-8")


def _fewshot_path(path_or_kg: str | os.PathLike[str], kind: str | None) -> Path:
    if kind is not None and kind not in FEWSHOT_KINDS:
        raise ConfigError(f"unknown few-shot kind {kind!r}; known: {list(FEWSHOT_KINDS)}")
    text = os.fspath(path_or_kg)
    given = Path(text).expanduser()
    if isinstance(path_or_kg, os.PathLike) or given.suffix in (".jsonl", ".json") or os.sep in text \
            or "/" in text or given.is_file():
        if not given.is_file():
            raise ConfigError(f"few-shot file not found: {given}")
        return given
    names = ([f"{text}_{kind}"] if kind else []) + [text]
    for stem in names:
        bundled = FEWSHOT_DIR / f"{stem}.jsonl"
        if bundled.is_file():
            return bundled
    known = sorted(p.stem for p in FEWSHOT_DIR.glob("*.jsonl"))
    raise ConfigError(
        f"no bundled few-shot examples {names[0]!r}; bundled: {known}; or pass the path of your own .jsonl file"
    )


def load_fewshot(
    path_or_kg: str | os.PathLike[str], n: int = DEFAULT_SHOTS, *, kind: str | None = None
) -> list[dict[str, Any]]:
    """The first ``n`` few-shot examples (all of them when the file has fewer).

    ``path_or_kg`` is a file (``.jsonl``, one object a line, blank lines and ``#`` lines skipped; or a
    ``.json`` list) or the name of bundled examples: ``"demo_pattern"``, or ``"demo"`` with ``kind="pattern"``.
    Each example is checked (a pattern example's triples, an answer example's graphs) and returned with
    ``"query"`` set (``"claim"`` is accepted for it). Errors name the file and line.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ConfigError(f"the number of few-shot examples must be an int >= 0, got {n!r}")
    path = _fewshot_path(path_or_kg, kind)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read few-shot file {path}: {e}") from e
    rows: list[tuple[int, Any]] = []
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except ValueError as e:
            raise ConfigError(f"{path}: not valid JSON: {e}") from e
        if not isinstance(data, list):
            raise ConfigError(f"{path}: expected a JSON list of examples")
        rows = [(i, row) for i, row in enumerate(data, start=1)]
    else:
        for line_no, line in enumerate(text.splitlines(), start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                rows.append((line_no, json.loads(line)))
            except ValueError as e:
                raise ConfigError(f"{path}:{line_no}: not valid JSON: {e}") from e
    examples = []
    for line_no, row in rows[:n]:
        try:
            examples.append(_checked_example(row))
        except (PatternError, ValueError, TypeError) as e:
            raise ConfigError(f"{path}:{line_no}: {e}") from e
    return examples


def _checked_example(row: Any) -> dict[str, Any]:
    if not isinstance(row, Mapping):
        raise ValueError(f"an example must be a JSON object, got {type(row).__name__}")
    example = dict(row)
    if "query" not in example and "claim" in example:
        example["query"] = example["claim"]
    if not isinstance(example.get("query"), str) or not example["query"].strip():
        raise ValueError('an example needs a non-empty "query" string')
    if "output" in example:
        output = example["output"]
        Pattern.from_json(output)  # raises PatternError when the triples are not a valid pattern
        divided = output.get("divided", [])
        if not isinstance(divided, list) or not all(isinstance(s, str) for s in divided):
            raise ValueError('"divided" must be a list of strings')
    elif "evidences" in example:
        _graphs(example["evidences"])
        if not isinstance(example.get("answer"), str) or not example["answer"].strip():
            raise ValueError('an example with "evidences" needs a non-empty "answer" string')
    else:
        raise ValueError('an example needs "output" (pattern prompts) or "evidences" and "answer" (answer prompts)')
    return example


def _graphs(evidences: Any) -> list[list[tuple[str, str, str]]]:
    """Evidence graphs from ``{"graph [1]": [[h, r, t], ...], ...}`` (in order) or ``[[[h, r, t], ...], ...]``."""
    graphs = list(evidences.values()) if isinstance(evidences, Mapping) else evidences
    if isinstance(graphs, (str, bytes)) or not isinstance(graphs, Sequence):
        raise ValueError("evidences must be a list of graphs or an object of graphs")
    out = []
    for number, graph in enumerate(graphs, start=1):
        if isinstance(graph, (str, bytes)) or not isinstance(graph, Sequence):
            raise ValueError(f"evidence graph {number} must be a list of [head, relation, tail]")
        triples = []
        for triple in graph:
            if isinstance(triple, (str, bytes)) or not isinstance(triple, Sequence) or len(triple) != 3:
                raise ValueError(f"evidence graph {number}: expected [head, relation, tail], got {triple!r}")
            triples.append((str(triple[0]), str(triple[1]), str(triple[2])))
        out.append(triples)
    return out


def _examples(examples: Sequence[Mapping[str, Any]] | str | os.PathLike[str] | None, kind: str) -> list[Any]:
    if examples is None:
        return []
    if isinstance(examples, (str, os.PathLike)):
        return load_fewshot(examples, kind=kind)
    return list(examples)


# ---------------------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------------------


def _fill(template: str, **values: str) -> str:
    # one pass, so a query that contains "{examples}" stays text
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def _quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _pattern_output(output: Mapping[str, Any]) -> str:
    """The example output laid out as in Table 16, but as valid JSON (lists, no trailing commas)."""
    triples = output.get("triples", output.get("graph", []))
    divided = ",\n".join(_quoted(s) for s in output.get("divided", []))
    rows = ",\n".join(json.dumps([str(x) for x in t], ensure_ascii=False) for t in triples)
    return f'{{\n"divided": [\n{divided}\n],\n"triples": [\n{rows}\n]\n}}'


def _evidence_text(evidence: Any) -> str:
    if isinstance(evidence, str):
        return evidence
    return verbalize_subgraphs(_graphs(evidence))


def _numbered(blocks: list[str]) -> str:
    if not blocks:
        return "(none)"
    return "\n".join(f"{i}. {block}" for i, block in enumerate(blocks, start=1))


def render_pattern_prompt(
    query: str,
    examples: Sequence[Mapping[str, Any]] | str | os.PathLike[str] | None,
    claim: bool = False,
) -> str:
    """SimGRAG's query-to-pattern prompt (Table 16; Table 17 with ``claim=True``). ``examples``: loaded
    examples, or a path / bundled KG name passed to :func:`load_fewshot`."""
    kind = "claim" if claim else "pattern"
    shots = [
        f"query: {_quoted(ex['query'])}\noutput: {_pattern_output(ex['output'])}" for ex in _examples(examples, kind)
    ]
    template = load_prompt("pattern_claim" if claim else "pattern_question")
    return _fill(template, examples=_numbered(shots), query=_quoted(query))


def _render_with_evidence(template: str, kind: str, query: str, evidence: Any, examples: Any) -> str:
    shots = [
        f"query: {_quoted(ex['query'])}\nevidences: {_evidence_text(ex['evidences'])}\nanswer: {ex['answer']}"
        for ex in _examples(examples, kind)
    ]
    return _fill(
        load_prompt(template), examples=_numbered(shots), query=_quoted(query), evidences=_evidence_text(evidence)
    )


def render_answer_prompt(
    query: str, evidence: Any, examples: Sequence[Mapping[str, Any]] | str | os.PathLike[str] | None
) -> str:
    """SimGRAG's verbalized-subgraph answer prompt (Table 18). ``evidence`` is the verbalized text
    (:func:`engine.retrieval.verbalize.verbalize_subgraphs`) or the graphs themselves (a list of triple lists, or
    ``{"graph [1]": [...], ...}``)."""
    return _render_with_evidence("answer", "answer", query, evidence, examples)


def render_verify_prompt(
    claim: str, evidence: Any, examples: Sequence[Mapping[str, Any]] | str | os.PathLike[str] | None
) -> str:
    """SimGRAG's fact-verification prompt (Table 19): the LLM ends with 'True' or 'False'
    (:func:`parse_verdict`)."""
    return _render_with_evidence("verify", "verify", claim, evidence, examples)


# ---------------------------------------------------------------------------------------------------------
# Calling the LLM
# ---------------------------------------------------------------------------------------------------------


def _corrective(prompt: str, text: str, error: PatternParseError) -> str:
    shown = text if len(text) <= _MAX_ECHO else text[:_MAX_ECHO] + " ..."
    return (
        f"{prompt}\n\nYour previous output was:\n{shown}\n"
        f"It could not be used: {error}\n"
        'Reply again with only the JSON object {"divided": [...], "triples": [["head", "relation", "tail"], ...]}, '
        "each triple a JSON list of three strings, and nothing else."
    )


def _check_retries(retries: int) -> None:
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be an int >= 0, got {retries!r}")


def _parse_last(text: str, attempts: int) -> Pattern:
    try:
        return Pattern.parse(text)
    except PatternParseError as e:
        raise PatternParseError(f"no valid pattern from the LLM after {attempts} attempt(s): {e}", text) from e


def pattern_exchange(
    query: str,
    examples: Sequence[Mapping[str, Any]] | str | os.PathLike[str] | None,
    *,
    claim: bool = False,
    retries: int = 1,
) -> Generator[str, str, tuple[Pattern, str]]:
    """The exchange with the LLM that gives the pattern of ``query`` (a question, or a claim with
    ``claim=True``), written once for every caller: a generator that yields each prompt, is sent the LLM's text
    for it, and returns the parsed :class:`~engine.retrieval.pattern.Pattern` and that text.

    On text that is not a valid pattern, asks again (at most ``retries`` times) quoting the bad output and what
    was wrong; then raises PatternParseError keeping the last text. :func:`generate_pattern`,
    :func:`agenerate_pattern` and the answering pipeline drive it.
    """
    _check_retries(retries)
    prompt = render_pattern_prompt(query, examples, claim)
    text = yield prompt
    for attempt in range(1, retries + 1):
        try:
            return Pattern.parse(text), text
        except PatternParseError as e:
            log.info("pattern attempt %d/%d unusable (%s); asking again", attempt, retries + 1, e)
            text = yield _corrective(prompt, text, e)
    return _parse_last(text, retries + 1), text


def generate_pattern(
    llm: LLM,
    query: str,
    examples: Sequence[Mapping[str, Any]] | str | os.PathLike[str] | None,
    *,
    claim: bool = False,
    retries: int = 1,
) -> tuple[Pattern, str]:
    """Ask ``llm`` for the pattern of ``query`` (:func:`pattern_exchange`): the parsed
    :class:`~engine.retrieval.pattern.Pattern` and the LLM's text. LLMError from the call itself is not retried here."""
    exchange = pattern_exchange(query, examples, claim=claim, retries=retries)
    prompt = next(exchange)
    while True:
        try:
            prompt = exchange.send(llm.complete(prompt))
        except StopIteration as done:
            return done.value


async def agenerate_pattern(
    llm: LLM,
    query: str,
    examples: Sequence[Mapping[str, Any]] | str | os.PathLike[str] | None,
    *,
    claim: bool = False,
    retries: int = 1,
) -> tuple[Pattern, str]:
    """The async twin of :func:`generate_pattern`."""
    exchange = pattern_exchange(query, examples, claim=claim, retries=retries)
    prompt = next(exchange)
    while True:
        try:
            prompt = exchange.send(await llm.acomplete(prompt))
        except StopIteration as done:
            return done.value


_VERDICT_STATED = re.compile(r"answer\s+is\s*:?\s*\W{0,3}\s*(true|false)\b", re.IGNORECASE)
_VERDICT_WORD = re.compile(r"\b(True|False|TRUE|FALSE)\b")
_VERDICT_ALONE = re.compile(r"^\W*(true|false)\W*$", re.IGNORECASE)


def parse_verdict(text: str) -> bool | None:
    """The verdict in an answer to the verify prompt: ``True``, ``False`` or ``None`` when it has none.

    Prefers the last "the answer is True/False"; else the last capitalised ``True``/``False`` word (prose like
    "a false claim" is not a verdict); else a bare ``true``/``false`` answer.
    """
    if not isinstance(text, str):
        return None
    stated = _VERDICT_STATED.findall(text)
    if stated:
        return stated[-1].lower() == "true"
    words = _VERDICT_WORD.findall(text)
    if words:
        return words[-1].lower() == "true"
    alone = _VERDICT_ALONE.match(text.strip())
    if alone:
        return alone.group(1).lower() == "true"
    return None
