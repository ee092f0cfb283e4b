"""Cypher templates (``cypher/``) and the one function that renders them (:func:`engine._cypher.render`)."""

from __future__ import annotations

import pytest

from engine._cypher import Fragment, direction, identifier, label, rel_type, rel_types, render, variable
from engine.retrieval.statements import expand_statement
from engine._errors import ConfigError, UnknownRelationError

CATALOG = {"a", "b", "we`ird\\"}

# what the matcher sent before its statements became templates: the rendered text must stay byte-identical
CLOSING_OUT = """UNWIND $states AS s
MATCH (h:IsoragEntity {isorag_eid: s.h})-[r:`a`|`b`]->(t:IsoragEntity {isorag_eid: s.t})
WHERE (s.types IS NULL OR type(r) IN s.types)
RETURN s.id AS sid, collect([type(r), startNode(r) = h, t.isorag_eid]) AS hits"""

SPLIT_OUT = """UNWIND $states AS s
MATCH (h:IsoragEntity {isorag_eid: s.h})
WITH s, h, COUNT { (h)--() } AS deg
CALL (s, h, deg) {
  WITH s, h, deg WHERE deg <= $dense
  MATCH (h)-[r:`a`|`b`]->(t:IsoragEntity)
  WHERE (s.types IS NULL OR type(r) IN s.types) AND t.isorag_eid IN $cands
  RETURN collect([type(r), startNode(r) = h, t.isorag_eid]) AS hits
}
RETURN s.id AS sid, deg, hits"""

CAPPED_BOTH = """UNWIND $states AS s
CALL (s) {
  MATCH (h:IsoragEntity {isorag_eid: s.h})-[r]-(t:IsoragEntity)
  WHERE (s.types IS NULL OR type(r) IN s.types)
  WITH type(r) AS type, startNode(r) = h AS out, t.isorag_eid AS t LIMIT $cap
  RETURN collect([type, out, t]) AS hits
}
RETURN s.id AS sid, hits"""

CANDIDATES_IN = """UNWIND $states AS s
MATCH (h:IsoragEntity {isorag_eid: s.h})<-[r:`a`|`b`]-(t:IsoragEntity)
WHERE (s.types IS NULL OR type(r) IN s.types) AND t.isorag_eid IN $cands
RETURN s.id AS sid, collect([type(r), startNode(r) = h, t.isorag_eid]) AS hits"""

PLAIN_OUT_UNTYPED = """UNWIND $states AS s
MATCH (h:IsoragEntity {isorag_eid: s.h})-[r]->(t:IsoragEntity)
WHERE (s.types IS NULL OR type(r) IN s.types)
RETURN s.id AS sid, collect([type(r), startNode(r) = h, t.isorag_eid]) AS hits"""

PLAIN_BOTH_ESCAPED = """UNWIND $states AS s
MATCH (h:IsoragEntity {isorag_eid: s.h})-[r:`we``ird\\u005c`]-(t:IsoragEntity)
WHERE (s.types IS NULL OR type(r) IN s.types)
RETURN s.id AS sid, collect([type(r), startNode(r) = h, t.isorag_eid]) AS hits"""


@pytest.mark.parametrize("types, forward, shape, expected", [
    (["b", "a"], True, {"closes": True}, CLOSING_OUT),
    (["b", "a"], True, {"filter_nodes": True, "split": True}, SPLIT_OUT),
    (None, None, {"capped": True}, CAPPED_BOTH),
    (["a", "b"], False, {"filter_nodes": True}, CANDIDATES_IN),
    (None, True, {}, PLAIN_OUT_UNTYPED),
    (["we`ird\\"], None, {}, PLAIN_BOTH_ESCAPED),
])
def test_matcher_shapes_render_as_before(types, forward, shape, expected):
    assert expand_statement(types, CATALOG, forward, **shape) == expected


def test_matcher_expand_query_picks_the_shapes():
    from engine.retrieval.matcher import CypherExpansions

    m = CypherExpansions.statement
    assert m(["b", "a"], CATALOG, True, True, False, False) == CLOSING_OUT
    assert m(["b", "a"], CATALOG, True, False, True, False, dense=2000) == SPLIT_OUT
    assert m(None, CATALOG, None, False, False, True) == CAPPED_BOTH
    assert m(["a", "b"], CATALOG, False, False, True, False) == CANDIDATES_IN
    assert m(None, CATALOG, True, False, False, False) == PLAIN_OUT_UNTYPED


def test_every_direction_of_every_matcher_shape():
    arrows = {None: ("-[r:`a`]-"), True: "-[r:`a`]->", False: "<-[r:`a`]-"}
    for forward, arrow in arrows.items():
        for shape in ({"closes": True}, {"filter_nodes": True, "split": True}, {"capped": True},
                      {"filter_nodes": True}, {}):
            text = expand_statement(["a"], CATALOG, forward, **shape)
            assert arrow + "(t:IsoragEntity" in text
            assert "{{" not in text and "//" not in text


def test_types_outside_the_catalog_never_reach_the_text():
    with pytest.raises(UnknownRelationError):
        expand_statement(["a", "x]-() DETACH DELETE h //"], CATALOG, True)
    with pytest.raises(UnknownRelationError):
        rel_type("c", CATALOG)


def test_render_takes_only_fragments_and_every_slot():
    slots = {"rel_types": rel_types(["a"], CATALOG), **direction("out")}
    with pytest.raises(TypeError):
        render("match_expand", **{**slots, "rel_types": ":`a`"})  # a plain str is refused
    with pytest.raises(ConfigError):
        render("match_expand", rel_types=slots["rel_types"])  # a slot left empty
    with pytest.raises(ConfigError):
        render("match_expand", **slots, label=label("X"))  # a slot the template does not have
    with pytest.raises(ValueError):
        direction("sideways")
    with pytest.raises(ValueError):
        variable("n) DELETE (", 0)
    assert isinstance(render("match_expand", **slots), Fragment)


def test_a_slot_may_be_called_name():
    """The template's name is positional-only: the drops of isorag 0.1's schema fill a slot called ``name``
    (``render("drop_index", name=...)`` raised a TypeError when the parameter could be given by keyword too)."""
    assert render("drop_index", name=identifier("isorag_entity_name")) == "DROP INDEX `isorag_entity_name` IF EXISTS"
    assert render("drop_constraint", name=identifier("a`b")) == "DROP CONSTRAINT `a``b` IF EXISTS"


def test_render_drops_the_header_comment():
    text = render("stats")
    assert not text.startswith("//") and not text.endswith("\n")


def test_slot_values_are_escaped_identifiers():
    assert rel_types(["b", "a"], CATALOG) == ":`a`|`b`"
    assert rel_types([], CATALOG) == ""
    assert label("My Label`") == ":`My Label```"
    assert direction("in") == {"arrow_in": "<", "arrow_out": ""}


def test_oracle_and_sample_statements_come_from_templates():
    from engine.retrieval.matcher import Candidates
    from engine.retrieval.oracle import oracle_query
    from engine.retrieval.pattern import Pattern
    from engine.evaluation.synth import ANSWER, SEED, GTSample, answer_query

    p = Pattern.from_triples([("Heat", "directed_by", "UNKNOWN person 1"),
                              ("UNKNOWN person 1", "born_in", "UNKNOWN 2")])
    ids = list(p.nodes)
    cands = Candidates({ids[0]: {1: 0.1}, ids[1]: {2: 0.0}, ids[2]: None}, {0: {"a": 0.0, "b": 0.3}, 1: {"c`x": 0.1}},
                       {"a": "a", "b": "b", "c`x": "c"})
    assert oracle_query(p, cands, injective="none", directed=True) == (
        "MATCH (n0:IsoragEntity)-[r0:`a`|`b`]->(n1:IsoragEntity)\n"
        "MATCH (n1:IsoragEntity)-[r1:`c``x`]->(n2:IsoragEntity)\n"
        "WHERE n0.isorag_eid IN $c_n0 AND n1.isorag_eid IN $c_n1\n"
        "WITH *, $d_n0[toString(n0.isorag_eid)] + $d_n1[toString(n1.isorag_eid)] + $d_r0[type(r0)] + $d_r1[type(r1)]"
        " AS gsd\n"
        "RETURN n0.isorag_eid AS n0, n1.isorag_eid AS n1, n2.isorag_eid AS n2, "
        "[startNode(r0).isorag_eid, type(r0), endNode(r0).isorag_eid] AS r0, "
        "[startNode(r1).isorag_eid, type(r1), endNode(r1).isorag_eid] AS r1, gsd\n"
        "ORDER BY gsd ASC\nLIMIT $limit")
    assert oracle_query(p, cands, injective="nodes").startswith(
        "MATCH (n0:IsoragEntity)-[r0:`a`|`b`]-(n1:IsoragEntity), (n1:IsoragEntity)-[r1:`c``x`]-(n2:IsoragEntity)\n"
        "WHERE n0.isorag_eid IN $c_n0 AND n1.isorag_eid IN $c_n1 AND n0 <> n1 AND n0 <> n2 AND n1 <> n2\n")
    s = GTSample("chain", [10, 20, 30], [SEED, "inner", ANSWER], [(0, "a", "a", 1), (1, "c`x", "c", 2)],
                 ["x", "y", "z"])
    assert answer_query(s, [1], [1], {"a", "c`x"}) == (
        "MATCH (n1:IsoragEntity)-[r1:`c``x`]->(n2:IsoragEntity)\n"
        "WHERE n1.isorag_eid = $n1 AND n1 <> n2\n"
        "RETURN n2.isorag_eid AS answer, [[startNode(r1).isorag_eid, type(r1), endNode(r1).isorag_eid]] AS triples\n"
        "LIMIT $limit")
    with pytest.raises(UnknownRelationError):
        answer_query(s, allowed_types={"a"})


def test_every_statement_file_has_a_header_comment():
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "cypher"
    missing = [p.name for p in sorted(folder.glob("*.cypher")) if not p.read_text(encoding="utf-8").startswith("//")]
    assert not missing


#: the properties of isorag's node uniqueness constraints (cypher/schema.cypher), by label
UNIQUE_KEYS = {"IsoragEntity": "isorag_eid", "IsoragRelationType": "rid", "IsoragEntityType": "tid",
               "IsoragKGVersion": "kg", "IsoragAlias": "aid", "IsoragLock": "kg"}


def test_a_statement_that_skips_replanning_starts_every_pattern_at_a_unique_key():
    """``CYPHER replan=skip`` (a cached plan is kept when a load changes the statistics) is only for statements whose
    plan the statistics cannot change: every MATCH or MERGE begins at a node found by a uniqueness constraint's
    key (a seek of one node), and no relationship is walked but from such a node, or by an existence check."""
    import re
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "cypher"
    skipping = {}
    for p in sorted(folder.glob("*.cypher")):
        text = p.read_text(encoding="utf-8")
        if "replan=skip" in text:
            body = "\n".join(line for line in text.splitlines() if not line.startswith("//"))
            assert body.startswith("CYPHER replan=skip\n"), p.name
            skipping[p.name] = body
    assert {"changes_begin.cypher", "changes_set_entities.cypher", "merge_relationships.cypher"} <= set(skipping)
    # walks between two nodes, or an index other than a unique one (whose use the statistics decide): left to the
    # planner
    assert not {"changes_remove_triples.cypher", "changes_sweep.cypher"} & set(skipping)
    clause = re.compile(r"\b(?:OPTIONAL MATCH|MATCH|MERGE)\s+(.*)")
    for name, body in skipping.items():
        for m in clause.finditer(body):
            first = m.group(1)
            node = re.match(r"\((\w*)(?::(\w+))?\s*(\{[^}]*\})?\)", first)
            assert node, (name, first)
            var, lab, props = node.groups()
            if lab is None:  # a node bound before (a seek): MERGE (h)-[...]->(t), MATCH (n)--()
                assert var and re.search(rf"\({var}:\w+ \{{", body), (name, first)
                continue
            assert props and re.search(rf"\b{UNIQUE_KEYS[lab]}:", props), (name, first)
