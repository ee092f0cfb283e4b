"""The command line's argument types: each refuses a bad value with a one-line reason when the line is parsed, so
bad input fails before a server or a model starts.

Numeric types carry their ``bounds`` (``lo, hi, lo_open, integer``) and path types are these functions themselves, so
that tests read every option's rule from the parser.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, NoReturn

from engine._errors import ConfigError

__all__ = ["BATCH_MAX", "K_MAX", "SEED_MAX", "WORKERS_MAX", "Parser", "UsageError", "column_type", "delimiter_type",
           "device_type", "fewshot_type", "float_type", "in_file", "int_type", "key_value_type", "kg_type",
           "out_file", "pattern_type", "shapes_type", "shard_type", "source_type", "text_type"]

#: caps on arguments, each with its reason
K_MAX = 16_384  # Milvus' topk
BATCH_MAX = 1_000_000  # triples per Neo4j transaction in a load
WORKERS_MAX = 1024  # threads (verify --concurrency, train-scorer --threads)
SEED_MAX = 2 ** 32 - 1  # numpy's seeds


# -- argument types: each refuses a bad value with a one-line reason at parse time -------------------------------
def int_type(lo: int, hi: int | None = None) -> Callable[[str], int]:
    if hi is not None:
        what = f"an integer from {lo:,} to {hi:,}"
    else:
        what = "a positive integer" if lo == 1 else f"an integer >= {lo:,}"

    def parse(text: str) -> int:
        try:
            n = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        if n < lo or hi is not None and n > hi:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return n

    parse.__name__ = "integer"
    parse.bounds = (lo, hi, False, True)  # type: ignore[attr-defined]  # (lo, hi, lo_open, integer): for tests
    return parse


def float_type(lo: float, hi: float | None = None, *, lo_open: bool = False) -> Callable[[str], float]:
    if hi is not None:
        what = f"a number in {'(' if lo_open else '['}{lo:g}, {hi:g}]"
    else:
        what = f"a finite number {'>' if lo_open else '>='} {lo:g}"

    def parse(text: str) -> float:
        try:
            x = float(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        # nan passes no comparison and inf never ends a deadline: both refused
        if not math.isfinite(x) or x < lo or lo_open and x == lo or hi is not None and x > hi:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return x

    parse.__name__ = "number"
    parse.bounds = (lo, hi, lo_open, False)  # type: ignore[attr-defined]
    return parse


def kg_type(text: str) -> str:
    from engine._config import check_kg_name

    try:
        return check_kg_name(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _readable(p: Path, what: str, *, directory_ok: bool = False) -> None:
    if not p.exists():
        raise argparse.ArgumentTypeError(f"{what} {str(p)!r} does not exist")
    if p.is_dir():
        if directory_ok:
            if not os.access(p, os.R_OK | os.X_OK):
                raise argparse.ArgumentTypeError(f"{what} {str(p)!r}: permission denied")
            return
        raise argparse.ArgumentTypeError(f"{what} {str(p)!r} is a directory, not a file")
    try:
        with open(p, "rb") as f:
            f.read(1)
    except OSError as e:
        raise argparse.ArgumentTypeError(f"{what} {str(p)!r}: {e.strerror or e}") from None


def in_file(text: str) -> str:
    """A file that exists and can be read."""
    _readable(Path(text).expanduser(), "file")
    return text


def source_type(text: str) -> str:
    """A source to load: a readable file, or a directory (``tables``: nodes.csv + edges.csv)."""
    _readable(Path(text).expanduser(), "source", directory_ok=True)
    return text


def out_file(text: str) -> str:
    """A file that can be written: not a directory, in a directory that exists (or can be made) and is writable."""
    p = Path(text).expanduser()
    if not text.strip():
        raise argparse.ArgumentTypeError("empty path")
    if p.is_dir():
        raise argparse.ArgumentTypeError(f"output {text!r} is a directory, not a file")
    if p.exists():
        if not os.access(p, os.W_OK):
            raise argparse.ArgumentTypeError(f"output {text!r}: permission denied")
        return text
    parent = p.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"output {text!r}: {str(parent)!r} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"output {text!r}: cannot write in {str(parent)!r} (permission denied)")
    return text


def _read_text(p: Path, what: str) -> str:
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise argparse.ArgumentTypeError(f"{what} {str(p)!r}: {e.strerror or e}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise argparse.ArgumentTypeError(
            f"{what} {str(p)}:{line}: not valid UTF-8: byte 0x{raw[e.start]:02x}") from None


def pattern_type(text: str) -> str:
    """A pattern: its JSON text, a file holding it, or - for stdin; parsed now, so a bad one fails at once."""
    from engine.retrieval.pattern import Pattern
    from engine._errors import PatternError

    if text == "-":
        data = sys.stdin.buffer.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise argparse.ArgumentTypeError(f"pattern on stdin: not valid UTF-8: byte 0x{data[e.start]:02x}") from None
    elif not text.lstrip().startswith(("{", "[")):
        p = Path(text)
        if not os.path.lexists(text):
            raise argparse.ArgumentTypeError(f"{text!r} is neither pattern JSON nor a file")
        if p.is_dir():
            raise argparse.ArgumentTypeError(f"pattern file {text!r} is a directory, not a file")
        text = _read_text(p, "pattern file")
    try:
        Pattern.from_json(text)
    except PatternError as e:
        raise argparse.ArgumentTypeError(f"not a pattern: {e}") from None
    return text


def text_type(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("empty text")
    return text


def delimiter_type(text: str) -> str:
    """One character; escapes as in Python (``\\t``, ``\\x1f``, ``\\u00a6``)."""
    value = text
    if "\\" in text:
        try:
            value = text.encode("ascii", "backslashreplace").decode("unicode_escape")
        except UnicodeDecodeError as e:
            raise argparse.ArgumentTypeError(f"bad escape in {text!r}: {e.reason}") from None
    if len(value) != 1 or value in "\r\n":
        raise argparse.ArgumentTypeError(f"must be one character other than a line break, got {text!r}")
    return value


def column_type(text: str) -> int | str:
    """A column name or a 0-based position."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty column name")
    return int(text) if text.isdigit() else text


def shard_type(text: str) -> tuple[int, int]:
    from engine.jobs import parse_shard

    try:
        shard = parse_shard(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    assert shard is not None
    return shard


def shapes_type(text: str) -> list[str]:
    from engine.evaluation.synth import SHAPES

    shapes = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in shapes if x not in SHAPES]
    if bad or not shapes:
        raise argparse.ArgumentTypeError(f"unknown shape(s) {', '.join(bad) or repr(text)}; known: {', '.join(SHAPES)}")
    return shapes


def key_value_type(text: str) -> tuple[str, Any]:
    key, eq, value = text.partition("=")
    if not eq or not key.strip().isidentifier():
        raise argparse.ArgumentTypeError(f"takes KEY=VALUE, got {text!r}")
    try:
        parsed: Any = json.loads(value)
    except ValueError:
        parsed = value
    if isinstance(parsed, float) and not math.isfinite(parsed):
        raise argparse.ArgumentTypeError(f"{key}: not a finite number: {value!r}")
    return key.strip(), parsed


def device_type(text: str) -> str:
    if not re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", text.strip().lower()):
        raise argparse.ArgumentTypeError(f"use auto, cpu, mps, cuda or cuda:N, got {text!r}")
    return text.strip().lower()


def fewshot_type(text: str) -> str:
    """A bundled name, a directory of ``<kind>.jsonl`` files or a prefix ``P`` of ``P_<kind>.jsonl`` files."""
    from engine.answering.prompting import FEWSHOT_DIR

    p = Path(text).expanduser()
    if p.is_dir() or p.name and any(p.parent.glob(f"{p.name}_*.jsonl")):
        return text
    if (FEWSHOT_DIR / f"{text}_pattern.jsonl").is_file() or (FEWSHOT_DIR / f"{text}.jsonl").is_file():
        return text
    known = sorted({f.stem.rsplit("_", 1)[0] for f in FEWSHOT_DIR.glob("*.jsonl")})
    raise argparse.ArgumentTypeError(f"{text!r} is neither a directory, a prefix of *_<kind>.jsonl files, nor a "
                                     f"bundled set ({', '.join(known)})")


class UsageError(Exception):
    """A bad command line (argparse's errors, made one line)."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        sub = self.prog.split(" ", 1)[1] + ": " if " " in self.prog else ""
        raise UsageError(f"{sub}{message} (see {self.prog} --help)")
