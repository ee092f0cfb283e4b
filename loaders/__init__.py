"""Source formats -> a stream of :class:`TripleRecord` / :class:`EntityRecord` records.

    >>> from loaders import open_source, SkipLog
    >>> skips = SkipLog()
    >>> for rec in open_source("kb.txt", on_skip=skips):   # format detected from the file
    ...     ...
    >>> print(skips.summary())

Formats (``FORMATS``):

``hrt``     ``head|relation|tail`` per line (MetaQA ``kb.txt``).  Options: ``delimiter="|"``, ``comment="#"``,
            ``relations=`` (known relation names, used to split a line whose names contain the delimiter).
``tsv``     triples in a tab-separated file, ``csv``: comma-separated; with or without a header.  Options:
            ``head=``, ``relation=``, ``tail=`` (column names or 0-based positions), ``header=`` (None: detect),
            ``delimiter=``, ``columns=`` (expected field count), ``quotechar=`` (None: no quoting),
            ``comment="#"``.
``nt``      N-Triples, streamed.  Options: ``label_langs=("en",)`` (None: all; a label in another language is an
            alias), ``label_predicates=``, ``type_predicates=``, ``alias_predicates=`` (default ``skos:altLabel``).
``ttl``     Turtle, parsed whole by rdflib (not streamed).  Same options as ``nt`` plus ``base=``.
``jsonl``   ``{"head": ..., "relation": ..., "tail": ...}`` per line (extra keys allowed); a line
            ``{"key": ..., "name": ..., "aliases": [...], "types": [...]}`` describes an entity.
``tables``  ``nodes.csv`` (id, name, type/types, aliases) + ``edges.csv`` (source, relation, target).  Options:
            ``nodes=``, ``edges=``, ``delimiter=","``, ``type_separator=";"`` (also between aliases),
            ``quotechar=``.
            (``tsv`` / ``csv`` also read an ``aliases`` column: the head's other names, ``alias_separator=";"``.)

Every format but ``ttl`` reads line by line (memory flat in the file size; ``tables`` keeps its node ids).
Files ending in ``.gz`` / ``.bz2`` are decompressed on the fly.  Malformed input becomes a
:class:`~engine._errors.MalformedInputError` (``file:line: reason``): raised at the first with ``strict=True``,
otherwise passed to ``on_skip`` (or logged when there is none) and the parse goes on.  Bad options raise
:class:`~engine._errors.ConfigError` when :func:`open_source` is called; a missing file raises
:class:`~engine._errors.InputError`.
"""

from __future__ import annotations

import inspect
import zlib
from pathlib import Path
from typing import Any, Callable, Iterator

from engine._errors import ConfigError, InputError, MalformedInputError
from engine._reports import SkipLog

from ._model import EntityRecord, Record, TripleRecord
from ._parsers import Reporter, open_binary, parse_delimited, parse_hrt, parse_jsonl, parse_tables
from ._rdf import local_name, parse_nt, parse_ttl

FORMATS = ("hrt", "tsv", "csv", "nt", "ttl", "jsonl", "tables")

_EXTENSIONS = {
    ".tsv": "tsv",
    ".csv": "csv",
    ".nt": "nt",
    ".ntriples": "nt",
    ".ttl": "ttl",
    ".turtle": "ttl",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
}
_COMPRESSED = (".gz", ".bz2")
_SNIFF_LINES = 20


def _formats_hint() -> str:
    return ("known formats: hrt (.txt, 'h|r|t'), tsv, csv, nt, ttl, jsonl (.jsonl/.ndjson), "
            "tables (a directory with nodes.csv + edges.csv)")


def detect_format(path: str | Path) -> str:
    """The format of ``path``: by extension, else by looking at its first lines.

    A directory (holding ``nodes.csv``) or a file named ``nodes*.csv`` is ``tables``; ``.txt`` (or no known
    extension) is sniffed: three tab-separated fields -> ``tsv``, a ``|`` -> ``hrt``, a JSON object -> ``jsonl``,
    ``@prefix``/``PREFIX`` -> ``ttl``, ``<iri> <iri> ... .`` -> ``nt``.  Raises ConfigError naming the known
    formats when it cannot tell, InputError when the path does not exist.
    """
    p = Path(path)
    if p.is_dir():
        if (p / "nodes.csv").is_file():
            return "tables"
        raise ConfigError(f"{p}: a directory is read as 'tables' only when it holds nodes.csv and edges.csv; "
                          + _formats_hint())
    if not p.exists():
        raise InputError(f"{p}: no such file")
    name = p.name.lower()
    suffixes = [s.lower() for s in p.suffixes]
    if suffixes and suffixes[-1] in _COMPRESSED:
        suffixes = suffixes[:-1]
        name = name.rsplit(".", 1)[0]
    ext = suffixes[-1] if suffixes else ""
    if ext == ".csv" and name.startswith("nodes"):
        return "tables"
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    try:
        sniffed = _sniff(p)
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(f"{p}: cannot read it: {e}") from e
    if sniffed is None:
        raise ConfigError(f"{p}: cannot tell the format from its name or first lines; pass fmt=; "
                          + _formats_hint())
    return sniffed


def _sniff(p: Path) -> str | None:
    lines: list[str] = []
    comments: list[str] = []  # '#' lines: comments, or names starting with '#'; looked at last
    with open_binary(p) as f:
        for raw in f:
            text = raw.decode("utf-8", errors="replace").lstrip("\ufeff").strip()
            if not text:
                continue
            (comments if text.startswith("#") else lines).append(text)
            if len(lines) >= _SNIFF_LINES or len(comments) >= 10 * _SNIFF_LINES:
                break
    if not lines:
        lines = [c for c in comments if not c[1:2].isspace() and c[1:2] != "#"]
        if not lines:
            return None
    first = lines[0]
    if first.startswith("{"):
        return "jsonl"
    if first.lower().startswith(("@prefix", "@base", "prefix ", "base ")):
        return "ttl"
    if first.startswith(("<", "_:")) and first.endswith("."):
        return "nt"
    if all(len(line.split("\t")) == 3 for line in lines):
        return "tsv"
    if any("|" in line for line in lines):
        return "hrt"
    return None


_PARSERS: dict[str, Callable[..., Iterator[Record]]] = {
    "hrt": parse_hrt,
    "tsv": parse_delimited,
    "csv": parse_delimited,
    "nt": parse_nt,
    "ttl": parse_ttl,
    "jsonl": parse_jsonl,
    "tables": parse_tables,
}


def _allowed_options(fmt: str) -> list[str]:
    sig = inspect.signature(_PARSERS[fmt])
    return [n for n, prm in sig.parameters.items() if prm.kind is prm.KEYWORD_ONLY and n != "fmt"]


def open_source(
    path: str | Path | None,
    fmt: str | None = None,
    *,
    strict: bool = False,
    on_skip: Callable[[MalformedInputError], None] | None = None,
    **options: Any,
) -> Iterator[Record]:
    """Parse a source file into a stream of records (see the module docstring for formats and options).

    ``fmt=None`` detects the format (:func:`detect_format`).  ``strict=True`` raises the first
    MalformedInputError; otherwise each malformed line is passed to ``on_skip`` (e.g. a :class:`SkipLog`) and
    skipped; without ``on_skip`` the first few are logged (logger ``isorag.loaders``) with a total at the end.
    Options are checked now; the file is read lazily, as the returned iterator is consumed.
    For ``tables``, ``path`` may be None when ``nodes=`` and ``edges=`` are given.
    """
    if fmt is None:
        if path is None:
            if "nodes" in options and "edges" in options:
                fmt = "tables"
            else:
                raise ConfigError("open_source: no path given")
        else:
            fmt = detect_format(path)
    if fmt not in _PARSERS:
        raise ConfigError(f"unknown format {fmt!r}; " + _formats_hint())
    allowed = _allowed_options(fmt)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ConfigError(f"{fmt}: unknown option(s) {', '.join(unknown)}; "
                          f"options of {fmt}: {', '.join(allowed) or 'none'}")
    if on_skip is not None and not callable(on_skip):
        raise ConfigError("on_skip must be callable")
    if path is None and fmt != "tables":
        raise ConfigError("open_source: no path given")
    if path is not None and fmt != "tables":
        p = Path(path)
        if not p.is_file():
            raise InputError(f"{p}: no such file")
    display = path if path is not None else options.get("nodes")
    rep = Reporter(display, bool(strict), on_skip)  # type: ignore[arg-type]
    if fmt in ("tsv", "csv"):
        options = {"fmt": fmt, **options}
    records = _PARSERS[fmt](path, rep, **options)
    return _finishing(records, rep)


def _finishing(records: Iterator[Record], rep: Reporter) -> Iterator[Record]:
    try:
        yield from records
    except (OSError, EOFError, zlib.error) as e:  # a compressed file cut short or corrupt, a disk that fails
        raise InputError(f"{rep.path}: cannot read it: {e}") from e
    rep.finish()


__all__ = [
    "FORMATS",
    "TripleRecord",
    "EntityRecord",
    "Record",
    "SkipLog",
    "detect_format",
    "open_source",
    "local_name",
]
