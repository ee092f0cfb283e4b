"""Guards on patterns, verification jobs and verbalized evidence, each a mistake no other test caught: no servers
needed."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from engine._errors import PatternParseError
from engine.answering import NOT_ENOUGH_INFO, REFUTED, SUPPORTED, Verdict
from engine.jobs import FAILED, ClaimRow, run_verify_job, summarize
from engine.jobs import _record as job_record
from engine.retrieval.pattern import Pattern, PatternNode, is_unknown_text
from engine.retrieval.pattern_text import _MAX_TEXT
from engine.retrieval.verbalize import verbalize_scored, verbalize_subgraphs, verbalize_triple


# ---------------------------------------------------------------------------------------------------------
# UNKNOWN is a whole word on both sides
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["XUNKNOWN 1", "XUNKNOWN", "1UNKNOWN 2", "aUNKNOWN film 1", "UNKNOWNX 1",
                                  "UNKNOWN1", "XUNKNOWNX"])
def test_unknown_glued_to_a_letter_or_digit_is_a_named_node(text: str) -> None:
    assert not is_unknown_text(text)
    node = PatternNode.from_text(text)
    assert node.known and node.text == text and node.type_hint is None


@pytest.mark.parametrize("text", ["UNKNOWN 1", "x UNKNOWN 1", "_UNKNOWN_ 1", "-UNKNOWN-film-1", "(UNKNOWN)"])
def test_unknown_between_separators_is_unknown(text: str) -> None:
    assert is_unknown_text(text)
    assert not PatternNode.from_text(text).known


def test_glued_unknown_in_a_pattern_is_embedded_as_written() -> None:
    p = Pattern.from_triples([("XUNKNOWN 1", "XUNKNOWN relation", "UNKNOWN 2")])
    assert [n.id for n in p.known_nodes] == ["XUNKNOWN 1"]
    assert [n.id for n in p.unknown_nodes] == ["UNKNOWN 2"]
    assert p.edges[0].relation == "XUNKNOWN relation"  # a known relation: its text is embedded
    assert p.answer_node() == "UNKNOWN 2"


# ---------------------------------------------------------------------------------------------------------
# the longest pattern text
# ---------------------------------------------------------------------------------------------------------

_PATTERN = '{"triples": [["Heat", "directed_by", "UNKNOWN person 1"]]}'


def test_pattern_text_of_exactly_the_maximum_length_parses() -> None:
    assert _MAX_TEXT == 1_000_000
    text = _PATTERN + " " * (_MAX_TEXT - len(_PATTERN))
    assert len(text) == _MAX_TEXT
    p = Pattern.parse(text)
    assert p.triples == (("Heat", "directed_by", "UNKNOWN person 1"),)


def test_pattern_text_one_character_over_the_maximum_is_refused() -> None:
    text = _PATTERN + " " * (_MAX_TEXT + 1 - len(_PATTERN))
    with pytest.raises(PatternParseError, match=r"too long .*1000001 characters > 1000000"):
        Pattern.parse(text)


# ---------------------------------------------------------------------------------------------------------
# a failed verification is never correct
# ---------------------------------------------------------------------------------------------------------


def _row(gold: str) -> ClaimRow:
    return ClaimRow("c1", "Heat was directed by Michael Mann.", gold, None, 1)


@pytest.mark.parametrize("label", [SUPPORTED, REFUTED, NOT_ENOUGH_INFO])
@pytest.mark.parametrize("gold", [SUPPORTED, REFUTED, NOT_ENOUGH_INFO, "True", "False"])
def test_failed_verdict_record_is_never_correct(label: str, gold: str) -> None:
    failed = Verdict("Heat was directed by Michael Mann.", label=label, failed_stage="llm", error="down")
    rec = job_record(_row(gold), failed)
    assert rec["gold"] == gold and rec["correct"] is False
    # ... and counted as FAILED, never as correct, by the summary of the output
    s = summarize([rec])
    assert s["correct"] == 0 and s["accuracy"] == 0.0 and s["counts"][FAILED] == 1
    assert s["confusion"][gold][FAILED] == 1


def test_summary_never_counts_a_failed_line_correct_even_with_a_matching_label() -> None:
    # a line written by a job: label NOT_ENOUGH_INFO (the default of a failed verdict), gold the same
    recs = [{"id": "a", "label": NOT_ENOUGH_INFO, "gold": NOT_ENOUGH_INFO, "failed_stage": "llm"},
            {"id": "b", "label": SUPPORTED, "gold": "True", "failed_stage": "graph"},
            {"id": "c", "label": SUPPORTED, "gold": "True", "failed_stage": None}]
    s = summarize(recs)
    assert s["correct"] == 1 and s["labeled"] == 3 and s["accuracy"] == round(1 / 3, 4)
    assert s["counts"][FAILED] == 2 and s["counts"][SUPPORTED] == 1


class _FailingEngine:
    """verify() answers every claim with a failed verdict whose label matches the gold label."""

    def verify(self, claim: str, **kw: Any) -> Verdict:
        label = claim.split()[0]
        return Verdict(claim, label=label, failed_stage="llm", error="LLM down", error_type="LLMError")


def test_job_with_failed_verifications_scores_nothing_correct(tmp_path: Path) -> None:
    claims = tmp_path / "claims.jsonl"
    rows = [{"id": f"c{i}", "claim": f"{lab} claim {i}", "label": lab}
            for i, lab in enumerate([SUPPORTED, REFUTED, NOT_ENOUGH_INFO])]
    claims.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    summary = run_verify_job(_FailingEngine(), claims, out, concurrency=1, progress=False, echo=lambda m: None)
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 3 and all(rec["correct"] is False for rec in lines)
    assert summary["failed"] == 3 and summary["correct"] == 0 and summary["accuracy"] == 0.0
    assert summary["counts"][FAILED] == 3


# ---------------------------------------------------------------------------------------------------------
# U+FFFF and its neighbours in verbalized evidence
# ---------------------------------------------------------------------------------------------------------


def test_u_ffff_is_escaped_as_a_four_digit_escape() -> None:
    assert not "\uffff".isprintable()
    assert verbalize_triple(("a\uffffb", "r", "t")) == '("a\\uffffb", "r", "t")'
    assert verbalize_triple(("\ufffe", "\uffff", "x")) == '("\\ufffe", "\\uffff", "x")'
    line = verbalize_subgraphs([[("h\uffff", "r", "t")]])
    assert "\uffff" not in line and line == 'graph [1]: [("h\\uffff", "r", "t")]'
    scored = verbalize_scored([("h", "r\uffff", "t", 0.5)])
    assert scored == '("h", "r\\uffff", "t") [confidence: 0.5]'
    # it reads back as JSON strings and as Python literals alike
    assert json.loads('"a\\uffffb"') == "a\uffffb"
    assert ast.literal_eval(verbalize_triple(("a\uffffb", "r", "t"))) == ("a\uffffb", "r", "t")


def test_astral_unprintable_uses_the_eight_digit_escape() -> None:
    # U+E0001 LANGUAGE TAG (a format character) lies beyond U+FFFF; U+10000 (Linear B) is printable and kept
    assert verbalize_triple(("\U000e0001", "r", "\U00010000")) == '("\\U000e0001", "r", "\U00010000")'
    assert ast.literal_eval(verbalize_triple(("\U000e0001", "r", "t")))[0] == "\U000e0001"


# ---------------------------------------------------------------------------------------------------------
# jobs: how malformed rows are reported; a job's settings
# ---------------------------------------------------------------------------------------------------------


def _bad_claims(path: Path, n: int) -> Path:
    """``n`` malformed rows (no id), then one good claim (a file of malformed rows only is an InputError)."""
    good = json.dumps({"id": "ok", "claim": f"{SUPPORTED} the one good claim", "label": SUPPORTED})
    path.write_text("".join('{"claim": "row %d has no id"}\n' % i for i in range(n)) + good + "\n",
                    encoding="utf-8")
    return path


def test_a_file_of_malformed_rows_only_is_an_input_error(tmp_path: Path) -> None:
    from engine._errors import InputError

    claims = tmp_path / "claims.jsonl"
    claims.write_text('{"claim": "no id"}\n' * 3, encoding="utf-8")
    with pytest.raises(InputError,
                       match=r"no claim to verify: every row is malformed \(3\); first: .*claims.jsonl:1: "):
        run_verify_job(_FailingEngine(), claims, tmp_path / "out.jsonl", progress=False, echo=lambda m: None)
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("n, more", [(19, None), (20, None), (21, "... and 1 more malformed row(s)"),
                                     (25, "... and 5 more malformed row(s)")])
def test_malformed_rows_are_echoed_one_by_one_up_to_twenty(tmp_path: Path, n: int, more: str | None) -> None:
    claims = _bad_claims(tmp_path / "claims.jsonl", n)
    echoed: list[str] = []
    summary = run_verify_job(_FailingEngine(), claims, tmp_path / "out.jsonl", progress=False, echo=echoed.append)
    rows = [e for e in echoed if e.startswith(f"{claims}:")]
    assert [r.split(":")[1] for r in rows] == [str(i) for i in range(1, min(n, 20) + 1)]
    assert [e for e in echoed if e.startswith("...")] == ([more] if more else [])
    assert len(echoed) == len(rows) + (1 if more else 0)
    assert summary["malformed"] == n and summary["verified"] == 1


@pytest.mark.parametrize("n", [100, 101])
def test_the_summary_lists_at_most_a_hundred_malformed_rows(tmp_path: Path, n: int) -> None:
    claims = _bad_claims(tmp_path / "claims.jsonl", n)
    summary = run_verify_job(_FailingEngine(), claims, tmp_path / "out.jsonl", progress=False, echo=lambda m: None)
    assert summary["malformed"] == n
    assert len(summary["malformed_rows"]) == 100
    assert summary["malformed_rows"][0].startswith(f"{claims}:1: ")
    assert summary["malformed_rows"][-1].startswith(f"{claims}:100: ")


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_job_concurrency_must_be_a_positive_int(tmp_path: Path, bad: Any) -> None:
    from engine._errors import ConfigError

    claims = _bad_claims(tmp_path / "claims.jsonl", 1)
    with pytest.raises(ConfigError, match="concurrency"):
        run_verify_job(_FailingEngine(), claims, tmp_path / "out.jsonl", concurrency=bad, progress=False,
                       echo=lambda m: None)
    assert not (tmp_path / "out.jsonl").exists()
    run_verify_job(_FailingEngine(), claims, tmp_path / "out.jsonl", concurrency=1, progress=False, echo=lambda m: None)


def test_scores_at_precision_zero_are_whole_numbers() -> None:
    rows = [("h", "r", "t", 0.93), ("a", "r", "b", 0.2)]
    assert verbalize_scored(rows, precision=0).splitlines() == ['("h", "r", "t") [confidence: 1]',
                                                               '("a", "r", "b") [confidence: 0]']
    assert verbalize_scored(rows, precision=1, limit=1) == '("h", "r", "t") [confidence: 0.9]'
