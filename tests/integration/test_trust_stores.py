"""What the engine may touch in the stores (docs/security.md), on the real Neo4j and Milvus: a user's graph is never
rewritten, identifiers from data can never change a statement. KG names -> collections:
tests/unit/test_trust_stores.py."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from engine._cypher import escape_identifier
from engine._errors import InputError
from engine.stores.vectors import KINDS


# -- identifiers from data ----------------------------------------------------------------------------------------

_TRICKY = ["LIKES`|`HIDDEN", "LIKES\\u0060|\\u0060HIDDEN", "a\\b", "\\", "back\\", "x\\u005cy", "\\\\u0060",
           "new\nline", "quote'\"", "semi;colon", "üñí 字", "}) MATCH (n) DETACH DELETE n //", "`", "``", "\\`"]


def _identifier_text() -> st.SearchStrategy[str]:
    chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
    pieces = st.sampled_from(["`", "\\", "\\u0060", "\\u005c", "u0060", "|", ":", "'", '"', "\n", " ", "HIDDEN"])
    return st.one_of(st.sampled_from(_TRICKY),
                     st.lists(st.one_of(pieces, st.text(chars, min_size=1, max_size=3)), min_size=1, max_size=6)
                     .map("".join))


@given(name=_identifier_text())
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_type_or_label_is_matched_as_itself(neo4j_graph: Any, name: str) -> None:
    """A relationship type or label holding any characters is read back as exactly itself: a quoted name can never
    end early and change the statement (Neo4j unescapes \\u0060 anywhere in a statement, quotes included)."""
    assume(name not in ("HIDDEN", "LIKES"))  # the decoys
    g = neo4j_graph
    probe = f"EscProbe_{uuid.uuid4().hex[:8]}"
    g.write(f"CREATE (a:{probe})-[:$($t)]->(b:{probe}), (a)-[:HIDDEN]->(b), (a)-[:LIKES]->(b), (c:$($t) {{p: $p}})",
            t=name, p=probe)
    try:
        rows = g.read(f"MATCH (:{probe})-[r:{escape_identifier(name)}]->(:{probe}) RETURN type(r) AS t")
        assert [r["t"] for r in rows] == [name]
        rows = g.read(f"MATCH (n:{escape_identifier(name)}) WHERE n.p = $p RETURN labels(n) AS l", p=probe)
        assert [r["l"] for r in rows] == [[name]]
    finally:
        g.write(f"MATCH (n:{probe}) DETACH DELETE n")
        g.write(f"MATCH (n:{escape_identifier(name)}) WHERE n.p = $p DELETE n", p=probe)


@pytest.fixture(scope="module")
def neo4j_graph(neo4j_uri: str) -> Any:
    from engine._config import Neo4jSettings
    from engine.stores.graph import GraphStore

    return GraphStore(Neo4jSettings(uri=neo4j_uri), "escprobe")


# -- adoption and drop never rewrite a user's graph ---------------------------------------------------------------


def _dump(graph: Any, marker: str) -> dict[str, Any]:
    """Every node carrying the test's marker property, every relationship touching one: ids, labels/types, all
    properties, endpoints."""
    nodes = graph.read("MATCH (n) WHERE n.marker = $m RETURN elementId(n) AS id, labels(n) AS labels, "
                       "properties(n) AS props", m=marker)
    rels = graph.read("MATCH (n)-[r]-() WHERE n.marker = $m RETURN DISTINCT elementId(r) AS id, type(r) AS type, "
                      "properties(r) AS props, elementId(startNode(r)) AS s, elementId(endNode(r)) AS e", m=marker)
    return {"nodes": sorted((r["id"], sorted(r["labels"]), sorted(r["props"].items(), key=str)) for r in nodes),
            "rels": sorted((r["id"], r["type"], sorted(r["props"].items(), key=str), r["s"], r["e"]) for r in rels)}


def _user_graph(graph: Any, label: str, marker: str) -> None:
    """A user's own graph: persons (the label adopted) with properties named like isorag's old ones (name, key,
    eid, kg, types), one with the label Entity, one without a usable key; a company outside the KG; relationships
    between persons, to the company, from the company, a user IS_A and relationship properties."""
    graph.write(
        f"CREATE (p1:`{label}`:Entity {{id: 'p1', name: 'Ada Lovelace', key: 'user-key-1', eid: 42, kg: 'users', "
        "types: ['mathematician'], marker: $m}), "
        f"(p2:`{label}` {{id: 'p2', name: 'Charles Babbage', eid: 'own', marker: $m}}), "
        f"(p3:`{label}` {{id: 3, fullname: 'Mary Somerville', marker: $m}}), "
        f"(p4:`{label}` {{id: [1, 2], name: 'Listy', marker: $m}}), "
        "(c:Company {name: 'Analytical Engines Ltd', secret: 's3cr3t', marker: $m}), "
        "(p1)-[:WORKED_WITH {since: 1833, name: 'collab'}]->(p2), (p1)-[:WORKS_AT]->(c), (c)-[:EMPLOYS]->(p2), "
        "(p2)-[:KNOWS]->(p3), (p3)-[:IS_A]->(p1), (p4)-[:KNOWS]->(p1)", m=marker)


def test_adopt_query_drop_leaves_the_user_graph_identical(make_engine: Any, tmp_path: Path) -> None:
    eng = make_engine()
    marker = uuid.uuid4().hex
    label = f"Person_{marker[:8]}"
    _user_graph(eng.graph, label, marker)
    before = _dump(eng.graph, marker)
    try:
        s = eng.load_existing(label, "id", "name", progress=False)
        assert s.entities_created == 3 and s.lines_skipped == 1  # p4's key is a list
        # the user's properties are as they were while adopted
        p1 = eng.graph.read("MATCH (n) WHERE n.marker = $m AND n.id = 'p1' RETURN properties(n) AS p", m=marker)[0]["p"]
        assert (p1["name"], p1["key"], p1["eid"], p1["kg"]) == ("Ada Lovelace", "user-key-1", 42, "users")
        assert p1["isorag_name"] == "Ada Lovelace" and p1["isorag_key"] == "p1"
        st_ = eng.stats()
        assert st_["agree"] and st_["neo4j"]["entities"] == 3 and st_["neo4j"]["triples"] == 3  # not to the company
        res = eng.retrieve({"triples": [["Ada Lovelace", "WORKED_WITH", "UNKNOWN person 1"]]}, k=3)
        assert res.answers[0].entity.name == "Charles Babbage"
        res = eng.retrieve({"triples": [["Ada Lovelace", "works at", "UNKNOWN company 1"]]}, k=3)
        assert all(a.entity.name != "Analytical Engines Ltd" for a in res.answers)  # not a KG node
        # a file loaded into the adopted KG adds isorag's own relationships and nodes next to the user's
        kb = tmp_path / "kb.txt"
        kb.write_text("p1|mentored|3\np1|born in|London\n", encoding="utf-8")
        s2 = eng.load(kb, progress=False)
        assert s2.entities_created == 1 and s2.relationships_created == 2
        res = eng.retrieve({"triples": [["Ada Lovelace", "mentored", "UNKNOWN person 1"]]}, k=1)
        assert res.answers[0].entity.name == "3"  # p3 has no "name": its key names it
        assert _dump(eng.graph, marker) != before
    finally:
        eng.drop()
    after = _dump(eng.graph, marker)
    assert after == before
    assert not eng.graph.read("MATCH (n:IsoragEntity {isorag_kg: $kg}) RETURN n LIMIT 1", kg=eng.kg)
    assert not _collections(eng)  # and its vectors are gone
    eng.graph.write("MATCH (n) WHERE n.marker = $m DETACH DELETE n", m=marker)


def _collections(eng: Any) -> list[str]:
    """The Milvus collections of ``eng``'s KG that exist (looked up without creating any)."""
    from engine.stores.vectors import VectorStore

    with VectorStore(eng.config.milvus.uri, token=eng.config.milvus.token, kg=eng.kg, model=eng.embedder.slug,
                     dim=eng.embedder.dim) as vs:
        return [vs.names[k] for k in KINDS if vs._col(k) is not None]


def test_adoption_refuses_duplicate_keys_and_writes_nothing(make_engine: Any) -> None:
    eng = make_engine()
    marker = uuid.uuid4().hex
    label = f"Dup_{marker[:8]}"
    eng.graph.write(f"CREATE (:`{label}` {{code: 'x1', marker: $m}}), (:`{label}` {{code: 'x1', marker: $m}}), "
                    f"(:`{label}` {{code: 7, marker: $m}}), (:`{label}` {{code: '7', marker: $m}})", m=marker)
    before = _dump(eng.graph, marker)
    try:
        with pytest.raises(InputError, match=r"2 value\(s\) of key property 'code'.*'x1' \(2 nodes\)"):
            eng.load_existing(label, "code", progress=False)
        assert _dump(eng.graph, marker) == before
        assert eng.graph.stats()["entities"] == 0
    finally:
        eng.graph.write("MATCH (n) WHERE n.marker = $m DETACH DELETE n", m=marker)


def test_a_node_belongs_to_one_kg(make_engine: Any) -> None:
    a, b = make_engine(), make_engine()
    marker = uuid.uuid4().hex
    label = f"Shared_{marker[:8]}"
    a.graph.write(f"CREATE (x:`{label}` {{k: 'a', marker: $m}})-[:R]->(:`{label}` {{k: 'b', marker: $m}})", m=marker)
    try:
        a.load_existing(label, "k", progress=False)
        with pytest.raises(InputError, match=re.escape(repr(a.kg))):
            b.load_existing(label, "k", progress=False)
    finally:
        a.drop()
        a.graph.write("MATCH (n) WHERE n.marker = $m DETACH DELETE n", m=marker)


def test_a_type_named_to_inject_matches_only_itself(make_engine: Any) -> None:
    """An adopted graph whose relationship type reads ``LIKES\\u0060|\\u0060HIDDEN``: retrieval through it never
    returns a HIDDEN relationship (with backticks only doubled, Neo4j read it as LIKES|HIDDEN)."""
    eng = make_engine()
    marker = uuid.uuid4().hex
    label = f"Inj_{marker[:8]}"
    weird = "LIKES\\u0060|\\u0060HIDDEN"
    eng.graph.write(f"CREATE (a:`{label}` {{k: 'Alice', marker: $m}}), (b:`{label}` {{k: 'Bob', marker: $m}}), "
                    f"(c:`{label}` {{k: 'Carol', marker: $m}}), (a)-[:$($t)]->(b), (a)-[:HIDDEN]->(c)",
                    m=marker, t=weird)
    try:
        eng.load_existing(label, "k", progress=False)
        assert weird in eng.graph.relation_types()
        res = eng.retrieve({"triples": [["Alice", weird, "UNKNOWN person 1"]]}, k=5, k_rel=1)
        names = [a.entity.name for a in res.answers]
        assert names[0] == "Bob" and "Carol" not in names  # Carol is reached by HIDDEN only
        assert all(t.relation == weird for sg in res.subgraphs for t in sg.triples)
    finally:
        eng.drop()
        eng.graph.write("MATCH (n) WHERE n.marker = $m DETACH DELETE n", m=marker)
