"""Unit tests of the source-format parsers (no database)."""

from __future__ import annotations

import bz2
import gzip
import itertools
import json
import tracemalloc
from pathlib import Path

import pytest

from engine._errors import ConfigError, InputError, MalformedInputError
from loaders import FORMATS, EntityRecord, SkipLog, TripleRecord, detect_format, local_name, open_source

from helpers import ROOT

METAQA_KB = ROOT.parent / "shared" / "data" / "metaqa" / "kb.txt"
if not METAQA_KB.is_file():
    METAQA_KB = Path("/work/shared/data/metaqa/kb.txt")


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, str):
        text = text.encode("utf-8")
    p.write_bytes(text)
    return p


def parse(path: Path, fmt: str | None = None, **options: object) -> tuple[list, SkipLog]:
    skips = SkipLog()
    return list(open_source(path, fmt, on_skip=skips, **options)), skips


def triples(records: list) -> list[tuple[str, str, str, int]]:
    return [(r.head, r.relation, r.tail, r.line) for r in records if isinstance(r, TripleRecord)]


def skipped_lines(skips: SkipLog) -> list[int]:
    return [e.line for e in skips.errors]


# ------------------------------------------------------------------------------------------------- hrt
def test_hrt_basic_blank_comment_whitespace_bom(tmp_path: Path) -> None:
    p = write(tmp_path, "kb.txt", "\ufeffKismet|directed_by|William Dieterle\n"
                                  "\n"
                                  "# a comment\n"
                                  "   \n"
                                  " Kismet | has_genre |Drama \r\n"
                                  "Kismet|release_year|1944")
    recs, skips = parse(p)
    assert triples(recs) == [("Kismet", "directed_by", "William Dieterle", 1),
                             ("Kismet", "has_genre", "Drama", 5),
                             ("Kismet", "release_year", "1944", 6)]
    assert not skips


def test_hrt_malformed_lines_non_strict(tmp_path: Path) -> None:
    p = write(tmp_path, "kb.txt", "a|r|b\n"
                                  "only|two\n"
                                  "a||b\n"
                                  " |r|b\n"
                                  "a|x|b|c\n"
                                  "c|r|d\n")
    recs, skips = parse(p)
    assert triples(recs) == [("a", "r", "b", 1), ("c", "r", "d", 6)]
    assert skipped_lines(skips) == [2, 3, 4, 5]
    assert skips.by_reason == {"wrong field count": 2, "empty field": 2}
    assert skips.messages[0] == f"{p}:2: wrong field count: expected 3 '|'-separated fields, got 2"
    assert "relation" in skips.errors[1].reason and "head" in skips.errors[2].reason


def test_hrt_strict_raises_at_first_error(tmp_path: Path) -> None:
    p = write(tmp_path, "kb.txt", "a|r|b\n\nx|y\nalso|bad\n")
    it = open_source(p, strict=True)
    assert next(it) == TripleRecord("a", "r", "b", 1)
    with pytest.raises(MalformedInputError) as exc:
        next(it)
    assert exc.value.line == 3 and exc.value.path == str(p)
    assert str(exc.value).startswith(f"{p}:3: wrong field count")


def test_hrt_undecodable_bytes_reported_on_their_line(tmp_path: Path) -> None:
    p = write(tmp_path, "kb.txt", b"a|r|b\nbad\xff|r|b\nc|r|d\n")
    recs, skips = parse(p)
    assert triples(recs) == [("a", "r", "b", 1), ("c", "r", "d", 3)]
    assert skipped_lines(skips) == [2]
    assert skips.errors[0].reason.startswith("not valid UTF-8: byte 0xff at column 4")
    with pytest.raises(MalformedInputError, match=":2: not valid UTF-8"):
        list(open_source(p, strict=True))


def test_hrt_hash_names_are_not_comments(tmp_path: Path) -> None:
    p = write(tmp_path, "kb.txt", "#Horror|directed_by|Tara Subkoff\n# x|y|z\n#### notes\n#\n")
    recs, skips = parse(p)
    assert triples(recs) == [("#Horror", "directed_by", "Tara Subkoff", 1)]
    assert not skips
    recs, _ = parse(p, comment=None)
    assert len(triples(recs)) == 2  # '# x|y|z' is then a triple; '#### notes' and '#' are bad lines


def test_hrt_names_containing_the_delimiter(tmp_path: Path) -> None:
    p = write(tmp_path, "kb.txt", "M1|directed_by|D1\n"
                                  "Love|Hate|directed_by|D2\n"  # head contains '|'
                                  "M3|starred_actors|A|B\n"  # tail contains '|'
                                  "X|directed_by|Y|directed_by|Z\n")  # ambiguous
    recs, skips = parse(p)
    assert triples(recs) == [("M1", "directed_by", "D1", 1), ("Love|Hate", "directed_by", "D2", 2)]
    assert skipped_lines(skips) == [3, 4]  # starred_actors not seen yet on a good line; line 4 ambiguous
    recs, skips = parse(p, relations={"directed_by", "starred_actors"})
    assert triples(recs)[2] == ("M3", "starred_actors", "A|B", 3)
    assert skipped_lines(skips) == [4]
    assert "cannot be told apart" in skips.errors[0].reason


def test_hrt_real_metaqa_first_1000_lines(tmp_path: Path) -> None:
    if not METAQA_KB.is_file():
        pytest.skip(f"{METAQA_KB} not available")
    with open(METAQA_KB, "rb") as f:
        head = b"".join(itertools.islice(f, 1000))
    p = write(tmp_path, "kb.txt", head)
    assert detect_format(p) == "hrt"
    recs = list(open_source(p, strict=True))
    assert len(recs) == 1000
    assert all(isinstance(r, TripleRecord) for r in recs)
    assert [r.line for r in recs] == list(range(1, 1001))
    first = head.decode("utf-8").splitlines()[0].split("|")
    assert (recs[0].head, recs[0].relation, recs[0].tail) == tuple(first)
    assert {r.relation for r in recs} <= {"directed_by", "written_by", "starred_actors", "release_year",
                                          "in_language", "has_tags", "has_genre", "has_imdb_votes",
                                          "has_imdb_rating"}


def test_hrt_compressed(tmp_path: Path) -> None:
    data = b"a|r|b\nc|r|d\n"
    for name, blob in (("kb.txt.gz", gzip.compress(data)), ("kb.txt.bz2", bz2.compress(data))):
        p = write(tmp_path, name, blob)
        assert detect_format(p) == "hrt"
        assert triples(list(open_source(p, strict=True))) == [("a", "r", "b", 1), ("c", "r", "d", 2)]


# ----------------------------------------------------------------------------------------- tsv / csv
def test_tsv_without_header(tmp_path: Path) -> None:
    p = write(tmp_path, "kb.tsv", "a\tr\tb\n# comment\n\nc\t r2 \td\n")
    recs, skips = parse(p)
    assert triples(recs) == [("a", "r", "b", 1), ("c", "r2", "d", 4)]
    assert not skips


def test_tsv_header_detected_and_mapped_by_name(tmp_path: Path) -> None:
    p = write(tmp_path, "kb.tsv", "subject\tweight\tobject\tpredicate\na\t1\tb\tr\n")
    recs, _ = parse(p)
    assert triples(recs) == [("a", "r", "b", 2)]


def test_csv_named_columns_quoting_and_multiline(tmp_path: Path) -> None:
    p = write(tmp_path, "kb.csv", 'src,rel,dst,extra\n'
                                  '"Smith, John",knows,"Doe, Jane",x\n'
                                  '"multi\nline",r,b,y\n'
                                  'c,r,d,z\n')
    recs, skips = parse(p, head="src", relation="rel", tail="dst")
    assert triples(recs) == [("Smith, John", "knows", "Doe, Jane", 2), ("multi\nline", "r", "b", 3),
                             ("c", "r", "d", 5)]
    assert not skips


def test_csv_positions_and_header_flag(tmp_path: Path) -> None:
    p = write(tmp_path, "kb.csv", "x,a,r,b\ny,c,r2,d\n")
    recs, _ = parse(p, head=1, relation=2, tail=3, header=False)
    assert triples(recs) == [("a", "r", "b", 1), ("c", "r2", "d", 2)]
    recs, _ = parse(p, head=1, relation=2, tail=3, header=True)
    assert triples(recs) == [("c", "r2", "d", 2)]


def test_csv_malformed_rows(tmp_path: Path) -> None:
    p = write(tmp_path, "kb.csv", b'head,relation,tail\n'
                                  b'a,r,b\n'
                                  b'a,r\n'
                                  b'a,r,b,extra\n'
                                  b'a, ,b\n'
                                  b'"bad"x,r,b\n'
                                  b'caf\xe9,r,b\n'
                                  b'ok,r,fine\n')
    recs, skips = parse(p)
    assert triples(recs) == [("a", "r", "b", 2), ("ok", "r", "fine", 8)]
    assert skipped_lines(skips) == [3, 4, 5, 6, 7]
    assert skips.by_reason == {"wrong column count": 2, "empty field": 1, "bad quoting": 1,
                               "not valid UTF-8": 1}
    with pytest.raises(MalformedInputError, match=r"kb\.csv:3: wrong column count"):
        list(open_source(p, strict=True))


def test_csv_named_columns_need_a_header(tmp_path: Path) -> None:
    p = write(tmp_path, "kb.csv", "a,r,b\n")
    with pytest.raises(ConfigError):
        open_source(p, head="h", relation="r", tail="t", header=False)
    with pytest.raises(ConfigError, match="not a header"):
        list(open_source(p, head="h", relation="r", tail="t"))


def test_tsv_quotechar_none_keeps_quotes(tmp_path: Path) -> None:
    p = write(tmp_path, "kb.tsv", '"Weird" Al\tr\tb\n')
    recs, skips = parse(p)
    assert not recs and skips.by_reason == {"bad quoting": 1}
    recs, skips = parse(p, quotechar=None)
    assert triples(recs) == [('"Weird" Al', "r", "b", 1)]


# ------------------------------------------------------------------------------------------------- RDF
NT = """\
# a comment
<http://ex.org/Alice> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex.org/onto#Person> .
<http://ex.org/Alice> <http://www.w3.org/2000/01/rdf-schema#label> "Alicia"@es .
<http://ex.org/Alice> <http://www.w3.org/2000/01/rdf-schema#label> "Alice"@en-GB .

<http://ex.org/Alice> <http://ex.org/prop/born> "1940-11-27"^^<http://www.w3.org/2001/XMLSchema#date> . # c
_:b1 <http://ex.org/onto#knows> <http://ex.org/Bob>.
<http://ex.org/Bob> <http://www.w3.org/2000/01/rdf-schema#label> "Bob" .
<http://ex.org/Bob> <http://ex.org/say> "say \\"hi\\" \\u00e9" .
<http://ex.org/Bob> <http://ex.org/say> "bad \\q escape" .
<http://ex.org/Bob> <http://ex.org/say> "no dot"
<http://ex.org/B ob> <http://ex.org/say> "space in IRI" .
"literal" <http://ex.org/say> <http://ex.org/Bob> .
<http://ex.org/Bob> <http://ex.org/say> "" .
"""


def test_nt_records_and_errors(tmp_path: Path) -> None:
    p = write(tmp_path, "data.nt", NT)
    recs, skips = parse(p)
    assert recs == [
        EntityRecord("http://ex.org/Alice", None, ("Person",), 2),
        EntityRecord("http://ex.org/Alice", None, (), 3, ("Alicia",)),  # a label in another language: an alias
        EntityRecord("http://ex.org/Alice", "Alice", (), 4),
        TripleRecord("http://ex.org/Alice", "born", "1940-11-27", 6),
        TripleRecord("_:data.nt:b1", "knows", "http://ex.org/Bob", 7),
        EntityRecord("http://ex.org/Bob", "Bob", (), 8),
        TripleRecord("http://ex.org/Bob", "say", 'say "hi" é', 9),
    ]
    assert skipped_lines(skips) == [10, 11, 12, 13, 14]
    assert set(skips.by_reason) == {"N-Triples syntax error", "empty literal"}
    with pytest.raises(MalformedInputError, match=r"data\.nt:10: N-Triples syntax error: bad escape"):
        list(open_source(p, strict=True))


def test_nt_all_label_languages(tmp_path: Path) -> None:
    p = write(tmp_path, "data.nt", NT)
    recs, _ = parse(p, label_langs=None)
    names = [r.name for r in recs if isinstance(r, EntityRecord) and r.name]
    assert names == ["Alicia", "Alice", "Bob"]


def test_nt_undecodable_line(tmp_path: Path) -> None:
    p = write(tmp_path, "data.nt", b'<http://a> <http://r> "x\xc3" .\n<http://a> <http://r> "y" .\n')
    recs, skips = parse(p)
    assert triples(recs) == [("http://a", "r", "y", 2)]
    assert skipped_lines(skips) == [1]


TTL = """\
@prefix ex: <http://ex.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .

ex:Alice a ex:Person ;
    rdfs:label "Alice"@en, "Alicia"@es ;
    ex:born "1940-11-27"^^xsd:date ;
    ex:knows [ ex:name "Bob" ] , _:c .
_:c ex:age 42 .
"""


def test_ttl_records(tmp_path: Path) -> None:
    p = write(tmp_path, "data.ttl", TTL)
    recs, skips = parse(p)
    assert not skips
    assert recs == [
        EntityRecord("http://ex.org/Alice", None, ("Person",), 5),
        EntityRecord("http://ex.org/Alice", "Alice", (), 6),
        EntityRecord("http://ex.org/Alice", None, (), 6, ("Alicia",)),  # a label in another language: an alias
        TripleRecord("http://ex.org/Alice", "born", "1940-11-27", 7),
        TripleRecord("_:data.ttl:b1", "name", "Bob", 8),
        TripleRecord("http://ex.org/Alice", "knows", "_:data.ttl:b1", 8),
        TripleRecord("http://ex.org/Alice", "knows", "_:data.ttl:b2", 8),
        TripleRecord("_:data.ttl:b2", "age", "42", 9),
    ]
    assert recs == list(open_source(p))  # blank node keys are deterministic


def test_ttl_syntax_error(tmp_path: Path) -> None:
    p = write(tmp_path, "data.ttl", TTL + "ex:Bob ex:p ex:q\nex:Z ex:y ex:w .\n")
    recs, skips = parse(p)
    assert len(recs) == 8  # statements before the bad one; none of the bad one
    assert skipped_lines(skips) == [11]
    assert skips.errors[0].reason.startswith("Turtle syntax error")
    with pytest.raises(MalformedInputError, match=r"data\.ttl:11: Turtle syntax error"):
        list(open_source(p, strict=True))
    p2 = write(tmp_path, "bad2.ttl", "@prefix ex: <http://ex.org/> .\n\nnope:a ex:b ex:c .\n")
    with pytest.raises(MalformedInputError, match=r"bad2\.ttl:3: "):
        list(open_source(p2, strict=True))


def test_local_name() -> None:
    assert local_name("http://ex.org/onto#Person") == "Person"
    assert local_name("http://dbpedia.org/ontology/birthPlace") == "birthPlace"
    assert local_name("http://ex.org/dir/") == "http://ex.org/dir/"


# ----------------------------------------------------------------------------------------------- jsonl
def test_jsonl(tmp_path: Path) -> None:
    lines = [
        json.dumps({"head": "a", "relation": "r", "tail": "b", "extra": 1}),
        "",
        json.dumps({"head": "a", "relation": "year", "tail": 1994}),
        "[1, 2, 3]",
        "{not json",
        json.dumps({"head": "a", "relation": "r"}),
        json.dumps({"head": "a", "relation": "r", "tail": None}),
        json.dumps({"head": " ", "relation": "r", "tail": "b"}),
        json.dumps({"h": "a", "r": "r", "t": "b"}),
        json.dumps({"head": "ü", "relation": "r", "tail": "b"}, ensure_ascii=False),
    ]
    p = write(tmp_path, "kb.jsonl", "\n".join(lines) + "\n")
    recs, skips = parse(p)
    assert triples(recs) == [("a", "r", "b", 1), ("a", "year", "1994", 3), ("ü", "r", "b", 10)]
    assert skipped_lines(skips) == [4, 5, 6, 7, 8, 9]
    assert set(skips.by_reason) == {"not a JSON object", "invalid JSON", "missing key", "not a string",
                                    "empty field"}
    with pytest.raises(MalformedInputError, match=r"kb\.jsonl:4: not a JSON object"):
        list(open_source(p, strict=True))


# ---------------------------------------------------------------------------------------------- tables
def make_tables(tmp_path: Path, nodes: str, edges: str) -> Path:
    d = tmp_path / "export"
    write(d, "nodes.csv", nodes)
    write(d, "edges.csv", edges)
    return d


def test_tables(tmp_path: Path) -> None:
    d = make_tables(tmp_path,
                    "id,name,types\n"
                    "p1,Ada Lovelace,Person;Scientist\n"
                    "c1,\"Analytical Engines, Ltd\",\n"
                    "p1,Duplicate,Person\n"
                    "p2,,Person\n"
                    "p3,Charles Babbage\n",
                    "source,relation,target\n"
                    "p1,works_for,c1\n"
                    "p1,knows,p9\n"
                    "p1,,c1\n"
                    "c1,founded_by,p1\n")
    assert detect_format(d) == "tables"
    recs, skips = parse(d)
    assert recs == [
        EntityRecord("p1", "Ada Lovelace", ("Person", "Scientist"), 2),
        EntityRecord("c1", "Analytical Engines, Ltd", (), 3),
        TripleRecord("p1", "works_for", "c1", 2),
        TripleRecord("c1", "founded_by", "p1", 5),
    ]
    errs = [(Path(e.path).name, e.line, e.reason.split(":")[0]) for e in skips.errors]
    assert errs == [("nodes.csv", 4, "duplicate node id"), ("nodes.csv", 5, "empty field"),
                    ("nodes.csv", 6, "wrong column count"), ("edges.csv", 3, "unknown node id"),
                    ("edges.csv", 4, "empty field")]
    with pytest.raises(MalformedInputError, match=r"nodes\.csv:4: duplicate node id"):
        list(open_source(d, strict=True))


def test_tables_explicit_paths_and_type_column(tmp_path: Path) -> None:
    n = write(tmp_path, "people.csv", "id,name,type\n1,Ann,Person\n2,Bob,Person\n")
    e = write(tmp_path, "rels.csv", "source,relation,target\n1,knows,2\n")
    recs = list(open_source(None, "tables", nodes=n, edges=e, strict=True))
    assert recs == [EntityRecord("1", "Ann", ("Person",), 2), EntityRecord("2", "Bob", ("Person",), 3),
                    TripleRecord("1", "knows", "2", 2)]
    recs2 = list(open_source(None, nodes=n, edges=e, strict=True))
    assert recs2 == recs


def test_tables_nodes_file_finds_edges(tmp_path: Path) -> None:
    d = make_tables(tmp_path, "id,name\n1,A\n", "source,relation,target\n1,self,1\n")
    assert detect_format(d / "nodes.csv") == "tables"
    assert triples(list(open_source(d / "nodes.csv", strict=True))) == [("1", "self", "1", 2)]


def test_tables_bad_headers(tmp_path: Path) -> None:
    d = make_tables(tmp_path, "key_x,title_x\n1,A\n", "source,relation,target\n")
    with pytest.raises(ConfigError, match="id and name"):
        list(open_source(d))


# ---------------------------------------------------------------------------------- detection / API
def test_detect_format(tmp_path: Path) -> None:
    assert detect_format(write(tmp_path, "a.txt", "# c\nx|r|y\n")) == "hrt"
    assert detect_format(write(tmp_path, "b.txt", "x\tr\ty\n")) == "tsv"
    assert detect_format(write(tmp_path, "c.tsv", "")) == "tsv"
    assert detect_format(write(tmp_path, "d.csv", "")) == "csv"
    assert detect_format(write(tmp_path, "e.nt", "")) == "nt"
    assert detect_format(write(tmp_path, "f.ttl", "")) == "ttl"
    assert detect_format(write(tmp_path, "g.jsonl", "")) == "jsonl"
    assert detect_format(write(tmp_path, "h.ndjson", "")) == "jsonl"
    assert detect_format(write(tmp_path, "i.nt.gz", gzip.compress(b""))) == "nt"
    assert detect_format(write(tmp_path, "noext", '{"head": 1}\n')) == "jsonl"
    assert detect_format(write(tmp_path, "noext2", "<http://a> <http://b> <http://c> .\n")) == "nt"
    assert detect_format(write(tmp_path, "noext3", "@prefix ex: <http://ex.org/> .\n")) == "ttl"
    with pytest.raises(ConfigError, match="known formats: hrt"):
        detect_format(write(tmp_path, "j.xml", "<rdf/>"))
    with pytest.raises(ConfigError, match="known formats"):
        detect_format(tmp_path / "j.xml" if False else write(tmp_path, "k.txt", "no delimiter here\n"))
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    with pytest.raises(ConfigError, match="nodes.csv"):
        detect_format(empty_dir)
    with pytest.raises(InputError):
        detect_format(tmp_path / "missing.txt")


def test_open_source_checks_options_eagerly(tmp_path: Path) -> None:
    p = write(tmp_path, "kb.txt", "a|r|b\n")
    with pytest.raises(ConfigError, match="unknown format"):
        open_source(p, "xml")
    with pytest.raises(ConfigError, match="unknown option"):
        open_source(p, "hrt", head=0)
    with pytest.raises(ConfigError, match="unknown option"):
        open_source(p, "jsonl", delimiter=",")
    with pytest.raises(InputError):
        open_source(tmp_path / "missing.txt", "hrt")
    assert FORMATS == ("hrt", "tsv", "csv", "nt", "ttl", "jsonl", "tables")


def test_no_on_skip_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    p = write(tmp_path, "kb.txt", "a|r|b\n" + "bad\n" * 15)
    with caplog.at_level("WARNING", logger="isorag.loaders"):
        assert len(list(open_source(p))) == 1
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 11 and "15 malformed lines skipped" in msgs[-1]


def test_skiplog_summary() -> None:
    log = SkipLog(keep=2)
    for i in range(3):
        log(MalformedInputError("f.txt", i + 1, "wrong field count: expected 3"))
    log(MalformedInputError("f.txt", 9, "empty field: head"))
    assert len(log) == 4 and log.by_reason == {"wrong field count": 3, "empty field": 1}
    assert log.messages == ["f.txt:1: wrong field count: expected 3", "f.txt:2: wrong field count: expected 3"]
    assert "and 2 more" in log.summary()
    assert SkipLog().summary() == "no lines skipped"


# --------------------------------------------------------------------------------------------- memory
def _peak_while_parsing(path: Path, fmt: str) -> tuple[int, int]:
    tracemalloc.start()
    try:
        n = sum(1 for _ in open_source(path, fmt, strict=True))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return n, peak


@pytest.mark.parametrize(("fmt", "n"), [("hrt", 200_000), ("tsv", 50_000), ("nt", 30_000), ("jsonl", 30_000)])
def test_memory_flat(tmp_path: Path, fmt: str, n: int) -> None:
    """Peak traced memory while parsing stays a small fraction of the file (tracemalloc is slow: the 200k-line
    file is for the main format, the others use fewer lines)."""
    p = tmp_path / f"big.{fmt}"
    with open(p, "w", encoding="utf-8") as f:
        for i in range(n):
            h, r, t = f"Movie number {i}", f"rel_{i % 9}", f"Person number {i * 7 % 50_021}"
            if fmt == "hrt":
                f.write(f"{h}|{r}|{t}\n")
            elif fmt == "tsv":
                f.write(f"{h}\t{r}\t{t}\n")
            elif fmt == "nt":
                f.write(f'<http://ex.org/m{i}> <http://ex.org/{r}> "{t}" .\n')
            else:
                f.write(json.dumps({"head": h, "relation": r, "tail": t}) + "\n")
    size = p.stat().st_size
    count, peak = _peak_while_parsing(p, fmt)
    assert count == n
    assert peak < min(size / 20, 1_000_000), f"peak {peak} bytes for a {size}-byte file"
