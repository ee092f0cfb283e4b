"""A living KG is exactly the KG its history of change sets describes: each test is a way it was found to lose a fact
or to leave the two stores out of step while ``check`` said they agreed, reproduced on a tiny KG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine._errors import MalformedInputError
from engine.changes.ops import AddTriple, MergeEntity, RemoveEntity, RemoveTriple, SetEntity
from engine.stores.graph import entity_id
from helpers.kg import kg_names, kg_triples

pytestmark = pytest.mark.long  # minutes of work: `make test` deals this file out first (tests/conftest.py)


def load(eng: Any, tmp_path: Path, lines: list[str]) -> None:
    path = tmp_path / f"{eng.kg}.txt"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    eng.load(path, progress=False)


def entities(eng: Any) -> list[tuple[int, str]]:
    """(eid, key) of every entity of the KG."""
    rows = eng.graph.read("MATCH (n:IsoragEntity {isorag_kg: $kg}) RETURN n.isorag_eid AS eid, n.isorag_key AS key",
                          kg=eng.kg)
    return sorted((r["eid"], r["key"]) for r in rows)


def aliases(eng: Any) -> dict[str, str]:
    return {r["alias"]: r["target"] for r in eng.graph.read_named("kg_aliases", kg=eng.kg)}


def vector_is_of(eng: Any, key: str, text: str) -> bool:
    eid = entity_id(eng.kg, key)
    got = eng.vectors.get_vectors("entities", [eid]).get(eid)
    return got is not None and float(np.linalg.norm(got - eng.embedder.encode([text])[0])) < 1e-4


def assert_exact(eng: Any) -> None:
    """The stores agree (a full check without --deep, and with it) and every entity's id is its key's."""
    assert all(eid == entity_id(eng.kg, key) for eid, key in entities(eng)), entities(eng)
    quick = eng.check(progress=False)
    assert quick.ok, quick.lines()
    deep = eng.check(deep=True, progress=False)
    assert deep.ok, deep.lines()
    assert eng.stats()["agree"]


def test_a_description_set_alone_is_embedded(make_engine: Any, tmp_path: Path) -> None:
    """``set`` with a description on an entity that had none changed the text its vector is embedded from, but the
    statement compared a list holding a null (``[name, null] <> [name, "..."]`` is null, read as unchanged): nothing
    was embedded, and only ``check --deep`` saw it."""
    eng = make_engine(llm=False)
    load(eng, tmp_path, ["Alien|directed_by|Ridley Scott", "Alien|release_year|1979"])
    rep = eng.apply([SetEntity("Alien", description="1979 film")], progress=False)
    assert rep.vectors_upserted == 1
    assert vector_is_of(eng, "Alien", "Alien: 1979 film")
    assert_exact(eng)


@pytest.mark.parametrize("field", ["name", "description", "types"])
def test_each_field_null_value_other_null(make_engine: Any, tmp_path: Path, field: str) -> None:
    """Every field of ``set`` goes from nothing to a value, to another, and back to nothing (a name back to another
    name: it is never empty); each step is applied to both stores and the check finds nothing."""
    eng = make_engine(llm=False)
    load(eng, tmp_path, ["Heat|directed_by|Michael Mann"])
    steps: list[dict[str, Any]] = {
        "name": [{"name": "Heat (1995)"}, {"name": "HEAT"}, {"name": "Heat"}],
        "description": [{"description": "a film"}, {"description": "a 1995 film"}, {"description": ""}],
        "types": [{"types": ("film",)}, {"types": ("movie", "crime film")}, {"types": ()}],
    }[field]
    for step in steps:
        eng.apply([SetEntity("Heat", **step)], progress=False)
        row = eng.graph.read("MATCH (n:IsoragEntity {isorag_eid: $e}) RETURN n.isorag_name AS name, "
                             "n.isorag_description AS description, n.isorag_types AS types",
                             e=entity_id(eng.kg, "Heat"))[0]
        want = step[field] or None if field != "types" else list(step[field])
        assert (row[field] or ([] if field == "types" else None)) == (want or ([] if field == "types" else None))
        text = row["name"] + (f": {row['description']}" if row["description"] else "")
        assert vector_is_of(eng, "Heat", text), (field, step)
        types = {r["name"] for r in eng.graph.read("MATCH (t:IsoragEntityType {kg: $kg}) RETURN t.name AS name",
                                                    kg=eng.kg)}
        assert types == set(row["types"] or [])
        assert_exact(eng)


def test_removing_a_merge_target_frees_its_alias_for_a_new_entity(make_engine: Any, tmp_path: Path) -> None:
    """A merged into B, then (in one batch) B removed and ``add A r Z``: the batch resolved A to B before its
    transaction, so the add made a node at B's id keyed "A"; a later ``add A r V`` made a second entity keyed "A",
    and removing B again deleted the node that held (A, r, Z). An alias leaves with the entity it resolves to: A is
    a key of its own again."""
    eng = make_engine(llm=False)
    load(eng, tmp_path, ["A|r|Y", "B|r|X", "C|r|W"])
    eng.apply([MergeEntity("A", "B")], progress=False)
    assert aliases(eng) == {"A": "B"}
    rep = eng.apply([RemoveEntity("B"), AddTriple("A", "r", "Z")], progress=False)
    assert (rep.entities_removed, rep.added, rep.skipped) == (1, 1, 0)
    assert aliases(eng) == {}
    eng.apply([AddTriple("A", "r", "V")], progress=False)
    again = eng.apply([RemoveEntity("B")], progress=False)
    assert again.skipped == 1 and again.entities_removed == 0
    assert set(kg_triples(eng)) == {("A", "r", "Z"), ("A", "r", "V"), ("C", "r", "W")}
    assert [k for _, k in entities(eng)].count("A") == 1
    assert_exact(eng)


def test_a_merge_whose_source_is_an_alias_keeps_every_key(make_engine: Any, tmp_path: Path) -> None:
    """Merge A into B, then A into C: A names B, so B is merged into C; its alias was stored under the key the
    operation wrote ("A") instead of B's own key, so nothing mapped "B" any more, and a sync of ``B|r|x1, B|r|x2``
    added to C then removed C: 0 triples left where the file has 2."""
    eng = make_engine(llm=False)
    load(eng, tmp_path, ["A|r|x1", "B|r|x2", "C|r|x3"])
    eng.apply([MergeEntity("A", "B")], progress=False)
    rep = eng.apply([MergeEntity("A", "C")], progress=False)
    assert rep.merged == 1
    assert aliases(eng) == {"A": "C", "B": "C"}
    assert set(kg_triples(eng)) == {("C", "r", "x1"), ("C", "r", "x2"), ("C", "r", "x3")}
    path = tmp_path / "file.txt"
    path.write_text("B|r|x1\nB|r|x2\n", encoding="utf-8")
    sync = eng.sync(path, progress=False)
    assert (sync.triples_added, sync.triples_removed) == (0, 1)
    assert set(kg_triples(eng)) == {("C", "r", "x1"), ("C", "r", "x2")}
    assert "x3" not in kg_names(eng)  # it left with its last triple
    assert eng.sync(path, progress=False).changes == 0
    assert_exact(eng)


def test_bad_operations_from_python_follow_the_file_rules(make_engine: Any, tmp_path: Path) -> None:
    """A bad operation given in Python raised after a version was begun (and said ``<changes>:0``); a strict
    rollback used up a version too. Now: validated while spooling, skipped with the operation's index (or, strict,
    refused whole before anything is written), and no version for a change set that applies nothing."""
    eng = make_engine(llm=False)
    load(eng, tmp_path, ["Heat|directed_by|Michael Mann", "Heat|release_year|1995"])
    seq = eng.version()["seq"]
    ops = [AddTriple("Heat", "has_genre", "Crime"), AddTriple("Heat", "has_genre", " "), MergeEntity("Heat", "Heat")]
    with pytest.raises(MalformedInputError, match=r"<changes>:2: op 'add': not a non-empty string"):
        eng.apply(ops, strict=True, progress=False)
    assert eng.version()["seq"] == seq and ("Heat", "has_genre", "Crime") not in kg_triples(eng)
    with pytest.raises(MalformedInputError, match=r"<changes>:1: remove: triple \('Heat', 'has_genre', 'Drama'\)"):
        eng.apply([RemoveTriple("Heat", "has_genre", "Drama")], strict=True, progress=False)
    assert eng.version()["seq"] == seq  # the rollback used no version
    nothing = eng.apply([MergeEntity("Heat", "Heat"), RemoveTriple("Heat", "has_genre", "Drama")], progress=False)
    assert nothing.skipped == 2 and nothing.version == seq == eng.version()["seq"]
    assert [m.split(": ", 1)[0] for m in nothing.skip_examples] == ["<changes>:1", "<changes>:2"]
    rep = eng.apply(ops, progress=False)
    assert (rep.added, rep.skipped, rep.version) == (1, 2, seq + 1)
    assert [m.split(": ", 1)[0] for m in rep.skip_examples] == ["<changes>:2", "<changes>:3"]
    assert_exact(eng)


def test_an_entity_leaves_with_its_last_triple_unless_it_has_something_of_its_own(make_engine: Any,
                                                                                  tmp_path: Path) -> None:
    """Entities whose last triple was removed stayed in both stores, taking candidate slots, while a fresh load of
    the same triples has none of them and a sync would remove them. An entity that only triples brought in leaves
    with its last triple (its vector too); one given a name, description, types or aliases of its own stays."""
    eng = make_engine(llm=False)
    load(eng, tmp_path, ["A|r|B", "B|r|C", "D|r|E", "F|r|G", "H|r|I"])
    eng.apply([SetEntity("E", description="kept: described"), SetEntity("G", types=("thing",)),
               SetEntity("I", name="Eye"), MergeEntity("J", "A")], progress=False)
    rep = eng.apply([RemoveTriple("A", "r", "B"), RemoveTriple("D", "r", "E"), RemoveTriple("F", "r", "G"),
                     RemoveTriple("H", "r", "I")], progress=False)
    assert rep.removed == 4 and rep.skipped == 0
    names = kg_names(eng)
    assert set(names) == {"B", "C", "E", "G", "I"}  # A, D, F, H left; B keeps (B, r, C)
    assert rep.orphans_removed == 4
    gone = [entity_id(eng.kg, k) for k in "ADFH"]
    assert eng.vectors.get_vectors("entities", gone) == {}
    rep = eng.apply([RemoveEntity("C")], progress=False)  # B's last triple goes with C
    assert set(kg_names(eng)) == {"E", "G", "I"} and rep.orphans_removed == 1
    assert_exact(eng)


def test_merging_keeps_the_target_which_has_aliases(make_engine: Any, tmp_path: Path) -> None:
    """A merge target has an alias of its own: it stays when its last triple goes; its alias stays usable."""
    eng = make_engine(llm=False)
    load(eng, tmp_path, ["A|r|B", "C|s|D"])
    eng.apply([MergeEntity("A", "C")], progress=False)
    eng.apply([RemoveTriple("C", "r", "B"), RemoveTriple("C", "s", "D")], progress=False)
    assert set(kg_names(eng)) == {"C"} and aliases(eng) == {"A": "C"}
    eng.apply([AddTriple("A", "t", "E")], progress=False)
    assert set(kg_triples(eng)) == {("C", "t", "E")}
    assert_exact(eng)


def test_the_check_without_deep_finds_stale_texts_and_wrong_ids(make_engine: Any, tmp_path: Path) -> None:
    """``check`` and ``stats`` said the stores agreed while a vector was embedded from a text Neo4j no longer holds,
    and ``check --repair`` without ``--deep`` repaired nothing. Every row records the digest of the text it was
    embedded from: a check without ``--deep`` finds each such row (and an entity whose id is not its key's, which
    no look-up by key finds), and its repair embeds again what differs."""
    eng = make_engine(llm=False)
    load(eng, tmp_path, ["Alien|directed_by|Ridley Scott", "Heat|directed_by|Michael Mann"])
    assert_exact(eng)
    # a text changed in Neo4j behind the vectors' back (what the null comparison left)
    alien, heat = entity_id(eng.kg, "Alien"), entity_id(eng.kg, "Heat")
    eng.graph.write("MATCH (n:IsoragEntity {isorag_kg: $kg, isorag_eid: $e}) SET n.isorag_description = '1979 film'",
                    kg=eng.kg, e=alien)
    rep = eng.check(progress=False)
    assert not rep.ok and rep.stale["entities"] == 1 and rep.examples["stale_entities"] == [alien], rep.lines()
    # and a row embedded from a text that is not its entity's
    eng.vectors.upsert("entities", [heat], eng.embedder.encode(["something else"]), texts=["something else"])
    rep = eng.check(progress=False)
    assert not rep.ok and rep.stale["entities"] == 2, rep.lines()
    assert sorted(rep.examples["stale_entities"]) == sorted([alien, heat])
    fixed = eng.check(repair=True, progress=False)
    assert fixed.repaired and fixed.upserted == 2
    assert vector_is_of(eng, "Alien", "Alien: 1979 film") and vector_is_of(eng, "Heat", "Heat")
    assert_exact(eng)
    # an entity whose id is not its key's: reported (not repairable: nothing by key finds it)
    eng.graph.write("MATCH (n:IsoragEntity {isorag_kg: $kg, isorag_eid: $e}) SET n.isorag_key = 'Not Heat'",
                    kg=eng.kg, e=heat)
    wrong = eng.check(progress=False)
    assert not wrong.ok and wrong.wrong_ids == 1 and wrong.examples["wrong_ids"] == [heat], wrong.lines()
