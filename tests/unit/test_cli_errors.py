"""No traceback, ever: every subcommand refuses bad arguments, environment and input with one line
``isorag: error: ...`` on stderr and status 2, before any server or model starts; a bug is one line too
(``isorag: internal error: ...``, status 70) unless ISORAG_DEBUG=1 asks for the traceback.

The options under test are read from the parser itself (every numeric option carries its bounds, every path
option its type), so an option added later is covered, or fails :func:`test_every_option_is_typed`. These tests
point NEO4J_URI and MILVUS_URI at closed ports: an error that were only found by a server would show up as
"unavailable" instead of the expected message, and nothing can be written anywhere. The errors that only a running
server can give are tested in tests/integration/test_cli_errors.py; the inputs both use are in helpers/cli.py.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import cli
from engine._config import check_kg_name, check_milvus_uri, check_neo4j_uri
from engine._errors import ConfigError, IsoragError
from engine.cli import EXIT_ERROR, EXIT_INTERNAL, main

from helpers import ROOT
from helpers.cli import (DEAD_NEO4J, KG, PATTERN, Files, argv, assert_one_line_error, base,  # noqa: F401  (files: the fixture)
                         files, run)
from helpers.marks import withoutCUDA

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# -- the parser's options ---------------------------------------------------------------------------------
def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def options() -> Iterator[tuple[str, argparse.Action]]:
    for name, sub in subcommands().items():
        for action in sub._actions:
            if not isinstance(action, argparse._HelpAction):
                yield name, action


def flag_of(action: argparse.Action) -> str:
    return max(action.option_strings, key=len) if action.option_strings else action.dest


NUMERIC = [(name, flag_of(a), a.type.bounds)  # type: ignore[union-attr]
           for name, a in options() if hasattr(a.type, "bounds")]
PATH_TYPES = {cli._in_file: "in", cli._source: "source", cli._out_file: "out", cli._pattern_type: "pattern"}
PATHS = [(name, flag_of(a), PATH_TYPES[a.type]) for name, a in options() if a.type in PATH_TYPES]


BASE_NAMES = {"neo4j", "milvus", "load", "stats", "match", "drop", "ask", "verify", "synth", "eval", "train-scorer",
              "train-generator", "demo", "apply", "check", "sync", "serve", "keys"}


def test_every_subcommand_has_good_arguments_here(files: Files) -> None:
    assert set(subcommands()) == set(base(files)) == BASE_NAMES


def test_every_option_is_typed() -> None:
    """No option takes a bare int, float or str where a checked type belongs: numbers carry bounds, paths a
    path type. (Choices, flags and free text are fine.)"""
    loose = [(name, flag_of(a)) for name, a in options()
             if a.type in (int, float) or a.type is None and a.nargs != 0 and not a.choices]
    assert not loose, f"options without a checked type: {loose}"
    assert len(NUMERIC) >= 40 and len(PATHS) >= 15


# -- numbers ------------------------------------------------------------------------------------------------
def is_good_number(text: str, bounds: tuple[Any, ...]) -> bool:
    lo, hi, lo_open, integer = bounds
    try:
        x: float = int(text.strip()) if integer else float(text.strip())
    except ValueError:
        return False
    return math.isfinite(x) and x >= lo and not (lo_open and x == lo) and (hi is None or x <= hi)


def canonical_bad(bounds: tuple[Any, ...]) -> list[str]:
    lo, hi, lo_open, integer = bounds
    bad = ["nan", "inf", "-inf", "abc", "", "1e999", " "]
    bad += [str(lo if lo_open else (lo - 1 if integer else lo - 0.5)), "-5", str(-(10 ** 30))]
    if integer:
        bad += ["1.5", "0x10"]
    if hi is not None:
        bad += [str(hi + 1), str(10 ** 30)]
    return [b for b in bad if not is_good_number(b, bounds)]


@pytest.mark.parametrize("command,flag,bounds", NUMERIC, ids=[f"{c} {f}" for c, f, _ in NUMERIC])
def test_bad_numbers_are_refused(command: str, flag: str, bounds: tuple[Any, ...], files: Files,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    for value in canonical_bad(bounds):
        rc, out, err = run(argv(files, command, flag, value), capsys)
        assert_one_line_error(rc, out, err, flag, f"isorag {command} --help")


def bad_number(bounds: tuple[Any, ...]) -> st.SearchStrategy[str]:
    lo, hi, lo_open, integer = bounds
    parts = [st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12),
             st.sampled_from(["nan", "NaN", "inf", "-Infinity", "1e309", "-0x1"])]
    if integer:
        parts.append(st.integers(max_value=lo - 1).map(str))
        parts.append(st.floats(allow_nan=True, allow_infinity=True).map(repr))
        if hi is not None:
            parts.append(st.integers(min_value=hi + 1).map(str))
    else:
        parts.append(st.floats(max_value=lo, exclude_max=not lo_open).map(repr))
        if hi is not None:
            parts.append(st.floats(min_value=hi, exclude_min=True).map(repr))
    return st.one_of(parts).filter(lambda text: not is_good_number(text, bounds))


@FAST
@given(data=st.data())
def test_generated_bad_numbers_are_refused(data: st.DataObject, files: Files,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    command, flag, bounds = data.draw(st.sampled_from(NUMERIC), label="option")
    value = data.draw(bad_number(bounds), label="value")
    rc, out, err = run(argv(files, command, flag, value), capsys)
    assert_one_line_error(rc, out, err, flag)


# -- paths and their content ---------------------------------------------------------------------------------
def bad_paths(f: Files, kind: str, flag: str) -> list[tuple[str, str]]:
    """(value, a word the error must hold) for a path option of ``kind``."""
    if kind == "out":
        return [(f.directory, "directory"), (f.under_a_file, "not a directory"), ("", "empty path")]
    cases = [(f.missing, "neither pattern JSON nor a file" if kind == "pattern" else "does not exist")]
    if kind != "source":  # a directory is a source (tables); one without nodes.csv is refused when opened
        cases.append((f.directory, "directory"))
    else:
        cases.append((f.directory, "tables"))
    suffix = {"pattern": ".json", "source": ".txt"}.get(kind, ".txt" if flag == "--relation-paths" else ".jsonl")
    if flag not in ("--nodes", "--edges"):  # (a bad node or edge line is skipped, the others load)
        cases.append((f.not_utf8(suffix), "UTF-8"))
        cases.append((f.empty, {"pattern": "not a pattern", "source": "format"}.get(kind, f.empty)))
    if os.path.exists("/proc/self/mem"):  # opens, then fails to read (EIO): unreadable even for root
        cases.append(("/proc/self/mem", "error"))
    if os.geteuid() != 0:
        locked = Path(f.root / "locked.jsonl")
        locked.write_text("{}\n")
        locked.chmod(0)
        cases.append((str(locked), "ermission denied"))
    return cases


@pytest.mark.parametrize("command,flag,kind", PATHS, ids=[f"{c} {f}" for c, f, _ in PATHS])
def test_bad_paths_are_refused(command: str, flag: str, kind: str, files: Files,
                               capsys: pytest.CaptureFixture[str]) -> None:
    for value, needle in bad_paths(files, kind, flag):
        args = argv(files, command, flag, value)
        if flag in ("--nodes", "--edges"):  # a tables load: no PATH
            tables = {"--nodes": files.nodes, "--edges": files.edges, flag: value}
            args = ["load", "--kg", KG, "--quiet", *(x for kv in tables.items() for x in kv)]
        t0 = time.monotonic()
        rc, out, err = run(args, capsys)
        line = assert_one_line_error(rc, out, err)
        assert needle.lower() in line.lower() or value in line, (value, line)
        assert time.monotonic() - t0 < 10, "bad input must fail fast"


def test_outputs_in_directories_that_do_not_exist_yet_are_fine(files: Files) -> None:
    assert cli._out_file(str(files.root / "a" / "b" / "c.jsonl"))


@pytest.mark.parametrize("command,flag,value,needle", [
    ("load", "--delimiter", "\\x", "bad escape"),
    ("load", "--delimiter", "", "one character"),
    ("load", "--delimiter", "ab", "one character"),
    ("load", "--delimiter", "\n", "one character"),
    ("load", "--delimiter", "\\u12", "bad escape"),
    ("load", "--head", "", "empty column"),
    ("load", "--header", "maybe", "invalid choice"),
    ("load", "--format", "xml", "invalid choice"),
    ("apply", "--format", "xml", "invalid choice"),
    ("apply", "--format", "hrt", "--add/--remove"),
    ("load", "--label", "", "empty text"),
    ("sync", "--format", "xml", "invalid choice"),
    ("sync", "--delimiter", "ab", "one character"),
    ("sync", "--head", "", "empty column"),
    ("sync", "--label", "", "empty text"),
    ("verify", "--shard", "1/1", "0 <= i < n"),
    ("verify", "--shard", "-1/2", "--shard"),
    ("verify", "--shard", "a/b", "i/n"),
    ("verify", "--shard", "0/0", "--shard"),
    ("verify", "--shard", "0/2/3", "i/n"),
    ("verify", "--format", "xml", "invalid choice"),
    ("verify", "--fewshot", "no_such_examples", "bundled"),
    ("ask", "--fewshot", "/no/such/dir/", "bundled"),
    ("ask", "question", "  ", "empty text"),
    ("ask", "--pattern", "{not json", "not a pattern"),
    ("ask", "--pattern", '{"triples": []}', "not a pattern"),
    ("match", "pattern", "[[1, 2]]", "not a pattern"),
    ("match", "--injective", "some", "invalid choice"),
    ("synth", "--shapes", "bogus", "unknown shape"),
    ("synth", "--shapes", "path1,nope", "nope"),
    ("synth", "--shapes", ",", "unknown shape"),
    ("train-scorer", "--set", "novalue", "KEY=VALUE"),
    ("train-scorer", "--set", "=1", "KEY=VALUE"),
    ("train-scorer", "--set", "hidden=NaN", "finite"),
    ("train-scorer", "--set", "bogus=1", "no setting 'bogus'"),
    ("train-scorer", "--set", "hidden=abc", "must be an integer"),
    ("train-scorer", "--set", "walk=1", "must be true or false"),
    ("train-scorer", "--set", "dropout=[]", "must be a finite number"),
    ("train-scorer", "--device", "gpu", "cuda:N"),
    ("train-scorer", "--model", "bert", "invalid choice"),
    ("eval", "--pattern", "oracle", "invalid choice"),
    ("ask", "--route", "sometimes", "invalid choice"),
    ("neo4j", "action", "restart", "invalid choice"),
    ("milvus", "action", "", "invalid choice"),
])
def test_bad_values_are_refused(command: str, flag: str, value: str, needle: str, files: Files,
                                capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(argv(files, command, flag, value), capsys)
    assert_one_line_error(rc, out, err, needle)


@FAST
@given(name=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=80))
def test_bad_kg_names_are_refused_by_every_command(name: str, files: Files,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    try:
        check_kg_name(name)
        return  # a good name
    except ConfigError:
        pass
    for command in sorted(c for c in BASE_NAMES if any(o == "--kg" for o, _ in base(files)[c][1])):
        rc, out, err = run(argv(files, command, "--kg", name), capsys)
        assert_one_line_error(rc, out, err, "--kg")


@pytest.mark.parametrize("args,needle", [
    ([], "required: cmd"),
    (["frob"], "invalid choice"),
    (["stats", "--bogus"], "unrecognized arguments"),
    (["verify", "CLAIMS"], "required: --out"),
    (["drop"], "required: --kg"),
    (["drop", "--kg", KG], "add --yes"),
    (["load"], "needs a PATH"),
    (["load", "--from-neo4j", "--label", "Person"], "needs --label and --key-prop"),
    (["load", "--label", "Person"], "only with --from-neo4j"),
    (["load", "--from-neo4j", "--label", "P", "--key-prop", "id", "--delimiter", ";"], "takes no --delimiter"),
    (["ask", "who directed Heat", "--kg", KG, "--no-llm"], "ISORAG_LLM_BASE_URL"),
    (["ask", "who directed Heat", "--kg", KG, "--route", "learned"], "isorag train-generator"),
    (["ask", "who directed Heat", "--kg", KG, "--route", "llm", "--no-llm"], "ISORAG_LLM_BASE_URL"),
    (["eval", "ITEMS", "--kg", KG, "--pattern", "llm", "--no-llm"], "needs an LLM"),
    (["train-scorer", "--qa", "QA", "--relation-paths", "QA", "QA", "--out", "OUT"], "one --relation-paths file"),
    (["verify", "CLAIMS", "--out", "CLAIMS"], "is the claims file"),
    (["apply", "--kg", KG], "needs a CHANGES file"),
    (["apply", "CHANGES", "--add", "HRT", "--kg", KG], "not both"),
    (["check"], "required: --kg"),
    (["sync", "HRT"], "required: --kg"),
    (["sync", "--kg", KG], "needs a PATH"),
    (["sync", "--kg", KG, "--from-neo4j", "--label", "Person"], "needs --label and --key-prop"),
    (["sync", "HRT", "--kg", KG, "--label", "Person"], "only with --from-neo4j"),
    (["sync", "HRT", "--kg", KG, "--from-neo4j", "--label", "P", "--key-prop", "id"], "takes no"),
])
def test_bad_combinations_are_refused(args: list[str], needle: str, files: Files,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    subst = {"ITEMS": files.items, "QA": files.qa, "OUT": files.out, "CLAIMS": files.claims,
             "CHANGES": files.changes, "HRT": files.hrt}
    rc, out, err = run([subst.get(a, a) for a in args], capsys)
    assert_one_line_error(rc, out, err, needle)


@pytest.mark.parametrize("command,text,needle", [
    ("load", "x\ny\n", "every line was skipped (2 lines: 2 x wrong field count)"),
    ("sync", "x\ny\n", "every line was skipped (2 lines: 2 x wrong field count)"),
    ("sync", "", "nothing loaded"),
    ("load", "", "nothing loaded"),
    ("load", "\n\n# a comment\n", "no triple or entity"),
    ("verify", '{"id": 1}\n{"claim": "x"}\n', "every row is malformed (2)"),
    ("verify", "", "no claim to verify"),
    ("eval", '{"id": "x"}\n', "not a isorag synth JSON Lines item"),
    ("eval", '["a list"]\n', "not a MetaQA item"),
    ("train-scorer", '{"question": 1}\n', 'needs a "question" string'),
    ("train-scorer", "\n", "no questions"),
    ("train-generator", '{"question": 1}\n', 'needs a "question" string'),
    ("train-generator", '{"question": "who", "topics": "Heat"}\n', '"topics" must be a list'),
    ("train-generator", '{"question": "who directed Heat", "topics": ["Heat"], "pattern": {"triples": []}}\n',
     "pattern"),
    ("train-generator", "who directed Heat\tMichael Mann\n", "no [topic entity]"),
    ("train-generator", "\n", "no questions"),
])
def test_bad_content_is_refused_before_anything_starts(command: str, text: str, needle: str, files: Files,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    p = files.root / ("bad.txt" if command in ("load", "sync") else "bad.jsonl")
    p.write_text(text)
    flag = {"load": "path", "sync": "path", "verify": "claims", "eval": "file", "train-scorer": "--qa",
            "train-generator": "--qa"}[command]
    if command == "train-generator" and "\t" in text:
        p = p.with_suffix(".txt")
        p.write_text(text)
    args = argv(files, command, flag, str(p)) + (["--format", "hrt"] if command in ("load", "sync") else [])
    rc, out, err = run(args, capsys)
    assert_one_line_error(rc, out, err, needle)


def test_compressed_files_that_are_not_are_refused(files: Files, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("kb.txt.gz", "kb.txt.bz2"):
        p = files.root / name
        p.write_bytes(b"Heat|directed_by|Michael Mann\n")
        for fmt in ([], ["--format", "hrt"]):  # found when sniffing the format, and when reading
            rc, out, err = run(argv(files, "load", "path", str(p)) + fmt, capsys)
            assert_one_line_error(rc, out, err, f"{p}: cannot read it")


def test_strict_load_stops_at_the_first_bad_line_before_anything_starts(files: Files,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    p = files.root / "bad.txt"
    p.write_text("no delimiter here\nHeat|directed_by|Michael Mann\n")
    rc, out, err = run(argv(files, "load", "path", str(p)) + ["--strict"], capsys)
    assert_one_line_error(rc, out, err, f"{p}:1: wrong field count")


def test_skip_reasons_keep_their_text(files: Files, capsys: pytest.CaptureFixture[str]) -> None:
    """Skipped lines are grouped by kind; a reason is never rewritten ("not valid UTF-N: byte NxeN")."""
    from loaders.bulk import LoadSummary, _Skips
    from loaders import open_source

    p = files.root / "mixed.txt"
    p.write_bytes(b"a|r|b\nbad\xe9|r|x\nonly two|fields\ncaf\xc3|r|y\n")
    summary = LoadSummary(path=str(p))
    assert len(list(open_source(p, "hrt", on_skip=_Skips(summary)))) == 1
    assert summary.skip_reasons == {"not valid UTF-8": 2, "wrong field count": 1}
    text = "\n".join(summary.lines())
    assert "not valid UTF-8: byte 0xe9 at column 4" in text and "UTF-N" not in text and "0xN" not in text
    only_bad = p.with_name("only_bad.txt")
    only_bad.write_bytes(b"bad\xe9|r|x\nonly two|fields\ncaf\xc3|r|y\n")
    rc, out, err = run(argv(files, "load", "path", str(only_bad)) + ["--format", "hrt"], capsys)
    assert_one_line_error(rc, out, err, "2 x not valid UTF-8", "1 x wrong field count", "byte 0xe9 at column 4")


# -- the environment ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("var,value,needle", [
    ("NEO4J_URI", "http://127.0.0.1:7474", "scheme 'http'"),
    ("NEO4J_URI", "https://example.org", "NEO4J_URI"),
    ("NEO4J_URI", "garbage", "no scheme"),
    ("NEO4J_URI", "bolt://", "no host"),
    ("NEO4J_URI", "bolt://127.0.0.1:99999", "NEO4J_URI"),
    ("NEO4J_URI", "neo4j://[::1", "NEO4J_URI"),
    ("MILVUS_URI", "localhost:19530", "MILVUS_URI"),
    ("MILVUS_URI", "grpc://127.0.0.1:19530", "scheme 'grpc'"),
    ("MILVUS_URI", "http://", "no host"),
    ("MILVUS_URI", "http://user:s3cret@", "***@"),
    ("ISORAG_KG", "1bad", "ISORAG_KG"),
    ("ISORAG_SHOTS", "many", "ISORAG_SHOTS"),
    ("ISORAG_SHOTS", "-1", "ISORAG_SHOTS"),
    ("ISORAG_VERIFY_THRESHOLD", "nan", "ISORAG_VERIFY_THRESHOLD"),
    ("ISORAG_VERIFY_THRESHOLD", "3", "ISORAG_VERIFY_THRESHOLD"),
    ("ISORAG_VERIFY_THRESHOLD", "near", "ISORAG_VERIFY_THRESHOLD"),
    ("ISORAG_DEVICE", "gpu", "ISORAG_DEVICE"),
    ("ISORAG_ROUTE", "sometimes", "ISORAG_ROUTE"),
    ("ISORAG_NEO4J_PORT", "abc", "ISORAG_NEO4J_PORT"),
    ("ISORAG_NEO4J_PORT", "0", "ISORAG_NEO4J_PORT"),
    ("ISORAG_MILVUS_PORT", "65536", "ISORAG_MILVUS_PORT"),
    ("ISORAG_NEO4J_HEAP", "lots", "ISORAG_NEO4J_HEAP"),
    ("ISORAG_NEO4J_PAGECACHE", "-1g", "ISORAG_NEO4J_PAGECACHE"),
    ("ISORAG_MILVUS_LOG_LEVEL", "loud", "ISORAG_MILVUS_LOG_LEVEL"),
    ("ISORAG_HOME", "FILE", "ISORAG_HOME"),
    ("ISORAG_NEO4J_HOME", "FILE", "ISORAG_NEO4J_HOME"),
    ("ISORAG_LLM_TIMEOUT", "nan", "timeout"),
    ("ISORAG_LLM_TIMEOUT", "soon", "ISORAG_LLM_TIMEOUT"),
    ("ISORAG_LLM_MAX_TOKENS", "-1", "max_tokens"),
    ("ISORAG_LLM_TEMPERATURE", "inf", "temperature"),
])
def test_bad_environment_is_refused_by_every_command(var: str, value: str, needle: str, files: Files,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(var, files.hrt if value == "FILE" else value)
    for command in sorted(BASE_NAMES):
        rc, out, err = run(argv(files, command), capsys)
        line = assert_one_line_error(rc, out, err, needle)
        assert "s3cret" not in line


@FAST
@given(uri=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=40),
       which=st.sampled_from(["NEO4J_URI", "MILVUS_URI"]))
def test_generated_bad_uris_are_refused(uri: str, which: str, files: Files, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    try:
        (check_neo4j_uri if which == "NEO4J_URI" else check_milvus_uri)(uri)
        return  # a well-formed URI (it would be tried, and fail as unavailable: see the integration test)
    except ConfigError:
        pass
    with monkeypatch.context() as env:  # (one example's variable must not stay for the next)
        env.setenv(which, uri)
        rc, out, err = run(argv(files, "stats"), capsys)
    assert_one_line_error(rc, out, err, which)


@withoutCUDA
def test_a_device_that_is_not_here_is_refused_before_training(files: Files,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(argv(files, "train-scorer", "--device", "cuda:0"), capsys)
    assert_one_line_error(rc, out, err, "CUDA is not available")


def test_unreachable_servers_are_one_line(files: Files, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    for uri in (DEAD_NEO4J, "bolt://no-such-host.invalid:7687"):
        monkeypatch.setenv("NEO4J_URI", uri)
        t0 = time.monotonic()
        rc, out, err = run(argv(files, "stats"), capsys)
        assert rc == EXIT_ERROR and err.splitlines() == [err.strip()] and "Traceback" not in err
        assert err.startswith(f"isorag: error: Neo4j is unavailable at {uri}") and time.monotonic() - t0 < 30


# -- exit statuses, the last resort ---------------------------------------------------------------------------
@pytest.mark.parametrize("command", sorted(BASE_NAMES))
def test_a_typed_error_exits_2_from_every_command(command: str, files: Files, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from engine import _errors

    parser = subcommands()[command]
    func = parser.get_default("func")
    for cls in [getattr(_errors, n) for n in _errors.__all__]:
        def boom(args: argparse.Namespace, cls: type = cls) -> int:
            err = cls.__new__(cls)
            Exception.__init__(err, f"{cls.__name__} from\nseveral lines")
            raise err

        monkeypatch.setattr(cli, func.__name__, boom)
        rc, out, err = run(argv(files, command), capsys)
        assert_one_line_error(rc, out, err, f"{cls.__name__} from several lines")


def test_a_bug_is_one_line_and_its_own_status(files: Files, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    def bug(args: argparse.Namespace) -> int:
        return {}["missing"]  # type: ignore[no-any-return]

    monkeypatch.setattr(cli, "cmd_stats", bug)
    rc, out, err = run(argv(files, "stats"), capsys)
    assert_one_line_error(rc, out, err, "KeyError: 'missing'", "ISORAG_DEBUG=1", status=EXIT_INTERNAL,
                          prefix="isorag: internal error: ")
    monkeypatch.setenv("ISORAG_DEBUG", "1")
    rc = main(argv(files, "stats"))
    err = capsys.readouterr().err
    assert rc == EXIT_INTERNAL and "Traceback" in err and err.splitlines()[-1].startswith("isorag: internal error")


def test_os_errors_are_one_line(files: Files, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    def full(args: argparse.Namespace) -> int:
        raise OSError(28, "No space left on device", files.out)

    monkeypatch.setattr(cli, "cmd_stats", full)
    rc, out, err = run(argv(files, "stats"), capsys)
    assert_one_line_error(rc, out, err, "No space left on device", files.out)


def test_help_documents_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    for args in (["--help"], ["verify", "--help"]):
        with pytest.raises(SystemExit) as exc:
            main(args)
        assert exc.value.code == 0
        text = " ".join(capsys.readouterr().out.split())
        assert "exit status: 0 done; 1 done but not clean" in text and "70 internal error" in text
    for status in ("0", "1", "2", "70", "130"):
        assert f"\n    {status} " in cli.__doc__  # type: ignore[operator]


# -- the real entry point: each bad input of issue 13 --------------------------------------------------------
def entry_point_cases(f: Files) -> list[tuple[dict[str, str], list[str], str]]:
    return [
        ({}, ["verify", f.not_utf8(".jsonl"), "--out", f.out, "--kg", KG, "--quiet"], "not valid UTF-8"),
        ({}, ["load", f.hrt, "--kg", KG, "--batch-size", "-5"], "--batch-size"),
        ({}, ["load", f.hrt, "--kg", KG, "--batch-size", "0"], "--batch-size"),
        ({}, ["load", f.hrt, "--kg", KG, "--delimiter", "\\x"], "bad escape"),
        ({}, ["match", PATTERN, "--kg", KG, "-k", "-1"], "-k"),
        ({}, ["match", PATTERN, "--kg", KG, "--deadline", "nan"], "--deadline"),
        ({}, ["match", PATTERN, "--kg", KG, "--deadline", "inf"], "--deadline"),
        ({"NEO4J_URI": "http://127.0.0.1:7474"}, ["stats", "--kg", KG], "scheme 'http'"),
        ({}, ["synth", "--shapes", "bogus", "--out", f.out, "--kg", KG], "unknown shape"),
        ({}, ["load", f.not_utf8(".txt"), "--kg", KG, "--quiet"], "every line was skipped"),
        ({}, ["load", f.empty, "--kg", KG, "--format", "jsonl", "--quiet"], "nothing loaded"),
    ]


def test_entry_point_refuses_the_reported_inputs(files: Files) -> None:
    """``python -m engine.cli`` itself: status 2, one line, no traceback, each well under a few seconds."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    for extra, args, needle in entry_point_cases(files):
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "engine.cli", *args], cwd=ROOT, env={**env, **extra},
                              capture_output=True, text=True, timeout=120)
        took = time.monotonic() - t0
        assert_one_line_error(proc.returncode, proc.stdout, proc.stderr, needle)
        assert took < 20, (args, took)


def test_errors_are_typed_in_the_api(files: Files) -> None:
    """The checks live where the values are used, not only in the CLI."""
    from engine._config import EngineConfig, MatchSettings, Neo4jSettings
    from engine.scoring.train import TrainSettings
    from engine.evaluation.synth import Synthesizer

    for bad in (math.nan, math.inf, 0, -1):
        with pytest.raises(ConfigError):
            MatchSettings(deadline_s=bad)
    with pytest.raises(ConfigError, match="scheme 'http'"):
        Neo4jSettings(uri="http://127.0.0.1:7474")
    with pytest.raises(ConfigError):
        EngineConfig(device="gpu")
    with pytest.raises(ConfigError):
        TrainSettings(lr=math.nan)
    for bad_stop in ({"min_epochs": 0}, {"smooth": 0}, {"smooth": 1.5}, {"seed": -1}):
        with pytest.raises(ConfigError, match=next(iter(bad_stop))):
            TrainSettings(**bad_stop)
    with pytest.raises(ConfigError, match="unknown shape"):
        next(Synthesizer.__new__(Synthesizer).generate(1, ["bogus"]))
    from engine._engine import Engine

    with pytest.raises(ConfigError, match="positive integer"):
        Engine(kg=KG).retrieve(PATTERN, k=-1)
    with pytest.raises(IsoragError):
        from loaders.bulk import BulkLoader

        BulkLoader(type("G", (), {"kg": KG})(), None, None, batch_size=0)  # type: ignore[arg-type]


def test_the_drivers_retry_warnings_stay_off_stderr(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """While a server restarts, the Neo4j driver logs multi-line 'will be retried' warnings; a command shows only
    its own one-line outcome: the driver's logger passes errors only (ISORAG_DEBUG=1 leaves it as it was)."""
    import logging

    from engine.cli import main

    log = logging.getLogger("neo4j")
    monkeypatch.setattr(log, "level", logging.NOTSET)
    monkeypatch.setenv("ISORAG_DEBUG", "1")
    main(["drop", "--kg", "x"])  # refused before any server (no --yes): only the set-up runs
    assert log.level == logging.NOTSET
    assert log.isEnabledFor(logging.WARNING)
    capsys.readouterr()
    monkeypatch.delenv("ISORAG_DEBUG")
    assert main(["drop", "--kg", "x"]) == 2
    assert not log.isEnabledFor(logging.WARNING) and log.isEnabledFor(logging.ERROR)
    assert capsys.readouterr().err.splitlines() == ["isorag: error: isorag drop deletes KG 'x' from Neo4j and "
                                                    "Milvus: add --yes"]
