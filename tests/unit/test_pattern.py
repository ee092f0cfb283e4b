"""Tests for engine.retrieval.pattern: construction, structure, LLM-text parsing, validation errors."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine._errors import PatternError, PatternParseError
from engine.retrieval.pattern import (
    PATTERN_JSON_SCHEMA,
    Pattern,
    PatternEdge,
    PatternNode,
    is_unknown_text,
    pattern_json_schema,
    unknown_number,
    unknown_type_hint,
)

FLASHPOINT = [
    ("UNKNOWN actor 1", "actor of", "Flashpoint"),
    ("UNKNOWN actor 1", "actor of", "UNKNOWN film 1"),
]


# ---------------------------------------------------------------------------------------------------------
# Nodes, edges, unknowns
# ---------------------------------------------------------------------------------------------------------


def test_nodes_and_edges_of_flashpoint():
    p = Pattern.from_triples(FLASHPOINT)
    assert list(p.nodes) == ["UNKNOWN actor 1", "Flashpoint", "UNKNOWN film 1"]
    assert p.nodes["Flashpoint"] == PatternNode("Flashpoint", "Flashpoint", None)
    assert p.nodes["Flashpoint"].known
    assert p.nodes["UNKNOWN actor 1"] == PatternNode("UNKNOWN actor 1", None, "actor")
    assert not p.nodes["UNKNOWN film 1"].known
    assert p.edges[1] == PatternEdge(1, "UNKNOWN actor 1", "actor of", "UNKNOWN film 1", "actor of")
    assert all(e.known for e in p.edges)
    assert [e.index for e in p] == [0, 1]
    assert len(p) == 2
    assert p[0].as_triple() == FLASHPOINT[0]
    assert [n.id for n in p.known_nodes] == ["Flashpoint"]
    assert [n.id for n in p.unknown_nodes] == ["UNKNOWN actor 1", "UNKNOWN film 1"]
    assert p.known_relations == ["actor of"]
    assert p.answer_node() == "UNKNOWN film 1"
    assert p.edge_origin == (0, 1)
    assert p.is_connected()
    assert not p.is_all_unknown()
    assert p.has_typed_unknown()


def test_node_identity_is_stripped_text():
    p = Pattern.from_triples([("  Flashpoint ", "directed_by", "X"), ("Flashpoint", "\tyear\n", "1987")])
    assert list(p.nodes) == ["Flashpoint", "X", "1987"]
    assert p.edges[1].label == "year"
    assert p.degree("Flashpoint") == 2


def test_nodes_are_case_sensitive_distinct():
    p = Pattern.from_triples([("flashpoint", "r", "Flashpoint")])
    assert len(p.nodes) == 2


@pytest.mark.parametrize(
    "text, unknown, hint, number",
    [
        ("UNKNOWN film 1", True, "film", 1),
        ("UNKNOWN 2", True, None, 2),
        ("UNKNOWN", True, None, None),
        ("UNKNOWN person 3", True, "person", 3),
        ("UNKNOWN Movie Director 12", True, "movie director", 12),
        ("Unknown Pleasures", False, None, None),
        ("The Unknown", False, None, None),
        ("UNKNOWN relation 1", True, "relation", 1),
        ("UNKNOWN_film_1", True, "film", 1),
        ("UNKNOWN person", True, "person", None),
        ("UNKNOWN actor #2", True, "actor", 2),
        ("the UNKNOWN city 1", True, "city", 1),
        ("UNKNOWNS", False, None, None),
        ("Unknownville", False, None, None),
        ("Flashpoint", False, None, None),
        ("1987", False, None, None),
    ],
)
def test_unknown_detection(text, unknown, hint, number):
    assert is_unknown_text(text) is unknown
    assert unknown_type_hint(text) == hint
    assert unknown_number(text) == number
    node = PatternNode.from_text(text)
    assert node.known is (not unknown)
    assert node.type_hint == hint
    assert node.text == (None if unknown else text)


def test_unknown_relations():
    p = Pattern.from_triples(
        [("A", "UNKNOWN relation 1", "B"), ("B", "the UNKNOWN link", "C"), ("C", "born in", "D")]
    )
    assert [e.known for e in p] == [False, False, True]
    assert p.edges[0].relation is None and p.edges[0].label == "UNKNOWN relation 1"
    assert p.edges[1].relation is None and p.edges[1].label == "the UNKNOWN link"
    assert p.edges[2].relation == "born in"
    assert p.known_relations == ["born in"]


def test_known_relations_are_distinct_in_order():
    p = Pattern.from_triples([("A", "r2", "B"), ("B", "r1", "C"), ("C", "r2", "D"), ("D", "r1", "A")])
    assert p.known_relations == ["r2", "r1"]


def test_all_unknown_and_typed():
    p = Pattern.from_triples([("UNKNOWN 1", "born in", "UNKNOWN 2")])
    assert p.is_all_unknown()
    assert not p.has_typed_unknown()
    assert p.answer_node() == "UNKNOWN 2"
    q = Pattern.from_triples([("UNKNOWN person 1", "UNKNOWN relation 1", "UNKNOWN city 1")])
    assert q.is_all_unknown()
    assert q.has_typed_unknown()
    r = Pattern.from_triples([("Paris", "capital of", "France")])
    assert not r.is_all_unknown()
    assert not r.has_typed_unknown()
    assert r.answer_node() is None


def test_answer_node_highest_number_then_last():
    p = Pattern.from_triples([("UNKNOWN film 2", "r", "X"), ("UNKNOWN person 1", "r", "UNKNOWN film 2")])
    assert p.answer_node() == "UNKNOWN film 2"
    q = Pattern.from_triples([("UNKNOWN a 1", "r", "UNKNOWN b 1"), ("UNKNOWN b 1", "r", "X")])
    assert q.answer_node() == "UNKNOWN b 1"
    r = Pattern.from_triples([("UNKNOWN 1", "r", "UNKNOWN")])
    assert r.answer_node() == "UNKNOWN 1"
    s = Pattern.from_triples([("UNKNOWN", "r", "Y"), ("Y", "s", "UNKNOWN thing")])
    assert s.answer_node() == "UNKNOWN thing"


# ---------------------------------------------------------------------------------------------------------
# Structure: degree, neighbors, cycles, multi-edges, self-loops, components
# ---------------------------------------------------------------------------------------------------------


def test_neighbors_ignore_direction():
    p = Pattern.from_triples([("A", "r", "B"), ("C", "s", "A"), ("B", "t", "C")])
    assert [(e.index, o) for e, o in p.neighbors("A")] == [(0, "B"), (1, "C")]
    assert [(e.index, o) for e, o in p.neighbors("B")] == [(0, "A"), (2, "C")]
    assert p.degree("A") == p.degree("B") == p.degree("C") == 2
    assert p.is_connected()  # a triangle (cycle)
    assert p.components() == [p]


def test_cycle_of_four_with_chord():
    p = Pattern.from_triples(
        [("A", "r", "B"), ("B", "r", "C"), ("C", "r", "D"), ("D", "r", "A"), ("A", "s", "C")]
    )
    assert p.degree("A") == 3 and p.degree("C") == 3 and p.degree("B") == 2
    assert p.is_connected()


def test_multi_edges():
    p = Pattern.from_triples([("A", "directed", "B"), ("A", "wrote", "B"), ("B", "starring", "A")])
    assert len(p.nodes) == 2
    assert p.degree("A") == 3
    assert [(e.label, o) for e, o in p.neighbors("B")] == [
        ("directed", "A"),
        ("wrote", "A"),
        ("starring", "A"),
    ]


def test_self_loop_listed_once():
    p = Pattern.from_triples([("A", "cites", "A"), ("A", "r", "B")])
    assert p.edges[0].is_self_loop
    assert [(e.index, o) for e, o in p.neighbors("A")] == [(0, "A"), (1, "B")]
    assert p.degree("A") == 2
    assert p.degree("B") == 1
    assert p.is_connected()


def test_self_loop_alone_is_a_component():
    p = Pattern.from_triples([("A", "r", "B"), ("C", "self", "C")])
    comps = p.components()
    assert [c.triples for c in comps] == [(("A", "r", "B"),), (("C", "self", "C"),)]
    assert [c.edge_origin for c in comps] == [(0,), (1,)]


def test_unknown_node_raises_keyerror():
    p = Pattern.from_triples(FLASHPOINT)
    with pytest.raises(KeyError, match="Nope"):
        p.neighbors("Nope")
    with pytest.raises(KeyError):
        p.degree("Nope")


def test_components_of_disconnected_pattern():
    p = Pattern.from_triples(
        [
            ("A", "r1", "B"),
            ("X", "s1", "Y"),
            ("B", "r2", "C"),
            ("UNKNOWN 1", "t", "Z"),
            ("Y", "s2", "X"),
            ("C", "r3", "A"),
        ]
    )
    assert not p.is_connected()
    comps = p.components()
    assert len(comps) == 3
    first, second, third = comps
    assert first.triples == (("A", "r1", "B"), ("B", "r2", "C"), ("C", "r3", "A"))
    assert first.edge_origin == (0, 2, 5)
    assert [e.index for e in first] == [0, 1, 2]
    assert list(first.nodes) == ["A", "B", "C"]
    assert second.triples == (("X", "s1", "Y"), ("Y", "s2", "X"))
    assert second.edge_origin == (1, 4)
    assert third.edge_origin == (3,)
    assert third.answer_node() == "UNKNOWN 1"
    assert third.is_all_unknown() is False
    assert all(c.is_connected() for c in comps)
    # node objects are the same values as in the original
    assert first.nodes["A"] == p.nodes["A"]
    # components of a component point at the original pattern's indices
    assert second.components()[0].edge_origin == (1, 4)
    # every original edge is in exactly one component
    assert sorted(i for c in comps for i in c.edge_origin) == list(range(len(p)))
    for c in comps:
        for e in c:
            assert p.edges[c.edge_origin[e.index]].as_triple() == e.as_triple()


def test_deduplicated():
    p = Pattern.from_triples([("A", "r", "B"), ("B", "s", "C"), ("A", "r", "B")])
    assert len(p) == 3
    d = p.deduplicated()
    assert d.triples == (("A", "r", "B"), ("B", "s", "C"))
    assert d.edge_origin == (0, 1)
    q = Pattern.from_triples(FLASHPOINT)
    assert q.deduplicated() is q


# ---------------------------------------------------------------------------------------------------------
# Equality, hashing, repr, JSON round trip
# ---------------------------------------------------------------------------------------------------------


def test_eq_hash_repr():
    p = Pattern.from_triples(FLASHPOINT)
    q = Pattern.from_triples([list(t) for t in FLASHPOINT])
    assert p == q and hash(p) == hash(q)
    assert p != Pattern.from_triples(FLASHPOINT[::-1])
    assert p != "not a pattern"
    assert len({p, q}) == 1
    r = repr(p)
    assert r.startswith("Pattern[") and "Flashpoint" in r
    big = Pattern.from_triples([(f"N{i}", "r", f"N{i + 1}") for i in range(10)])
    assert "+6 more" in repr(big)
    assert len(repr(Pattern.from_triples([("x" * 500, "r", "y")]))) < 150


def test_immutable():
    p = Pattern.from_triples(FLASHPOINT)
    with pytest.raises(TypeError):
        p.nodes["new"] = PatternNode("new", "new", None)  # type: ignore[index]
    with pytest.raises(AttributeError):
        p.edges[0].head = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        p.foo = 1  # type: ignore[attr-defined]


def test_to_json_from_json_round_trip():
    p = Pattern.from_triples(FLASHPOINT)
    obj = p.to_json()
    assert obj == {"triples": [list(t) for t in FLASHPOINT]}
    assert Pattern.from_json(obj) == p
    assert Pattern.from_json(json.dumps(obj)) == p
    assert Pattern.from_json(json.dumps(obj).encode()) == p


def test_from_json_graph_key_and_extra_keys():
    obj = {"divided": ["x"], "graph": [["A", "r", "B"]]}
    assert Pattern.from_json(obj).triples == (("A", "r", "B"),)
    assert Pattern.from_json({"Triples": [["A", "r", "B"]]}).triples == (("A", "r", "B"),)
    # "triples" wins over "graph"
    both = {"graph": [["X", "y", "Z"]], "triples": [["A", "r", "B"]]}
    assert Pattern.from_json(both).triples == (("A", "r", "B"),)


def test_from_json_is_strict():
    with pytest.raises(PatternParseError, match="not valid") as ei:
        Pattern.from_json("{'triples': [('A', 'r', 'B')]}")
    assert ei.value.text == "{'triples': [('A', 'r', 'B')]}"
    with pytest.raises(PatternParseError, match="no 'triples' or 'graph' key"):
        Pattern.from_json('{"edges": []}')
    with pytest.raises(PatternError, match="no 'triples' or 'graph' key"):
        Pattern.from_json({"edges": []})
    with pytest.raises(PatternError, match="must be an object"):
        Pattern.from_json("[]")
    with pytest.raises(PatternParseError, match="triple 1: expected"):
        Pattern.from_json('{"triples": [["A", "r"]]}')


# ---------------------------------------------------------------------------------------------------------
# Validation errors
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "triples, message",
    [
        ([], "pattern is empty: no triples"),
        ((), "pattern is empty"),
        ([("A", "r", "B"), ("A", "r")], "triple 2: expected [head, relation, tail], got 2 items"),
        ([("A", "r", "B", "C")], "triple 1: expected [head, relation, tail], got 4 items"),
        ([("A", "r", "B"), "A r B"], "triple 2: expected [head, relation, tail], got str 'A r B'"),
        ([{"h": "A"}], "triple 1: expected [head, relation, tail], got dict"),
        ([None], "triple 1: expected [head, relation, tail], got NoneType None"),
        ([("Titanic", "year", 1997)], "triple 1: tail must be a string, got int 1997"),
        ([(None, "r", "B")], "triple 1: head must be a string, got NoneType None"),
        ([("A", b"r", "B")], "triple 1: relation must be a string, got bytes"),
        ([("A", "r", "B"), ("", "r", "B")], "triple 2: head is empty"),
        ([("A", "   ", "B")], "triple 1: relation is empty"),
        ([("A", "r", "\n\t")], "triple 1: tail is empty"),
        ("A r B", "triples must be a list of [head, relation, tail], got str"),
        ({"triples": []}, "triples must be a list"),
        (None, "triples must be a list"),
        ([(f"N{i}", "r", f"N{i + 1}") for i in range(17)], "pattern has 17 triples, more than max_edges=16"),
    ],
)
def test_validation_errors(triples, message):
    with pytest.raises(PatternError) as ei:
        Pattern.from_triples(triples)
    assert message in str(ei.value)
    assert not isinstance(ei.value, PatternParseError)


def test_max_edges_configurable():
    chain = [(f"N{i}", "r", f"N{i + 1}") for i in range(5)]
    assert len(Pattern.from_triples(chain, max_edges=5)) == 5
    with pytest.raises(PatternError, match="more than max_edges=4"):
        Pattern.from_triples(chain, max_edges=4)
    with pytest.raises(PatternError, match="more than 4"):
        Pattern.from_triples(iter(chain), max_edges=4)
    with pytest.raises(PatternParseError, match="more than max_edges=1"):
        Pattern.parse(json.dumps({"triples": chain}), max_edges=1)
    with pytest.raises(ValueError):
        Pattern.from_triples(chain, max_edges=0)
    assert len(Pattern.from_triples([(f"N{i}", "r", f"N{i + 1}") for i in range(16)])) == 16


def test_generator_input():
    p = Pattern.from_triples(t for t in FLASHPOINT)
    assert p == Pattern.from_triples(FLASHPOINT)


# ---------------------------------------------------------------------------------------------------------
# Parsing LLM text
# ---------------------------------------------------------------------------------------------------------

SIMGRAG_OUTPUT = """{
"divided": [ "the actor in Flashpoint", "this actor also appears in another films", ],
"triples": [ ("UNKNOWN actor 1", "actor of", "Flashpoint"), ("UNKNOWN actor 1", "actor of", "UNKNOWN film 1"), ]
}"""

PARSE_VARIANTS = [
    pytest.param(json.dumps({"triples": FLASHPOINT}), id="plain-json"),
    pytest.param(json.dumps({"triples": FLASHPOINT}, indent=2), id="indented-json"),
    pytest.param(SIMGRAG_OUTPUT, id="simgrag-paper-format"),
    pytest.param(SIMGRAG_OUTPUT.replace('"triples"', '"graph"'), id="graph-key"),
    pytest.param("```json\n" + json.dumps({"triples": FLASHPOINT}) + "\n```", id="json-fence"),
    pytest.param("```\n" + SIMGRAG_OUTPUT + "\n```", id="bare-fence-tuples"),
    pytest.param(
        "Here is the extracted knowledge graph structure:\n" + SIMGRAG_OUTPUT + "\nI hope this helps!",
        id="prose-before-after",
    ),
    pytest.param(
        "Sure {happy to help}! ```python\n" + SIMGRAG_OUTPUT + "\n``` Note: {x} was ambiguous.",
        id="prose-with-braces",
    ),
    pytest.param(
        "{'divided': ['the actor in Flashpoint'], 'triples': [('UNKNOWN actor 1', 'actor of', 'Flashpoint'),"
        " ('UNKNOWN actor 1', 'actor of', 'UNKNOWN film 1'),],}",
        id="single-quotes-trailing-commas",
    ),
    pytest.param(
        '{"triples": [["UNKNOWN actor 1", "actor of", "Flashpoint"], '
        '["UNKNOWN actor 1", "actor of", "UNKNOWN film 1"],], "ok": true, "note": null,}',
        id="json-trailing-commas-and-literals",
    ),
    pytest.param(
        "{\u201ctriples\u201d: [(\u201cUNKNOWN actor 1\u201d, \u201cactor of\u201d, \u201cFlashpoint\u201d), "
        "(\u201cUNKNOWN actor 1\u201d, \u201cactor of\u201d, \u201cUNKNOWN film 1\u201d)]}",
        id="typographic-quotes",
    ),
    pytest.param(
        'output: {"result": {"divided": ["a"], "triples": '
        + json.dumps(FLASHPOINT)
        + "}}",
        id="nested-object",
    ),
    pytest.param(
        '[("UNKNOWN actor 1", "actor of", "Flashpoint"), ("UNKNOWN actor 1", "actor of", "UNKNOWN film 1")]',
        id="bare-list-of-tuples",
    ),
    pytest.param(
        "{\n  divided: nonsense\n}\n" + SIMGRAG_OUTPUT,
        id="unparseable-object-first-without-key",
    ),
]


@pytest.mark.parametrize("text", PARSE_VARIANTS)
def test_parse_llm_variants(text):
    p = Pattern.parse(text)
    assert p == Pattern.from_triples(FLASHPOINT)
    assert p.answer_node() == "UNKNOWN film 1"


def test_parse_braces_and_quotes_inside_strings():
    triples = [("Ender's Game", "written {by}", 'Orson "Scott" Card'), ("A}", "r]", "{B")]
    for text in (json.dumps({"triples": triples}), repr({"triples": triples}), "Answer: " + repr({"graph": triples})):
        assert Pattern.parse(text).triples == tuple(triples)


def test_parse_does_not_eval():
    text = '{"triples": [(__import__("os").system("echo pwned"), "r", "b")]}'
    with pytest.raises(PatternParseError) as ei:
        Pattern.parse(text)
    assert ei.value.text == text


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "the text is empty"),
        ("   \n", "the text is empty"),
        ("I cannot extract a graph from this query.", "no {...} object with a 'triples' or 'graph' key"),
        ('{"divided": ["a", "b"]}', "no {...} object with a 'triples' or 'graph' key"),
        ('{"triples": [("A", "r", "B")', "no {...} object"),  # unbalanced
        ('{"triples": [(A, r, B)]}', "neither JSON nor a Python literal"),
        ('{"triples": []}', "pattern is empty: no triples"),
        ('{"triples": [("A", "r")]}', "triple 1: expected [head, relation, tail], got 2 items"),
        ('{"graph": [("A", "r", "B"), ("A", "", "B")]}', "triple 2: relation is empty"),
        ('{"triples": [("Titanic", "year", 1997)]}', "triple 1: tail must be a string, got int 1997"),
        ('{"triples": "A r B"}', "triples must be a list of [head, relation, tail], got str"),
        ('{"triples": {"A": "B"}}', "triples must be a list"),
        ("{'x': {'graph_like': 1}}", "has no 'triples' or 'graph' key"),
    ],
)
def test_parse_errors(text, message):
    with pytest.raises(PatternParseError) as ei:
        Pattern.parse(text)
    assert message in str(ei.value)
    assert ei.value.text == text
    assert isinstance(ei.value, PatternError)


def test_parse_non_str():
    with pytest.raises(PatternParseError, match="expected the LLM's text"):
        Pattern.parse(None)  # type: ignore[arg-type]


def test_parse_first_object_with_key_wins():
    text = '{"triples": [["A", "r", "B"]]} and later {"triples": [["C", "s", "D"]]}'
    assert Pattern.parse(text).triples == (("A", "r", "B"),)


def test_parse_skips_a_broken_object_before_a_good_one():
    text = "Draft: {triples: (A, r, B)}\nFinal: " + SIMGRAG_OUTPUT
    assert Pattern.parse(text) == Pattern.from_triples(FLASHPOINT)


@pytest.mark.parametrize(
    "text",
    [
        "{" * 5000 + "triples" + "}" * 10,
        "{" * 20000 + '"triples"' + "}" * 20000,
        '{"triples": ' + "[" * 20000,
        "'triples' {" * 20000,
    ],
)
def test_parse_pathological_text_is_bounded(text):
    with pytest.raises(PatternParseError):
        Pattern.parse(text)


def test_parse_too_long():
    with pytest.raises(PatternParseError, match="too long"):
        Pattern.parse(" " * 1_000_001)


# ---------------------------------------------------------------------------------------------------------
# JSON Schema
# ---------------------------------------------------------------------------------------------------------


def _schema_accepts(schema: dict, obj: object) -> bool:
    """A minimal checker for the keywords the schema uses (no jsonschema dependency)."""
    t = schema.get("type")
    if t == "object":
        if not isinstance(obj, dict):
            return False
        props = schema.get("properties", {})
        if any(k not in obj for k in schema.get("required", [])):
            return False
        if schema.get("additionalProperties") is False and any(k not in props for k in obj):
            return False
        return all(_schema_accepts(props[k], v) for k, v in obj.items() if k in props)
    if t == "array":
        if not isinstance(obj, list):
            return False
        if len(obj) < schema.get("minItems", 0) or len(obj) > schema.get("maxItems", 10**9):
            return False
        return all(_schema_accepts(schema["items"], v) for v in obj)
    if t == "string":
        return isinstance(obj, str) and len(obj) >= schema.get("minLength", 0)
    raise AssertionError(f"unexpected schema {schema}")


def test_json_schema():
    s = PATTERN_JSON_SCHEMA
    assert s["type"] == "object" and s["required"] == ["triples"]
    triple = s["properties"]["triples"]["items"]
    assert triple["minItems"] == triple["maxItems"] == 3
    assert triple["items"]["type"] == "string"
    assert s["properties"]["triples"]["maxItems"] == 16
    json.dumps(s)  # serialisable
    good = Pattern.from_triples(FLASHPOINT).to_json()
    assert _schema_accepts(s, good)
    assert not _schema_accepts(s, {"triples": []})
    assert not _schema_accepts(s, {"triples": [["A", "r"]]})
    assert not _schema_accepts(s, {"graph": [["A", "r", "B"]]})
    d = pattern_json_schema(4, with_divided=True)
    assert d["required"] == ["divided", "triples"]
    assert list(d["properties"]) == ["divided", "triples"]
    assert d["properties"]["triples"]["maxItems"] == 4
    assert _schema_accepts(d, {"divided": ["x"], **good})


# ---------------------------------------------------------------------------------------------------------
# Property-based round trips
# ---------------------------------------------------------------------------------------------------------

_known_text = st.text(min_size=1, max_size=20).filter(lambda s: s.strip() and not is_unknown_text(s))
_unknown_text = st.builds(
    lambda kind, n: f"UNKNOWN {kind} {n}".replace("  ", " "),
    st.sampled_from(["", "actor", "film", "person", "relation", "movie director"]),
    st.integers(min_value=1, max_value=5),
)
_node_text = st.one_of(_known_text, _unknown_text)
_rel_text = st.one_of(_known_text, st.sampled_from(["UNKNOWN relation 1", "UNKNOWN relation 2"]))


@st.composite
def patterns(draw):
    pool = draw(st.lists(_node_text, min_size=1, max_size=6))
    n_edges = draw(st.integers(min_value=1, max_value=16))
    triples = [
        (draw(st.sampled_from(pool)), draw(_rel_text), draw(st.sampled_from(pool))) for _ in range(n_edges)
    ]
    return Pattern.from_triples(triples)


@settings(max_examples=200, deadline=None)
@given(patterns())
def test_property_json_round_trip(p):
    assert Pattern.from_json(p.to_json()) == p
    assert Pattern.from_json(json.dumps(p.to_json())) == p
    assert Pattern.parse(json.dumps(p.to_json())) == p
    assert Pattern.parse(json.dumps(p.to_json(), ensure_ascii=False, indent=1)) == p
    as_tuples = {"divided": ["x"], "triples": [tuple(t) for t in p.triples]}
    assert Pattern.parse("Output:\n```\n" + repr(as_tuples) + "\n```\n") == p
    assert Pattern.from_json({"graph": p.to_json()["triples"]}) == p


@settings(max_examples=200, deadline=None)
@given(patterns())
def test_property_structure(p):
    # nodes are exactly the edge ends, in order of first appearance
    ends = []
    for e in p:
        ends += [e.head, e.tail]
    assert list(p.nodes) == list(dict.fromkeys(ends))
    # degree == number of incident edges; neighbors consistent
    for node_id in p.nodes:
        nb = p.neighbors(node_id)
        assert p.degree(node_id) == len(nb) == sum(1 for e in p if node_id in (e.head, e.tail))
        for e, other in nb:
            assert {e.head, e.tail} == {node_id, other}
    # components partition the edges, are connected, share no node, and map back
    comps = p.components()
    assert sorted(i for c in comps for i in c.edge_origin) == list(range(len(p)))
    seen_nodes: set[str] = set()
    for c in comps:
        assert c.is_connected()
        assert not (set(c.nodes) & seen_nodes)
        seen_nodes |= set(c.nodes)
        for e in c:
            assert p.edges[c.edge_origin[e.index]].as_triple() == e.as_triple()
    assert seen_nodes == set(p.nodes)
    assert p.is_connected() == (len(comps) == 1)
    # unknown bookkeeping
    assert len(p.known_nodes) + len(p.unknown_nodes) == len(p.nodes)
    assert p.is_all_unknown() == (not p.known_nodes)
    a = p.answer_node()
    assert (a is None) == (not p.unknown_nodes)
    if a is not None:
        assert not p.nodes[a].known
    assert hash(p) == hash(Pattern.from_triples(p.triples))
