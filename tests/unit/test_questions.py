"""The one question-file reader (engine.datasets.questions): the three formats told apart, blank lines skipped, bad
lines reported at their line; MetaQA questions with their types (engine.datasets.metaqa.read_questions); the skip
log and report base that the loaders and change sets share (engine._reports)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from engine._errors import InputError, MalformedInputError
from engine._reports import Report, SkipLog
from engine.datasets.metaqa import read_questions
from engine.datasets.questions import detect_format, pathquestion_answers, pathquestion_path, question_rows


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_formats_are_told_apart(tmp_path: Path) -> None:
    assert detect_format(_write(tmp_path / "a.txt", '\n{"question": "q"}\n')) == "jsonl"
    assert detect_format(_write(tmp_path / "b.jsonl", "who [x]\ty\n")) == "jsonl"  # the suffix says so
    assert detect_format(_write(tmp_path / "c.txt", "who [x]\ty|z\n")) == "metaqa"
    assert detect_format(_write(tmp_path / "d.txt", "q ?\tuk(uk/)\ta#r#uk#<end>#uk\n")) == "pathquestion"


def test_rows_of_each_format(tmp_path: Path) -> None:
    mq = _write(tmp_path / "qa.txt", "who directed [Heat]\tMichael Mann\n\nwhat [A]\tx||y\n")
    assert list(question_rows(mq)) == [(1, ("who directed [Heat]", ["Michael Mann"])),
                                       (3, ("what [A]", ["x", "y"]))]
    assert [n for n, _ in question_rows(mq, limit=1)] == [1]
    pq = _write(tmp_path / "PQ.txt", "whose ?\tunited_kingdom(united_kingdom/uk/)\t"
                                     "f#spouse#e#nationality#united_kingdom#<end>#united_kingdom\n")
    [(_, (q, answers, walk))] = list(question_rows(pq))  # type: ignore[misc]
    assert answers == ["united_kingdom", "uk"] == pathquestion_answers("united_kingdom(united_kingdom/uk/)")
    assert pathquestion_path(walk) == ("f", ["spouse", "nationality"], ["e", "united_kingdom"])
    jl = _write(tmp_path / "q.jsonl", '{"question": "who", "topics": ["Heat"]}\n')
    assert next(question_rows(jl))[1] == {"question": "who", "topics": ["Heat"]}


@pytest.mark.parametrize("name,text,reason", [
    ("q.jsonl", '{"question": 1}\n', 'needs a "question" string'),
    ("q.jsonl", "[1]\n", 'needs a "question" string'),
    ("q.jsonl", "{bad\n", "not JSON"),
    ("qa.txt", "who [x]\ty\nno tab\n", "question<TAB>answer"),
])
def test_bad_lines_are_reported_at_their_line(tmp_path: Path, name: str, text: str, reason: str) -> None:
    with pytest.raises(MalformedInputError, match=reason) as e:
        list(question_rows(_write(tmp_path / name, text)))
    assert e.value.line == len(text.splitlines())


def test_unreadable_and_not_utf8(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        list(question_rows(tmp_path / "missing.txt", fmt="metaqa"))
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"who [x]\ty\ncaf\xe9 [y]\tz\n")
    with pytest.raises(MalformedInputError, match="not valid UTF-8: byte 0xe9 at column 4") as e:
        list(question_rows(bad))
    assert e.value.line == 2


def test_metaqa_questions_with_their_types(tmp_path: Path) -> None:
    qa = _write(tmp_path / "qa_dev.txt",
                "who directed [Heat]\tMichael Mann\nno topic here\tx\nwho wrote [Alien]\tDan\n")
    _write(tmp_path / "qa_dev_qtype.txt", "movie_to_director\nmovie_to_writer\nmovie_to_writer\n")
    got = read_questions(qa, hops=1)
    assert [(q["topic"], q["qtype"], q["line"], q["answers"]) for q in got] == [
        ("Heat", "movie_to_director", 1, ["Michael Mann"]), ("Alien", "movie_to_writer", 3, ["Dan"])]
    assert [q["topic"] for q in read_questions(qa, limit=1)] == ["Heat"]
    (tmp_path / "qa_dev_qtype.txt").unlink()
    assert [q["qtype"] for q in read_questions(qa)] == [None, None]


@dataclass
class _Counts(Report):
    SKIP_COUNT = "skipped"
    KEEP_SKIPPED = 2
    skipped: int = 0
    skip_reasons: dict[str, int] = field(default_factory=dict)
    skip_examples: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [f"skipped {self.skipped}", *self.skip_lines()]


def test_one_skip_log_counts_into_a_report() -> None:
    report = _Counts()
    log = SkipLog(keep=1, into=report)
    for line, reason in [(1, "wrong field count: 2"), (2, "wrong field count: 4"), (3, "not valid UTF-8: byte")]:
        log(MalformedInputError("f.txt", line, reason))
    assert (log.count, dict(log.by_reason), log.messages) == (3, {"wrong field count": 2, "not valid UTF-8": 1},
                                                            ["f.txt:1: wrong field count: 2"])
    assert report.to_dict() == {"skipped": 3, "skip_reasons": {"wrong field count": 2, "not valid UTF-8": 1},
                                "skip_examples": ["f.txt:1: wrong field count: 2"]}
    assert report.lines() == ["skipped 3", "    2 x wrong field count", "    1 x not valid UTF-8",
                              "    e.g. f.txt:1: wrong field count: 2"]
    later = SkipLog()
    later.reject("g.txt", 9, "unknown op: x")
    report.add_skips(later)
    assert report.skipped == 4 and report.skip_examples[-1] == "g.txt:9: unknown op: x"
    with pytest.raises(MalformedInputError):
        SkipLog(strict=True).reject("h.txt", 1, "bad")


def test_eval_files_are_told_apart_by_content(tmp_path: Path) -> None:
    """``isorag eval`` reads any ground-truth file by its content, whatever its name says."""
    f = _write(tmp_path / "gold.jsonl", "who [x]\ty\n")
    assert detect_format(f) == "jsonl" and detect_format(f, by_suffix=False) == "metaqa"
