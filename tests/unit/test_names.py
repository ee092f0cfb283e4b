"""Names as people write them, without a server: the compared forms, the spelling distance, the node distance that
enters the GSD, the full-text query, the text linker's spans and nesting, and the loaders' aliases."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.linking.names import (ARTICLE_COST, LUCENE_STOPWORDS, SPELLING_SCALE, fold_name, fulltext_query,
                                  how_matched, node_distance, normalize_name, query_words, spelling_distance,
                                  spelling_distances, strip_article)
from engine.linking.text import MAX_SPANS, Candidate, _nesting, spans
from loaders import open_source
from loaders._model import EntityRecord, TripleRecord

NAMES = st.text(st.characters(codec="utf-8", categories=["L", "N", "Zs", "P", "M"]), min_size=0, max_size=30)


def test_the_forms_names_are_compared_in() -> None:
    assert normalize_name("  Ｋｌｕｔｅ\u00a0 II ") == "klute ii"
    assert fold_name("Amélie") == fold_name("amelie") == "amelie"
    assert fold_name("Hello, Dolly!") == "hello dolly"
    assert fold_name("Straße") == "strasse"
    assert strip_article("the matrix") == "matrix" and strip_article("a beautiful mind") == "beautiful mind"
    assert strip_article("the") == "the" and strip_article("theodora") == "theodora"


@pytest.mark.parametrize("written, name, edits", [
    ("Joe Thoms", "Joe Thomas", 1),      # a letter dropped
    ("Joe Thoomas", "Joe Thomas", 1),    # doubled
    ("Joe Tjomas", "Joe Thomas", 1),     # a neighbour on the keyboard
    ("Joe Thmoas", "Joe Thomas", 1),     # two letters swapped: one edit, not two
    ("Heta", "Heat", 1),
])
def test_one_typo_is_one_edit_of_the_longer_name(written: str, name: str, edits: int) -> None:
    longer = max(len(fold_name(written)), len(fold_name(name)))
    assert spelling_distance(written, name) == pytest.approx(edits / longer)


def test_case_diacritics_punctuation_cost_nothing_and_an_article_little() -> None:
    assert spelling_distance("joe thomas", "Joe Thomas") == 0.0
    assert spelling_distance("Amelie", "Amélie") == 0.0
    assert spelling_distance("Hello Dolly", "Hello, Dolly!") == 0.0
    assert spelling_distance("Matrix", "The Matrix") == pytest.approx(ARTICLE_COST)
    # the name written exactly stays nearer than the same name with an article
    assert spelling_distance("Matrix", "Matrix") < spelling_distance("Matrix", "The Matrix")


@settings(max_examples=300, deadline=None)
@given(a=NAMES, b=NAMES)
def test_spelling_distance_properties(a: str, b: str) -> None:
    d = spelling_distance(a, b)
    assert 0.0 <= d <= 1.0
    assert d == pytest.approx(spelling_distance(b, a))
    if fold_name(a) == fold_name(b):
        assert d == 0.0
    if d == 0.0:
        assert fold_name(a) == fold_name(b) or strip_article(fold_name(a)) == strip_article(fold_name(b))
    assert spelling_distance(a, a) == 0.0


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(NAMES, min_size=1, max_size=4), names=st.lists(NAMES, min_size=1, max_size=5))
def test_the_matrix_form_is_the_pairwise_distance(texts: list[str], names: list[str]) -> None:
    got = spelling_distances(texts, names)
    want = np.array([[spelling_distance(t, n) for n in names] for t in texts])
    assert got.shape == (len(texts), len(names)) and np.allclose(got, want)


@settings(max_examples=200, deadline=None)
@given(emb=st.one_of(st.none(), st.floats(0, 2)), sp=st.one_of(st.none(), st.floats(0, 1)))
def test_node_distance_is_the_smaller_part(emb: float | None, sp: float | None) -> None:
    if emb is None and sp is None:
        with pytest.raises(ValueError):
            node_distance(emb, sp)
        return
    d = node_distance(emb, sp)
    parts = [x for x in (emb, None if sp is None else SPELLING_SCALE * sp) if x is not None]
    assert d == min(parts) and d in parts


def test_how_a_name_matched() -> None:
    assert how_matched("Heat", "Heat", 0.0, 0.0) == "exact"
    assert how_matched("heat", "Heat", 0.0, 0.0) == "normalized"
    assert how_matched("Heta", "Heat", 0.25, 0.9) == "spelling"
    assert how_matched("a film with Pacino", "Heat", 0.9, 0.6) == "meaning"


@settings(max_examples=300, deadline=None)
@given(text=NAMES, kg=st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,8}(_[A-Za-z0-9]{1,5}){0,2}", fullmatch=True))
def test_the_fulltext_query_holds_only_words_of_the_text(text: str, kg: str) -> None:
    q = fulltext_query(text, kg)
    if q is None:
        return
    inner = q.split("isorag_name:(", 1)[1].split(")", 1)[0]
    folded = fold_name(text).split()
    for term in inner.split():
        word = term.removesuffix("~1")
        assert re.fullmatch(r"[^\W_]+(?:'[^\W_]+)*", word), q
        assert word in query_words(text) and all(part in folded for part in word.split("'")), q
    # the KG's field, except for a KG named like a stop word (the analyzer drops it: the caller filters by KG)
    assert (f'isorag_kg:"{kg.lower()}"' in q) == (kg.lower() not in LUCENE_STOPWORDS)


def test_the_fulltext_query_keeps_a_word_as_the_index_does() -> None:
    assert query_words("what does Dave O\u2019Brien star in") == ["what", "does", "dave", "o'brien", "star"]
    q = fulltext_query("Dave O'Brien", "kg")
    # "o'brien" is one word of the index: its parts find nothing of it
    terms = "dave~1 o'brien~1"
    assert q == f'+isorag_kg:"kg" +(isorag_name:({terms}) isorag_aliases:({terms}))'


def test_a_kg_named_like_a_stop_word_is_not_asked_for_by_its_field() -> None:
    assert fulltext_query("0", "AS") == "isorag_name:(0) isorag_aliases:(0)"  # found by hypothesis


def test_a_text_of_stop_words_has_no_fulltext_query() -> None:
    assert fulltext_query("the of a", "kg") is None
    assert fulltext_query("", "kg") is None


def test_spans_are_capped() -> None:
    long = " ".join(f"word{i}" for i in range(20_000))
    got = spans(long)
    assert 0 < len(got) <= MAX_SPANS
    assert spans("who directed Heat")[0][2] == "who directed Heat"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 10)), max_size=25))
def test_nesting_equals_the_quadratic_definition(raw: list[tuple[int, int]]) -> None:
    cands = [Candidate(a, a + n, "x", "x", (1,), 0.0) for a, n in dict.fromkeys(raw)]
    nested, nests = _nesting(cands)
    for i, c in enumerate(cands):
        want_nested = any(o.start <= c.start and c.end <= o.end and (o.start, o.end) != (c.start, c.end)
                          for o in cands)
        want_nests = any(c.start <= o.start and o.end <= c.end and (o.start, o.end) != (c.start, c.end)
                         for o in cands)
        assert nested[i] == want_nested and nests[i] == want_nests, (c, cands)


# ------------------------------------------------------------------------------------------------- loaders
def _entities(records: list[object]) -> dict[str, list[EntityRecord]]:
    out: dict[str, list[EntityRecord]] = {}
    for r in records:
        if isinstance(r, EntityRecord):
            out.setdefault(r.key, []).append(r)
    return out


def test_rdf_labels_in_other_languages_and_alt_labels_are_aliases(tmp_path: Path) -> None:
    ttl = tmp_path / "kg.ttl"
    ttl.write_text("""@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> .
<http://ex.org/ibm> rdfs:label "International Business Machines"@en, "IBM Deutschland"@de ;
    skos:altLabel "IBM", "Big Blue"@en ; <http://ex.org/rel/founded> "1911" .
""", encoding="utf-8")
    recs = list(open_source(ttl))
    ents = _entities(recs)["http://ex.org/ibm"]
    assert [e.name for e in ents if e.name] == ["International Business Machines"]
    assert sorted(a for e in ents for a in e.aliases) == ["Big Blue", "IBM", "IBM Deutschland"]
    nt = tmp_path / "kg.nt"
    nt.write_text('<http://ex.org/a> <http://www.w3.org/2004/02/skos/core#altLabel> "Alpha"@fr .\n'
                  '<http://ex.org/a> <http://www.w3.org/2000/01/rdf-schema#label> "A"@en .\n', encoding="utf-8")
    ents = _entities(list(open_source(nt)))["http://ex.org/a"]
    assert [a for e in ents for a in e.aliases] == ["Alpha"] and [e.name for e in ents if e.name] == ["A"]


def test_an_aliases_column_in_csv_and_in_tables(tmp_path: Path) -> None:
    csv_path = tmp_path / "kg.csv"
    csv_path.write_text("head,relation,tail,aliases\nIBM Corp,founded_in,1911,IBM; Big Blue\nHeat,directed_by,"
                        "Michael Mann,\n", encoding="utf-8")
    recs = list(open_source(csv_path))
    assert [r for r in recs if isinstance(r, TripleRecord)][1].head == "Heat"
    assert _entities(recs)["IBM Corp"][0].aliases == ("IBM", "Big Blue") and "Heat" not in _entities(recs)
    d = tmp_path / "tables"
    d.mkdir()
    (d / "nodes.csv").write_text("id,name,types,aliases\nn1,Heat,film,Heat (1995);HEAT\nn2,Michael Mann,person,\n",
                                 encoding="utf-8")
    (d / "edges.csv").write_text("source,relation,target\nn1,directed_by,n2\n", encoding="utf-8")
    ents = _entities(list(open_source(d)))
    assert ents["n1"][0].aliases == ("Heat (1995)", "HEAT") and ents["n2"][0].aliases == ()


def test_entity_lines_with_aliases_in_json_lines(tmp_path: Path) -> None:
    p = tmp_path / "kg.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in [
        {"head": "Heat", "relation": "directed_by", "tail": "Michael Mann"},
        {"key": "Heat", "name": "Heat", "aliases": ["Heat (1995)"], "types": ["film"]},
        {"id": "Michael Mann", "aliases": "Mann"},
        {"key": "Bad", "aliases": [1, 2]},
    ]) + "\n", encoding="utf-8")
    skipped: list[object] = []
    recs = list(open_source(p, on_skip=skipped.append))
    ents = _entities(recs)
    assert ents["Heat"][0] == EntityRecord("Heat", "Heat", ("film",), 2, ("Heat (1995)",))
    assert ents["Michael Mann"][0].aliases == ("Mann",)
    assert len(skipped) == 1 and "aliases must be a list of strings" in str(skipped[0])


def test_names_no_candidate_covers_are_unknown() -> None:
    from engine.linking.text import unknown_names

    jaws = Candidate(22, 26, "Jaws", "Jaws", (1,), 0.0)
    assert unknown_names("Zorblax Quinmel directed Jaws", [jaws]) == ["Zorblax Quinmel"]
    kismet = Candidate(16, 22, "Kismet", "Kismet", (2,), 0.0)
    assert unknown_names("the director of Kismet is Vextor Ulmgran", [kismet]) == ["Vextor Ulmgran"]
    assert unknown_names("Kismet was released in 2099", [Candidate(0, 6, "Kismet", "Kismet", (2,), 0.0)]) == ["2099"]
    assert unknown_names("Heat was directed by michael mann", [Candidate(0, 4, "Heat", "Heat", (3,), 0.0)]) == []
    assert unknown_names("Who directed it", []) == []  # a sentence's first word alone is no name


def test_a_span_is_no_near_spelling_by_a_stop_word_at_its_edge() -> None:
    from engine.linking.text import _same_edges

    assert not _same_edges("is vincente minnelli", ["vincente minnelli"])
    assert not _same_edges("a comedy", ["the comedy", "comedy"])
    assert _same_edges("the matirx", ["the matrix"]) and _same_edges("matirx", ["the matrix"])


def test_a_near_spelling_is_one_typo_with_the_same_numbers() -> None:
    from engine.linking.text import _near_enough

    assert _near_enough("haet", 0.25, ["heat"])
    assert not _near_enough("ritter act", 0.2, ["sister act"])  # two edits in a short span
    assert _near_enough("jon thomas the elder", 0.1, ["john thomas the elders"])  # two in a long one
    assert not _near_enough("movie 7", 0.25, ["movie 43"])  # another number
