"""Line-oriented source parsers: ``hrt``, ``tsv`` / ``csv``, ``jsonl`` and ``tables``; shared plumbing.

Every parser reads the file as bytes, one physical line at a time, and decodes each line as UTF-8 on its own,
so an undecodable byte is reported on the right line and memory stays flat in the file size (``tables`` also
keeps the set of node ids, see :func:`parse_tables`).  ``.gz`` and ``.bz2`` files are decompressed on the fly.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import logging
import re
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Iterator

from engine._errors import ConfigError, InputError, MalformedInputError

from ._model import EntityRecord, Record, TripleRecord

log = logging.getLogger("isorag.loaders")

_BOM = b"\xef\xbb\xbf"
_MAX_LOGGED = 10  # when no on_skip is given, this many skipped lines are logged one by one


# --------------------------------------------------------------------------------------------- plumbing
class Reporter:
    """Applies the error policy of one parse: raise at the first error (strict) or report and go on."""

    def __init__(
        self,
        path: str | Path,
        strict: bool,
        on_skip: Callable[[MalformedInputError], None] | None,
    ) -> None:
        self.path = str(path)
        self.strict = strict
        self.on_skip = on_skip
        self.skipped = 0

    def error(self, line: int, reason: str, path: str | Path | None = None) -> None:
        err = MalformedInputError(self.path if path is None else path, line, reason)
        if self.strict:
            raise err
        self.skipped += 1
        if self.on_skip is not None:
            self.on_skip(err)
        elif self.skipped <= _MAX_LOGGED:
            log.warning("skipped %s", err)

    def finish(self) -> None:
        if self.on_skip is None and self.skipped > _MAX_LOGGED:
            log.warning("%s: %d malformed lines skipped in all", self.path, self.skipped)


def open_binary(path: str | Path) -> io.BufferedIOBase:
    """Open ``path`` for reading bytes, decompressing ``.gz`` / ``.bz2``."""
    p = Path(path)
    try:
        if p.suffix == ".gz":
            return gzip.open(p, "rb")
        if p.suffix == ".bz2":
            return bz2.open(p, "rb")
        return open(p, "rb")
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{p}: is a directory, not a file") from None


def _decode_reason(raw: bytes, exc: UnicodeDecodeError) -> str:
    return f"not valid UTF-8: byte 0x{raw[exc.start]:02x} at column {exc.start + 1}"


def iter_lines(path: str | Path, rep: Reporter) -> Iterator[tuple[int, str]]:
    """Yield ``(line number, text)`` for each physical line, without its line break.

    A leading UTF-8 BOM is dropped; an undecodable line is reported (and not yielded).
    """
    with open_binary(path) as f:
        for n, raw in enumerate(f, 1):
            if n == 1 and raw.startswith(_BOM):
                raw = raw[3:]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                rep.error(n, _decode_reason(raw, exc))
                continue
            yield n, text.rstrip("\r\n")


def is_comment(stripped: str, comment: str | None, delimiter: str) -> bool:
    """Whether a (stripped, non-empty) line is a comment line.

    A line starting with the comment marker is a comment when the marker is followed by whitespace, by another
    marker, by nothing, or when the line has no delimiter at all.  So ``# a|b|c`` and ``#### notes`` are
    comments, but ``#Horror|directed_by|Tara Subkoff`` is a triple whose head starts with ``#`` (film titles
    do): real names are never dropped silently.
    """
    if not comment or not stripped.startswith(comment):
        return False
    rest = stripped[len(comment):]
    return not rest or rest[0].isspace() or rest.startswith(comment) or delimiter not in rest


def _empty_fields(fields: dict[str, str]) -> str | None:
    empty = [name for name, value in fields.items() if not value]
    if not empty:
        return None
    return "empty field: " + ", ".join(empty)


# ------------------------------------------------------------------------------------------------ hrt
_LEARNED_RELATIONS_CAP = 10_000


def parse_hrt(
    path: str | Path,
    rep: Reporter,
    *,
    delimiter: str = "|",
    comment: str | None = "#",
    relations: Collection[str] | None = None,
) -> Iterator[Record]:
    """``head|relation|tail`` per line (MetaQA ``kb.txt``).

    Fields are stripped.  Blank lines and comment lines (see :func:`is_comment`) are skipped silently.
    A line with more than three fields (a name containing the delimiter) is split around its relation
    when exactly one of its inner fields is a known relation: one from ``relations`` if given, else one
    already seen on a well-formed line of this file (at most 10,000 distinct names are remembered); the
    fields left of it form the head, those right of it the tail.  Otherwise the line is malformed.
    """
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ConfigError(f"hrt: delimiter must be one character, got {delimiter!r}")
    known = set(relations) if relations is not None else None
    return _hrt_records(path, rep, delimiter, comment, known)


def _hrt_records(
    path: str | Path, rep: Reporter, delimiter: str, comment: str | None, known: set[str] | None
) -> Iterator[Record]:
    learned: set[str] = set()
    for n, text in iter_lines(path, rep):
        stripped = text.strip()
        if not stripped or is_comment(stripped, comment, delimiter):
            continue
        parts = text.split(delimiter)
        if len(parts) != 3:
            split = _resplit(parts, delimiter, known if known is not None else learned)
            if split is None:
                rep.error(n, f"wrong field count: expected 3 {delimiter!r}-separated fields, got {len(parts)}"
                          + (" and the relation cannot be told apart" if len(parts) > 3 else ""))
                continue
            parts = split
        h, r, t = (p.strip() for p in parts)
        bad = _empty_fields({"head": h, "relation": r, "tail": t})
        if bad:
            rep.error(n, bad)
            continue
        if known is None and len(parts) == 3 and len(learned) < _LEARNED_RELATIONS_CAP:
            learned.add(r)
        yield TripleRecord(h, r, t, n)


def _resplit(parts: list[str], delimiter: str, relations: Collection[str]) -> list[str] | None:
    if len(parts) < 3 or not relations:
        return None
    hits = [i for i in range(1, len(parts) - 1) if parts[i].strip() in relations]
    if len(hits) != 1:
        return None
    i = hits[0]
    return [delimiter.join(parts[:i]), parts[i], delimiter.join(parts[i + 1:])]


# ------------------------------------------------------------------------------------------- tsv/csv
_HEAD_NAMES = ("head", "subject", "subj", "source", "src", "from", "head_id", "source_id", "start", "h", "s")
_REL_NAMES = ("relation", "rel", "predicate", "pred", "relationship", "relation_type", "relation_name",
              "edge", "property", "type", "r", "p")
_TAIL_NAMES = ("tail", "object", "obj", "target", "tgt", "dst", "to", "tail_id", "target_id", "end", "t", "o")
_ROLES = ("head", "relation", "tail")


def _norm(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", name.strip().strip(":").lower())


def _find_role_columns(header: list[str]) -> dict[str, int] | None:
    """Map head/relation/tail to header columns by their usual names, or None."""
    normed = [_norm(h) for h in header]
    found: dict[str, int] = {}
    for role, names in zip(_ROLES, (_HEAD_NAMES, _REL_NAMES, _TAIL_NAMES)):
        for name in names:
            if name in normed and normed.index(name) not in found.values():
                found[role] = normed.index(name)
                break
    return found if len(found) == 3 else None


def _looks_like_header(row: list[str]) -> bool:
    normed = [_norm(c) for c in row]
    if normed[:3] in (["h", "r", "t"], ["s", "p", "o"]):
        return True
    long_names = [set(n for n in names if len(n) > 1) for names in (_HEAD_NAMES, _REL_NAMES, _TAIL_NAMES)]
    roles = sum(1 for names in long_names if any(c in names for c in normed))
    return roles >= 2


class _CsvFeed:
    """Feeds decoded physical lines to ``csv.reader`` and remembers where each record starts.

    Blank and comment lines between records are skipped here (not inside a quoted multi-line field);
    an undecodable line is passed on with replacement characters and flagged, so the record holding it
    is reported on that line.
    """

    def __init__(self, f: io.BufferedIOBase, comment: str | None, delimiter: str) -> None:
        self.f = f
        self.comment = comment
        self.delimiter = delimiter
        self.lineno = 0
        self.start: int | None = None
        self.bad: tuple[int, str] | None = None

    def reset(self) -> None:
        self.start = None
        self.bad = None

    def __iter__(self) -> Iterator[str]:
        for raw in self.f:
            self.lineno += 1
            if self.lineno == 1 and raw.startswith(_BOM):
                raw = raw[3:]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                if self.bad is None:
                    self.bad = (self.lineno, _decode_reason(raw, exc))
                text = raw.decode("utf-8", errors="replace")
            if self.start is None:
                stripped = text.strip()
                if (not stripped or is_comment(stripped, self.comment, self.delimiter)) and self.bad is None:
                    continue
                self.start = self.lineno
            yield text


def _check_chars(delimiter: Any, quotechar: Any) -> None:
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ConfigError(f"delimiter must be one character, got {delimiter!r}")
    if quotechar is not None and (not isinstance(quotechar, str) or len(quotechar) != 1 or quotechar == delimiter):
        raise ConfigError(f"quotechar must be one character other than the delimiter, or None; got {quotechar!r}")


def iter_csv_rows(
    path: str | Path,
    rep: Reporter,
    *,
    delimiter: str,
    quotechar: str | None = '"',
    comment: str | None = "#",
) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(first line of the record, fields)`` of a delimited file; csv errors are reported."""
    with open_binary(path) as f:
        feed = _CsvFeed(f, comment, delimiter)
        if quotechar is None:
            reader = csv.reader(feed, delimiter=delimiter, quoting=csv.QUOTE_NONE, strict=True)
        else:
            reader = csv.reader(feed, delimiter=delimiter, quotechar=quotechar, strict=True)
        while True:
            feed.reset()
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                rep.error(feed.start or feed.lineno, f"bad quoting: {exc}")
                continue
            start = feed.start if feed.start is not None else feed.lineno
            if feed.bad is not None:
                rep.error(*feed.bad)
                continue
            if not row:
                continue
            yield start, row


def parse_delimited(
    path: str | Path,
    rep: Reporter,
    *,
    fmt: str,
    delimiter: str | None = None,
    head: str | int | None = None,
    relation: str | int | None = None,
    tail: str | int | None = None,
    header: bool | None = None,
    columns: int | None = None,
    quotechar: str | None = '"',
    comment: str | None = "#",
    aliases: str | int | None = None,
    alias_separator: str = ";",
) -> Iterator[Record]:
    """Triples from a TSV or CSV file, with or without a header row.

    ``head`` / ``relation`` / ``tail`` name the columns (header names) or give 0-based positions; by default
    the header's usual names (head/subject/source..., relation/predicate/type..., tail/object/target...)
    when there is a header that has them, else positions 0, 1, 2.  ``header=None`` detects a header: the first
    row is one when it holds the named columns or at least two of head/relation/tail-like names.  Each row
    must have exactly ``columns`` fields (default: the header's width, else the largest position + 1).
    Fields are parsed by the csv module (quoted fields may hold the delimiter or line breaks; ``quotechar=None``
    turns quoting off for raw dumps) and stripped.  Blank and comment lines are skipped silently.
    ``aliases`` names the column (or position) holding the head's other names, separated by ``alias_separator``
    (by default a header column named ``aliases``, ``alias`` or ``head_aliases``); each row with some also yields an
    EntityRecord of the head with them.
    """
    if delimiter is None:
        delimiter = "\t" if fmt == "tsv" else ","
    spec = {"head": head, "relation": relation, "tail": tail}
    for role, value in spec.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (str, int))
                                  or (isinstance(value, int) and value < 0)):
            raise ConfigError(f"{fmt}: {role}= must be a column name or a 0-based position, got {value!r}")
    if aliases is not None and (isinstance(aliases, bool) or not isinstance(aliases, (str, int))
                                or (isinstance(aliases, int) and aliases < 0)):
        raise ConfigError(f"{fmt}: aliases= must be a column name or a 0-based position, got {aliases!r}")
    if not isinstance(alias_separator, str) or not alias_separator:
        raise ConfigError(f"{fmt}: alias_separator must be a non-empty string, got {alias_separator!r}")
    named = {r: v for r, v in spec.items() if isinstance(v, str)}
    if named and header is False:
        raise ConfigError(f"{fmt}: columns given by name ({', '.join(named.values())}) need a header row")
    if columns is not None and (not isinstance(columns, int) or columns < 1):
        raise ConfigError(f"{fmt}: columns= must be a positive integer, got {columns!r}")
    _check_chars(delimiter, quotechar)
    return _delimited_records(path, rep, fmt, delimiter, spec, named, header, columns, quotechar, comment,
                              (aliases, alias_separator))


def _alias_column(hdr: list[str] | None, spec: str | int | None, taken: Collection[int], path: Any) -> int | None:
    """The position of the aliases column: given by name or position, else a header column with an alias name."""
    if isinstance(spec, int):
        return spec
    if isinstance(spec, str):
        if hdr is None or spec not in hdr:
            raise ConfigError(f"{path}: no aliases column {spec!r} in the header {hdr!r}")
        return hdr.index(spec)
    return _pick(hdr, _ALIAS_NAMES, taken) if hdr is not None else None


def _split_aliases(text: str, sep: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(a.strip() for a in text.split(sep) if a.strip()))


def _delimited_records(
    path: str | Path,
    rep: Reporter,
    fmt: str,
    delimiter: str,
    spec: dict[str, str | int | None],
    named: dict[str, str],
    header: bool | None,
    columns: int | None,
    quotechar: str | None,
    comment: str | None,
    alias_spec: tuple[str | int | None, str] = (None, ";"),
) -> Iterator[Record]:
    rows = iter_csv_rows(path, rep, delimiter=delimiter, quotechar=quotechar, comment=comment)
    first = next(rows, None)
    if first is None:
        return
    first_line, first_row = first
    first_clean = [c.strip() for c in first_row]

    if header is None:
        if named:
            header = all(v in first_clean for v in named.values())
            if not header:
                raise ConfigError(
                    f"{path}: columns given by name ({', '.join(named.values())}) but the first row "
                    f"{first_clean!r} is not a header holding them")
        else:
            header = _looks_like_header(first_clean)

    pos: dict[str, int] = {}
    if header:
        hdr = first_clean
        for role, v in spec.items():
            if isinstance(v, str):
                if v not in hdr:
                    raise ConfigError(f"{path}:{first_line}: no column {v!r} in header {hdr!r}")
                pos[role] = hdr.index(v)
            elif isinstance(v, int):
                pos[role] = v
        if len(pos) < 3:
            auto = _find_role_columns(hdr)
            for role in _ROLES:
                if role not in pos:
                    pos[role] = auto[role] if auto else _ROLES.index(role)
        width = columns if columns is not None else len(hdr)
    else:
        for role, v in spec.items():
            pos[role] = v if isinstance(v, int) else _ROLES.index(role)
        width = columns if columns is not None else max(pos.values()) + 1
    if len(set(pos.values())) != 3:
        raise ConfigError(f"{fmt}: head, relation and tail must be different columns, got {pos}")
    if max(pos.values()) >= width:
        raise ConfigError(f"{fmt}: column position {max(pos.values())} is beyond the {width} columns")
    i_alias = _alias_column(first_clean if header else None, alias_spec[0], list(pos.values()), path)
    if i_alias is not None and (i_alias >= width or i_alias in pos.values()):
        raise ConfigError(f"{fmt}: the aliases column {i_alias} is not a column of its own among the {width}")

    def records(stream: Iterable[tuple[int, list[str]]]) -> Iterator[Record]:
        for n, row in stream:
            if len(row) != width:
                rep.error(n, f"wrong column count: expected {width} fields, got {len(row)}")
                continue
            h, r, t = (row[pos[role]].strip() for role in _ROLES)
            bad = _empty_fields({"head": h, "relation": r, "tail": t})
            if bad:
                rep.error(n, bad)
                continue
            yield TripleRecord(h, r, t, n)
            if i_alias is not None and row[i_alias].strip():
                yield EntityRecord(h, None, (), n, _split_aliases(row[i_alias], alias_spec[1]))

    if not header:
        yield from records([first])
    yield from records(rows)


# --------------------------------------------------------------------------------------------- jsonl
def _json_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return json.dumps(value)
    return None


def iter_json_lines(path: str | Path, rep: Reporter) -> Iterator[tuple[int, Any]]:
    """(line number, decoded value) of each non-blank line of a JSON Lines file; a line that is not JSON is
    reported to ``rep`` at its line and skipped."""
    for n, text in iter_lines(path, rep):
        if not text.strip():
            continue
        try:
            yield n, json.loads(text)
        except json.JSONDecodeError as exc:
            rep.error(n, f"invalid JSON: {exc.msg} at column {exc.colno}")


def _json_entity(n: int, obj: dict[str, Any], rep: Reporter) -> EntityRecord | None:
    """An entity line: ``{"key": ..., "name": ..., "aliases": [...], "types": [...]}`` (all but the key optional)."""
    key = _json_text(obj.get("key", obj.get("id")))
    if not key:
        rep.error(n, "an entity line needs a key: got " + repr(obj.get("key", obj.get("id"))))
        return None
    name = obj.get("name")
    if name is not None and not (isinstance(name, str) and name.strip()):
        rep.error(n, f"not a name: {name!r}")
        return None
    lists: dict[str, tuple[str, ...]] = {}
    for field in ("aliases", "types"):
        raw = obj.get(field) or []
        if isinstance(raw, str):
            raw = [raw]
        if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
            rep.error(n, f"{field} must be a list of strings: got {raw!r}")
            return None
        lists[field] = tuple(dict.fromkeys(x.strip() for x in raw if x.strip()))
    return EntityRecord(key, name.strip() if name else None, lists["types"], n, lists["aliases"])


def parse_jsonl(path: str | Path, rep: Reporter) -> Iterator[Record]:
    """One JSON object per line with string keys ``head``, ``relation``, ``tail`` (extra keys are ignored), or,
    for an entity, ``key`` (or ``id``) with any of ``name``, ``aliases`` (a list of other names) and ``types``.

    Values must be strings (numbers are accepted and keyed by their JSON text, e.g. ``1994``); blank lines
    are skipped.
    """
    for n, obj in iter_json_lines(path, rep):
        if not isinstance(obj, dict):
            rep.error(n, f"not a JSON object: got {type(obj).__name__}")
            continue
        if not any(k in obj for k in _ROLES) and ("key" in obj or "id" in obj):
            ent = _json_entity(n, obj, rep)
            if ent is not None:
                yield ent
            continue
        missing = [k for k in _ROLES if k not in obj]
        if missing:
            rep.error(n, "missing key: " + ", ".join(missing))
            continue
        vals = {k: _json_text(obj[k]) for k in _ROLES}
        wrong = [k for k, v in vals.items() if v is None]
        if wrong:
            rep.error(n, "not a string: " + ", ".join(f"{k}={obj[k]!r}" for k in wrong))
            continue
        bad = _empty_fields(vals)  # type: ignore[arg-type]
        if bad:
            rep.error(n, bad)
            continue
        yield TripleRecord(vals["head"], vals["relation"], vals["tail"], n)  # type: ignore[arg-type]


# -------------------------------------------------------------------------------------------- tables
_ID_NAMES = ("id", "key", "node_id", "nodeid", "entity_id")
_NAME_NAMES = ("name", "label", "title", "display_name")
_TYPE_NAMES = ("types", "type", "labels", "category", "categories", "kind")
_ALIAS_NAMES = ("aliases", "alias", "head_aliases", "alt_names", "also_known_as", "synonyms")
_SRC_NAMES = ("source", "src", "from", "head", "source_id", "start", "subject")
_EREL_NAMES = ("relation", "rel", "type", "relationship", "relation_type", "label", "predicate")
_DST_NAMES = ("target", "dst", "to", "tail", "target_id", "end", "object")


def _pick(header: list[str], names: tuple[str, ...], taken: Collection[int] = ()) -> int | None:
    normed = [_norm(h) for h in header]
    for name in names:
        for i, h in enumerate(normed):
            if h == name and i not in taken:
                return i
    return None


def parse_tables(
    path: str | Path | None,
    rep: Reporter,
    *,
    nodes: str | Path | None = None,
    edges: str | Path | None = None,
    delimiter: str = ",",
    type_separator: str = ";",
    quotechar: str | None = '"',
) -> Iterator[Record]:
    """An enterprise export as two CSV files with header rows: nodes, then edges.

    ``nodes.csv``: columns ``id``, ``name`` and optionally ``type`` or ``types`` (several types separated by
    ``;``) and ``aliases`` (other names, separated the same way); ``edges.csv``: columns ``source``, ``relation``,
    ``target`` (node ids).  ``path`` is a directory holding both (or ``nodes=`` / ``edges=`` give the files).
    Yields an EntityRecord per node first, then a TripleRecord per edge.  The set of node ids is kept in memory
    (one string per node) to check that every edge's source and target is a node: an edge with an unknown end, a
    duplicate node id or an empty id, name or relation is a malformed line.
    """
    nodes_p, edges_p = resolve_tables(path, nodes, edges)
    if not isinstance(type_separator, str) or not type_separator:
        raise ConfigError(f"tables: type_separator must be a non-empty string, got {type_separator!r}")
    _check_chars(delimiter, quotechar)
    return _tables_records(nodes_p, edges_p, rep, delimiter, type_separator, quotechar)


def _tables_records(
    nodes_p: Path, edges_p: Path, rep: Reporter, delimiter: str, type_separator: str, quotechar: str | None
) -> Iterator[Record]:
    node_rep = Reporter(nodes_p, rep.strict, rep.on_skip)
    edge_rep = Reporter(edges_p, rep.strict, rep.on_skip)
    ids: set[str] = set()
    try:
        rows = iter_csv_rows(nodes_p, node_rep, delimiter=delimiter, quotechar=quotechar, comment=None)
        first = next(rows, None)
        if first is not None:
            hline, hdr = first[0], [c.strip() for c in first[1]]
            i_id = _pick(hdr, _ID_NAMES)
            i_name = _pick(hdr, _NAME_NAMES, [i_id] if i_id is not None else [])
            if i_id is None or i_name is None:
                raise ConfigError(f"{nodes_p}:{hline}: the nodes header needs columns id and name, got {hdr!r}")
            i_type = _pick(hdr, _TYPE_NAMES, [i_id, i_name])
            i_alias = _pick(hdr, _ALIAS_NAMES, [i for i in (i_id, i_name, i_type) if i is not None])
            for n, row in rows:
                if len(row) != len(hdr):
                    node_rep.error(n, f"wrong column count: expected {len(hdr)} fields, got {len(row)}")
                    continue
                key, name = row[i_id].strip(), row[i_name].strip()
                bad = _empty_fields({"id": key, "name": name})
                if bad:
                    node_rep.error(n, bad)
                    continue
                if key in ids:
                    node_rep.error(n, f"duplicate node id: {key!r}")
                    continue
                ids.add(key)
                types: tuple[str, ...] = ()
                if i_type is not None:
                    types = tuple(t.strip() for t in row[i_type].split(type_separator) if t.strip())
                aliases = _split_aliases(row[i_alias], type_separator) if i_alias is not None else ()
                yield EntityRecord(key, name, types, n, tuple(a for a in aliases if a != name))

        rows = iter_csv_rows(edges_p, edge_rep, delimiter=delimiter, quotechar=quotechar, comment=None)
        first = next(rows, None)
        if first is None:
            return
        hline, hdr = first[0], [c.strip() for c in first[1]]
        i_src = _pick(hdr, _SRC_NAMES)
        i_dst = _pick(hdr, _DST_NAMES, [i_src] if i_src is not None else [])
        taken = [i for i in (i_src, i_dst) if i is not None]
        i_rel = _pick(hdr, _EREL_NAMES, taken)
        if i_src is None or i_rel is None or i_dst is None:
            raise ConfigError(
                f"{edges_p}:{hline}: the edges header needs columns source, relation and target, got {hdr!r}")
        for n, row in rows:
            if len(row) != len(hdr):
                edge_rep.error(n, f"wrong column count: expected {len(hdr)} fields, got {len(row)}")
                continue
            h, r, t = row[i_src].strip(), row[i_rel].strip(), row[i_dst].strip()
            bad = _empty_fields({"source": h, "relation": r, "target": t})
            if bad:
                edge_rep.error(n, bad)
                continue
            unknown = [f"{role} {v!r}" for role, v in (("source", h), ("target", t)) if v not in ids]
            if unknown:
                edge_rep.error(n, "unknown node id: " + ", ".join(unknown))
                continue
            yield TripleRecord(h, r, t, n)
    finally:
        rep.skipped += node_rep.skipped + edge_rep.skipped
        node_rep.skipped = edge_rep.skipped = 0


def resolve_tables(
    path: str | Path | None, nodes: str | Path | None, edges: str | Path | None
) -> tuple[Path, Path]:
    """The nodes and edges files of a ``tables`` source."""
    base = Path(path) if path is not None else None
    if base is not None and base.is_dir():
        nodes_p = Path(nodes) if nodes is not None else base / "nodes.csv"
        edges_p = Path(edges) if edges is not None else base / "edges.csv"
    elif base is not None:  # the nodes file itself
        nodes_p = Path(nodes) if nodes is not None else base
        if edges is not None:
            edges_p = Path(edges)
        else:
            edges_p = base.with_name(base.name.replace("nodes", "edges", 1))
            if edges_p == base:
                raise ConfigError(f"tables: cannot tell the edges file for {base}: pass edges=")
    else:
        if nodes is None or edges is None:
            raise ConfigError("tables: give a directory holding nodes.csv and edges.csv, or nodes= and edges=")
        nodes_p, edges_p = Path(nodes), Path(edges)
    for p in (nodes_p, edges_p):
        if not p.is_file():
            raise InputError(f"tables: {p}: no such file")
    return nodes_p, edges_p
