"""RDF sources: N-Triples (streamed, own strict tokenizer) and Turtle (rdflib, whole file).

Mapping to records, for both:

* an IRI's entity key is the IRI; a literal object is an entity whose key is the literal's lexical form
  (``"1940-11-27"^^xsd:date`` -> ``1940-11-27``; language tag and datatype are dropped); a blank node's key is
  ``_:<file name>:<label>`` (scoped to its file, so two files' ``_:b1`` stay apart);
* ``rdfs:label`` with a literal object -> ``EntityRecord(key, name=label)``, for untagged labels and those
  whose language is in ``label_langs`` (default English: ``en``, ``en-GB``...); a label in another language is an
  alias of the entity (``EntityRecord(key, aliases=(label,))``), as is ``skos:altLabel`` (``alias_predicates``) in
  any language;
* ``rdf:type`` -> ``EntityRecord(key, types=(local name of the class,))``;
* any other predicate -> ``TripleRecord(subject, local name of the predicate, object)``, where the local name is
  what follows the last ``#`` or ``/`` (the whole IRI if that is empty).  Predicates of different namespaces
  with the same local name therefore share a relation name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Collection, Iterator

from engine._errors import ConfigError

from ._model import EntityRecord, Record, TripleRecord
from ._parsers import Reporter, _decode_reason, iter_lines, open_binary

RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
SKOS_ALT_LABEL = "http://www.w3.org/2004/02/skos/core#altLabel"


def local_name(iri: str) -> str:
    """The part of an IRI after its last ``#`` or ``/`` (the whole IRI when that part is empty)."""
    cut = max(iri.rfind("#"), iri.rfind("/"))
    tail = iri[cut + 1:]
    return tail if tail else iri


# ----------------------------------------------------------------------------------- term -> records
class _Mapper:
    """Turns (subject, predicate, object) terms into records; shared by both syntaxes."""

    def __init__(
        self,
        rep: Reporter,
        scope: str,
        label_langs: Collection[str] | None,
        label_predicates: Collection[str],
        type_predicates: Collection[str],
        alias_predicates: Collection[str] = (SKOS_ALT_LABEL,),
    ) -> None:
        self.rep = rep
        self.alias_p = frozenset(alias_predicates)
        self.scope = scope
        self.langs = None if label_langs is None else {lang.lower() for lang in label_langs}
        self.label_p = frozenset(label_predicates)
        self.type_p = frozenset(type_predicates)

    def lang_ok(self, lang: str | None) -> bool:
        if not lang or self.langs is None:
            return True
        lang = lang.lower()
        return lang in self.langs or lang.split("-", 1)[0] in self.langs

    def bnode(self, label: str) -> str:
        return f"_:{self.scope}:{label}"

    def record(
        self, line: int, s: str, p: str, o: str, o_is_literal: bool, lang: str | None
    ) -> Record | None:
        if (p in self.label_p or p in self.alias_p) and o_is_literal:
            name = o.strip()
            if not name:
                self.rep.error(line, "empty label")
                return None
            if p in self.label_p and self.lang_ok(lang):
                return EntityRecord(s, name, (), line)
            return EntityRecord(s, None, (), line, (name,))  # another language's label, or an altLabel
        if not o:
            self.rep.error(line, "empty literal")
            return None
        if p in self.type_p:
            return EntityRecord(s, None, (o if o_is_literal else local_name(o),), line)
        return TripleRecord(s, local_name(p), o, line)


def _options(
    label_langs: Collection[str] | None,
    label_predicates: Collection[str] | None,
    type_predicates: Collection[str] | None,
    alias_predicates: Collection[str] | None = None,
) -> tuple[Collection[str] | None, Collection[str], Collection[str], Collection[str]]:
    if isinstance(label_langs, str):
        label_langs = (label_langs,)
    lp = (RDFS_LABEL,) if label_predicates is None else tuple(label_predicates)
    tp = (RDF_TYPE,) if type_predicates is None else tuple(type_predicates)
    ap = (SKOS_ALT_LABEL,) if alias_predicates is None else tuple(alias_predicates)
    for name, v in (("label_predicates", lp), ("type_predicates", tp), ("alias_predicates", ap)):
        if isinstance(v, str) or not all(isinstance(x, str) for x in v):
            raise ConfigError(f"{name} must be a collection of IRIs")
    return label_langs, lp, tp, ap


def _scope(path: str | Path) -> str:
    return Path(path).name


# ------------------------------------------------------------------------------------------ N-Triples
_UCHAR = r"\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}"
_IRI = r'<((?:[^\x00-\x20<>"{}|^`\\]|' + _UCHAR + r")*)>"
_PN_START = "A-Za-z0-9_\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02ff\u0370-\u037d\u037f-\u1fff\u200c-\u200d" \
            "\u2070-\u218f\u2c00-\u2fef\u3001-\ud7ff\uf900-\ufdcf\ufdf0-\ufffd\U00010000-\U000effff"
_PN_CHAR = _PN_START + "\\-\u00b7\u0300-\u036f\u203f-\u2040"
_BNODE = "_:([" + _PN_START + "](?:[" + _PN_CHAR + ".]*[" + _PN_CHAR + "])?)"
_LITERAL = r'"((?:[^"\\\n\r]|\\.)*)"(?:@([A-Za-z]+(?:-[A-Za-z0-9]+)*)|\^\^' + _IRI + ")?"
_WS = re.compile(r"[ \t]*")
_RE_IRI = re.compile(_IRI)
_RE_BNODE = re.compile(_BNODE)
_RE_LITERAL = re.compile(_LITERAL)
_RE_END = re.compile(r"[ \t]*\.[ \t]*(?:#.*)?$")
_ESCAPES = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}
_RE_ESC = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))", re.S)


class _NTError(Exception):
    pass


def _unescape(s: str, literal: bool) -> str:
    if "\\" not in s:
        return s

    def sub(m: re.Match[str]) -> str:
        if m.group(1) or m.group(2):
            code = int(m.group(1) or m.group(2), 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise _NTError(f"bad escape \\{'u' if m.group(1) else 'U'}{m.group(1) or m.group(2)}")
            return chr(code)
        c = m.group(3)
        if literal and c in _ESCAPES:
            return _ESCAPES[c]
        raise _NTError(f"bad escape \\{c}")

    return _RE_ESC.sub(sub, s)


def _skip_ws(text: str, pos: int = 0) -> int:
    """The position after the spaces and tabs at ``pos`` (``_WS`` matches the empty string too)."""
    m = _WS.match(text, pos)
    return m.end() if m is not None else pos


def _nt_line(text: str) -> tuple[tuple[str, bool], str, tuple[str, str, str | None]] | None:
    """Tokenize one N-Triples line: ((subject, is_bnode), predicate, (object, kind, lang)) or None if empty.

    kind of the object: ``"iri"``, ``"bnode"`` or ``"literal"``.  Raises _NTError on a syntax error.
    """
    pos = _skip_ws(text)
    if pos == len(text) or text[pos] == "#":
        return None
    m = _RE_IRI.match(text, pos)
    if m:
        subj = (_unescape(m.group(1), False), False)
    else:
        m = _RE_BNODE.match(text, pos)
        if not m:
            raise _NTError(f"expected an IRI or blank node as subject at column {pos + 1}")
        subj = (m.group(1), True)
    pos = _skip_ws(text, m.end())
    m = _RE_IRI.match(text, pos)
    if not m:
        raise _NTError(f"expected an IRI as predicate at column {pos + 1}")
    pred = _unescape(m.group(1), False)
    pos = _skip_ws(text, m.end())
    obj: tuple[str, str, str | None]
    if (m := _RE_IRI.match(text, pos)) is not None:
        obj = (_unescape(m.group(1), False), "iri", None)
    elif (m := _RE_BNODE.match(text, pos)) is not None:
        obj = (m.group(1), "bnode", None)
    elif (m := _RE_LITERAL.match(text, pos)) is not None:
        if m.group(3) is not None:
            _unescape(m.group(3), False)
        obj = (_unescape(m.group(1), True), "literal", m.group(2))
    else:
        raise _NTError(f"expected an IRI, blank node or literal as object at column {pos + 1}")
    if not _RE_END.match(text, m.end()):
        raise _NTError(f"expected '.' at the end of the triple at column {m.end() + 1}")
    return subj, pred, obj


def parse_nt(
    path: str | Path,
    rep: Reporter,
    *,
    label_langs: Collection[str] | None = ("en",),
    label_predicates: Collection[str] | None = None,
    type_predicates: Collection[str] | None = None,
    alias_predicates: Collection[str] | None = None,
) -> Iterator[Record]:
    """N-Triples, streamed line by line with a strict tokenizer (RDF 1.1 N-Triples grammar).

    Blank lines and ``#`` comment lines are skipped; a line that is not one valid triple is malformed.
    Memory is flat in the file size.  ``label_langs=None`` accepts labels in every language.
    """
    mapper = _Mapper(rep, _scope(path), *_options(label_langs, label_predicates, type_predicates, alias_predicates))
    return _nt_records(path, rep, mapper)


def _nt_records(path: str | Path, rep: Reporter, mapper: _Mapper) -> Iterator[Record]:
    for n, text in iter_lines(path, rep):
        try:
            parsed = _nt_line(text)
        except _NTError as exc:
            rep.error(n, f"N-Triples syntax error: {exc}")
            continue
        if parsed is None:
            continue
        (s, s_bnode), p, (o, kind, lang) = parsed
        s_key = mapper.bnode(s) if s_bnode else s
        o_key = mapper.bnode(o) if kind == "bnode" else o
        rec = mapper.record(n, s_key, p, o_key, kind == "literal", lang)
        if rec is not None:
            yield rec


# --------------------------------------------------------------------------------------------- Turtle
_RE_BAD_SYNTAX = re.compile(r"Bad syntax \((.*)\) at \^", re.S)


def parse_ttl(
    path: str | Path,
    rep: Reporter,
    *,
    label_langs: Collection[str] | None = ("en",),
    label_predicates: Collection[str] | None = None,
    type_predicates: Collection[str] | None = None,
    base: str | None = None,
    alias_predicates: Collection[str] | None = None,
) -> Iterator[Record]:
    """Turtle, parsed by rdflib's Turtle parser.

    NOT streamed: the whole file is read and parsed before the first record is yielded (memory grows with
    the file; convert large dumps to N-Triples, which streams).  Statements go straight to a collecting sink,
    not into an rdflib Graph, and each keeps the line where its object list ends (the line of the ``;``, ``.``
    or ``]`` after its last object).  A syntax error stops the parse: with ``strict`` it raises; otherwise the
    records of the statements completed before it are yielded, then the error is reported (the rest of the
    file is lost: rdflib cannot resume).  An undecodable line is reported and the statements
    holding its replaced characters are dropped.  ``base`` resolves relative IRIs (default: none).
    """
    mapper = _Mapper(rep, _scope(path), *_options(label_langs, label_predicates, type_predicates, alias_predicates))
    return _ttl_records(path, rep, mapper, base)


def _ttl_records(path: str | Path, rep: Reporter, mapper: _Mapper, base: str | None) -> Iterator[Record]:
    from rdflib.plugins.parsers.notation3 import BadSyntax, RDFSink, SinkParser
    from rdflib.term import BNode, Literal

    chunks: list[str] = []
    bad_lines = False
    with open_binary(path) as f:
        for n, raw in enumerate(f, 1):
            if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                chunks.append(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                rep.error(n, _decode_reason(raw, exc))
                bad_lines = True
                chunks.append(raw.decode("utf-8", errors="replace"))
    text = "".join(chunks)
    del chunks

    class Sink(RDFSink):
        def __init__(self) -> None:
            super().__init__(None)  # type: ignore[arg-type]
            self.out: list[tuple[Any, Any, Any, int]] = []
            self.parser: Any = None
            self.committed = 0

        def newBlankNode(self, arg: Any = None, uri: Any = None, why: Any = None) -> BNode:  # noqa: N802 - rdflib's method names
            self.counter += 1
            return BNode(f"b{self.counter}")

        def makeStatement(self, quadruple: Any, why: Any = None) -> None:  # noqa: N802 - rdflib's method names
            f, p, s, o = quadruple
            self.out.append((self.normalise(f, s), self.normalise(f, p), self.normalise(f, o),
                             self.parser.lines + 1))

    class Parser(SinkParser):
        def directiveOrStatement(self, argstr: str, h: int) -> int:  # noqa: N802 - rdflib's method names
            j = super().directiveOrStatement(argstr, h)
            sink.committed = len(sink.out)  # the statement ended with its '.': keep its triples
            return j

    sink = Sink()
    parser = Parser(sink, baseURI=base, turtle=True)
    sink.parser = parser
    error: tuple[int, str] | None = None
    try:
        parser.loadBuf(text)
    except BadSyntax as exc:
        m = _RE_BAD_SYNTAX.search(str(exc))
        error = (exc.lines + 1, f"Turtle syntax error: {m.group(1) if m else exc}")
    except Exception as exc:  # noqa: BLE001 - rdflib raises plain errors for a few cases (e.g. a bad IRI)
        error = (parser.lines + 1, f"Turtle syntax error: {exc}")
    del text
    if error is not None:
        if rep.strict:
            rep.error(*error)
        del sink.out[sink.committed:]  # triples of the statement the error is in

    def key(term: Any) -> str:
        if isinstance(term, BNode):
            return mapper.bnode(str(term))
        return str(term)

    for s, p, o, line in sink.out:
        is_lit = isinstance(o, Literal)
        if bad_lines and any("\ufffd" in str(t) for t in (s, p, o)):
            continue
        rec = mapper.record(line, key(s), str(p), key(o), is_lit, o.language if is_lit else None)
        if rec is not None:
            yield rec
    if error is not None:
        rep.error(*error)
