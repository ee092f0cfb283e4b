"""Living KGs on the real Neo4j and Milvus: change sets applied to both stores, their versions, idempotence, the
stores' check and repair, caches that follow the KG's version, and the user's graph left untouched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine._errors import MalformedInputError
from engine.changes.ops import AddTriple, MergeEntity, RemoveEntity, RemoveTriple, SetEntity
from helpers.kg import kg_names, kg_triples

KB = "\n".join([
    "Heat|directed_by|Michael Mann",
    "Heat|starred_actors|Al Pacino",
    "Heat|starred_actors|Robert De Niro",
    "Heat|release_year|1995",
    "Collateral|directed_by|Michael Mann",
    "Collateral|starred_actors|Tom Cruise",
    "Collateral|release_year|2004",
    "Ronin|starred_actors|R. De Niro",
    "Ronin|has_genre|Thriller",
    "Thief|has_genre|Crime",
]) + "\n"


@pytest.fixture
def loaded(make_engine: Any, tmp_path: Path) -> Any:
    eng = make_engine(llm=False)
    kb = tmp_path / "kb.txt"
    kb.write_text(KB, encoding="utf-8")
    eng.load(kb, progress=False)
    return eng


CHANGES = [
    AddTriple("Thief", "directed_by", "Michael Mann"),
    AddTriple("Thief", "release_year", "1981"),
    RemoveTriple("Collateral", "release_year", "2004"),
    SetEntity("Michael Mann", name="Michael K. Mann", description="American director"),
    MergeEntity("R. De Niro", "Robert De Niro"),
    RemoveEntity("Thriller"),
    RemoveTriple("Heat", "directed_by", "Nobody"),
    AddTriple("R. De Niro", "starred_actors", "Heat"),  # the merged key resolves to its target
]


def test_a_change_set_changes_both_stores_exactly(loaded: Any) -> None:
    eng = loaded
    before = eng.version()
    rep = eng.apply(CHANGES, progress=False)
    assert (rep.added, rep.removed, rep.entities_set, rep.merged, rep.entities_removed) == (3, 1, 1, 1, 1)
    assert rep.skipped == 1 and "('Heat', 'directed_by', 'Nobody') is not in KG" in rep.skip_examples[0]
    assert rep.version == before["seq"] + 1 and rep.version_at
    assert set(kg_triples(eng)) == {
        ("Heat", "directed_by", "Michael Mann"), ("Heat", "starred_actors", "Al Pacino"),
        ("Heat", "starred_actors", "Robert De Niro"), ("Heat", "release_year", "1995"),
        ("Collateral", "directed_by", "Michael Mann"), ("Collateral", "starred_actors", "Tom Cruise"),
        ("Ronin", "starred_actors", "Robert De Niro"), ("Thief", "has_genre", "Crime"),
        ("Thief", "directed_by", "Michael Mann"), ("Thief", "release_year", "1981"),
        ("Robert De Niro", "starred_actors", "Heat")}
    n = kg_names(eng)
    assert "R. De Niro" not in n and "Thriller" not in n and n["Michael Mann"] == "Michael K. Mann"
    # the relation that lost its last triple left the catalog and Milvus; has_genre stays (Thief has one)
    st = eng.stats()
    assert st["agree"] and st["queued"] == 0 and st["version"]["seq"] == rep.version
    assert {ri.name for ri in eng.graph.relation_catalog(refresh=True).values()} == {
        "directed_by", "starred_actors", "release_year", "has_genre"}
    assert st["milvus"]["relations"] == 4
    # Milvus: the renamed entity was embedded again from its new text; the merged and removed ones are gone
    eid = {r["key"]: r["eid"] for r in eng.graph.entities_by_key(list(n))}
    got = eng.vectors.get_vectors("entities", [eid["Michael Mann"]])[eid["Michael Mann"]]
    want = eng.embedder.encode(["Michael K. Mann: American director"])[0]
    assert float(np.linalg.norm(got - want)) < 1e-4
    from engine.stores.graph import entity_id

    gone = [entity_id(eng.kg, "R. De Niro"), entity_id(eng.kg, "Thriller")]
    assert eng.vectors.get_vectors("entities", gone) == {}
    check = eng.check(deep=True, progress=False)
    assert check.ok, check.lines()


def test_the_same_change_set_twice_changes_nothing(loaded: Any) -> None:
    eng = loaded
    first = eng.apply(CHANGES, progress=False)
    state = (set(kg_triples(eng)), kg_names(eng), eng.stats())
    again = eng.apply(CHANGES, progress=False)
    assert again.already_applied and again.version == first.version
    assert (again.added, again.removed, again.vectors_upserted, again.vectors_deleted) == (0, 0, 0, 0)
    assert (set(kg_triples(eng)), kg_names(eng), eng.stats()) == state


def test_triples_between_known_entities_write_no_vector_and_a_new_relation_one(loaded: Any) -> None:
    """Only what is new or changed goes to Milvus: added and removed triples between entities and relations the KG
    has already write no vector (nothing is queued: no read of Milvus per batch); a new relation gets its vector.
    (Each entity keeps a triple: one that lost its last would leave, vector and all.)"""
    eng = loaded
    ops = [AddTriple("Ronin", "directed_by", "Michael Mann"), RemoveTriple("Collateral", "directed_by", "Michael Mann"),
           AddTriple("Thief", "starred_actors", "Al Pacino")]
    rep = eng.apply(ops, progress=False, batch_size=1)
    assert (rep.added, rep.removed, rep.batches) == (2, 1, 3)
    assert (rep.vectors_upserted, rep.vectors_deleted) == (0, 0) and rep.vector_s == 0
    rep = eng.apply([AddTriple("Thief", "written_by", "Michael Mann")], progress=False)
    assert (rep.added, rep.vectors_upserted) == (1, 1)
    st = eng.stats()
    assert st["agree"] and st["queued"] == 0 and st["milvus"]["relations"] == 5
    rid = next(rid for rid, ri in eng.graph.relation_catalog(refresh=True).items() if ri.name == "written_by")
    assert eng.vectors.get_names("relations", [rid]) == {rid: "written_by"}


def test_a_key_merged_earlier_and_its_target_in_one_change_set(loaded: Any) -> None:
    """An alias made by an earlier change set and the key it resolves to, named in one change set: the ops run as
    in order (the batch is cut where running them by kind would differ), so setting the alias's entity and then
    removing its target leaves neither."""
    eng = loaded
    eng.apply([MergeEntity("R. De Niro", "Robert De Niro")], progress=False)
    rep = eng.apply([SetEntity("R. De Niro", name="Bobby"), RemoveEntity("Robert De Niro")], progress=False)
    assert (rep.entities_set, rep.entities_removed, rep.batches) == (1, 1, 2)
    n = kg_names(eng)
    assert "Robert De Niro" not in n and "R. De Niro" not in n and "Bobby" not in n.values()
    assert not any("Robert De Niro" in (h, t) for h, _, t in kg_triples(eng))
    assert eng.check(progress=False).ok


def test_unused_types_by_statement_and_by_scan_agree(loaded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Which relationship types no triple has: a statement per type for a few, one scan of the KG for many; both
    say the same (here has_genre, whose triples the test deletes behind the catalog's back)."""
    from engine.changes import apply as changes_apply

    eng = loaded
    catalog = {ri.type for ri in eng.graph.relation_catalog(refresh=True).values()}
    eng.graph.write("MATCH (h:IsoragEntity {isorag_kg: $kg})-[r:has_genre]->() DELETE r", kg=eng.kg)
    got = {}
    for above in (0, 1_000):
        monkeypatch.setattr(changes_apply, "SCAN_ABOVE", above)
        got[above] = changes_apply.unused_types(eng.graph, sorted(catalog), catalog)
    assert got[0] == got[1_000] == ["has_genre"]
    check = eng.check(progress=False)
    assert not check.ok and "has_genre" in " ".join(check.lines())


def test_a_later_load_resolves_a_merged_key(loaded: Any, tmp_path: Path) -> None:
    eng = loaded
    eng.apply([MergeEntity("R. De Niro", "Robert De Niro")], progress=False)
    more = tmp_path / "more.txt"
    more.write_text("Casino|starred_actors|R. De Niro\n", encoding="utf-8")
    eng.load(more, progress=False)
    assert ("Casino", "starred_actors", "Robert De Niro") in kg_triples(eng)
    assert "R. De Niro" not in kg_names(eng)
    assert eng.stats()["agree"]


def test_bad_operations_follow_the_loaders_rules(loaded: Any, tmp_path: Path) -> None:
    eng = loaded
    path = tmp_path / "changes.jsonl"
    path.write_text('{"op": "add", "head": "Heat", "relation": "has_genre", "tail": "Crime"}\n'
                    '{"op": "explode", "key": "Heat"}\n'
                    '{"op": "merge", "source": "Heat", "target": "Heat"}\n'
                    '{"op": "remove", "head": "Heat", "relation": "has_genre", "tail": "Drama"}\n', encoding="utf-8")
    before = set(kg_triples(eng))
    with pytest.raises(MalformedInputError, match=r"changes\.jsonl:2: unknown op 'explode'"):
        eng.apply(path, strict=True, progress=False)
    assert set(kg_triples(eng)) == before  # strict: the file is read whole before anything is written
    rep = eng.apply(path, progress=False)
    assert rep.added == 1 and rep.skipped == 3
    assert sorted(m.split(": ", 1)[0] for m in rep.skip_examples) == [f"{path}:{n}" for n in (2, 3, 4)]


def test_two_triple_files_apply_removes_then_adds(loaded: Any, tmp_path: Path) -> None:
    eng = loaded
    add, remove = tmp_path / "add.txt", tmp_path / "remove.txt"
    add.write_text("Heat|has_genre|Crime\n", encoding="utf-8")
    remove.write_text("Heat|release_year|1995\n", encoding="utf-8")
    rep = eng.apply(add=add, remove=remove, progress=False)
    assert (rep.added, rep.removed) == (1, 1)
    t = set(kg_triples(eng))
    assert ("Heat", "has_genre", "Crime") in t and ("Heat", "release_year", "1995") not in t


def test_check_finds_and_repairs_what_differs(loaded: Any) -> None:
    eng = loaded
    from engine.stores.graph import entity_id

    mann, pacino = entity_id(eng.kg, "Michael Mann"), entity_id(eng.kg, "Al Pacino")
    eng.vectors.delete("entities", [mann])
    eng.vectors.upsert("entities", [pacino], eng.embedder.encode(["something else"]))
    eng.vectors.upsert("entities", [12345], eng.embedder.encode(["an id Neo4j does not have"]))
    rep = eng.check(deep=True, progress=False)
    assert not rep.ok
    assert (rep.missing["entities"], rep.stale["entities"], rep.extra["entities"]) == (1, 1, 1)
    assert rep.examples["missing_entities"] == [mann] and rep.examples["stale_entities"] == [pacino]
    fixed = eng.check(repair=True, deep=True, progress=False)
    assert fixed.repaired and fixed.upserted == 2 and fixed.deleted == 1
    assert eng.check(deep=True, progress=False).ok
    assert eng.stats()["agree"]


def test_retrieval_after_a_change_in_another_engine_is_not_stale(loaded: Any, make_engine: Any) -> None:
    reader = loaded
    writer = make_engine(kg=reader.kg, llm=False)
    pattern = {"triples": [["Collateral", "release_year", "UNKNOWN year 1"]]}
    first = reader.retrieve(pattern, k=1)
    assert [a.entity.name for a in first.answers] == ["2004"]
    rel_types = reader.graph.relation_types()  # cached by the reader's graph store
    assert "release_year" in rel_types
    rep = writer.apply([RemoveTriple("Collateral", "release_year", "2004"),
                        SetEntity("Michael Mann", name="M. Mann")], progress=False)
    assert rep.version == first.kg_version + 1  # type: ignore[operator]
    after = reader.retrieve({"triples": [["Heat", "directed_by", "UNKNOWN person 1"]]}, k=1)
    assert after.kg_version == rep.version
    assert [a.entity.name for a in after.answers] == ["M. Mann"]
    gone = reader.retrieve(pattern, k=1)
    assert all(a.entity.name != "2004" for a in gone.answers)
    # the last release_year triple goes: the relation leaves the catalog, and the reader's cached catalog follows
    writer.apply([RemoveTriple("Heat", "release_year", "1995")], progress=False)
    reader.retrieve({"triples": [["Heat", "directed_by", "UNKNOWN person 1"]]}, k=1)
    assert "release_year" not in reader.graph.relation_types()


def test_the_users_graph_is_never_modified(make_engine: Any) -> None:
    """A KG adopted from the user's nodes, changed by a change set: the user's nodes, properties and relationships
    stay as they were (a removed adopted entity is given back, not deleted)."""
    from helpers.kg import unique_kg

    eng = make_engine(llm=False)
    label = "LivingUser_" + unique_kg("l")[2:]
    g = eng.graph
    g.write(f"CREATE (:{label} {{uid: 'u1', name: 'Ann', age: 40}})-[:FRIEND_OF {{since: 2001}}]->"
            f"(:{label} {{uid: 'u2', name: 'Ben'}})-[:FRIEND_OF]->(:{label} {{uid: 'u3', name: 'Cy'}})")

    def users() -> Any:
        nodes = g.read(f"MATCH (n:{label}) RETURN n.uid AS uid, properties(n) AS p ORDER BY uid")
        rels = g.read(f"MATCH (a:{label})-[r]->(b:{label}) WHERE r.isorag_name IS NULL "  # the user's own
                      "RETURN a.uid AS a, type(r) AS t, properties(r) AS p, b.uid AS b ORDER BY a, b")
        return ([(r["uid"], {k: v for k, v in r["p"].items() if not k.startswith("isorag_")}) for r in nodes],
                [(r["a"], r["t"], {k: v for k, v in r["p"].items() if not k.startswith("isorag_")}, r["b"])
                 for r in rels])

    try:
        before = users()
        eng.load_existing(label, "uid", "name", progress=False)
        rep = eng.apply([AddTriple("u1", "likes", "u3"), RemoveEntity("u2"), SetEntity("u1", name="Annie"),
                         MergeEntity("u3", "u1"), RemoveTriple("u1", "FRIEND_OF", "u2")], progress=False)
        assert rep.added == 1 and rep.entities_removed == 1 and rep.entities_set == 1
        assert rep.merged == 0 and rep.skipped == 2  # an adopted node is never merged away; a user's edge stays
        assert users() == before
        assert g.read(f"MATCH (n:{label} {{uid: 'u2'}}) RETURN labels(n) AS l, n.isorag_kg AS kg")[0] == {
            "l": [label], "kg": None}
        eng.check(repair=True, deep=True, progress=False)  # repairs touch isorag's own data only
        assert eng.check(deep=True, progress=False).ok
        assert users() == before
        eng.drop()
        assert users() == before
        assert g.read(f"MATCH (n:{label}) WHERE n.isorag_eid IS NOT NULL RETURN count(n) AS c")[0]["c"] == 0
    finally:
        g.write(f"MATCH (n:{label}) DETACH DELETE n")
