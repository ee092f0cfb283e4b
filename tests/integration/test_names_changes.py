"""Aliases in a living KG, on the real servers: change sets add, replace and remove them, a sync keeps the file's,
``check`` finds alias vectors out of step and repairs them; a model-based test (hypothesis state machine) drives
random sequences of alias changes against a plain-Python model of each entity's aliases, checked after every step
in Neo4j, in Milvus and by a retrieval of each alias."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from engine.changes.ops import SetEntity, op_from_json, op_to_json
from engine.retrieval.pattern import Pattern
from engine.stores.graph import alias_id, entity_id

from helpers.kg import unique_kg

KB = "Heat|directed_by|Michael Mann\nCollateral|directed_by|Michael Mann\nJaws|directed_by|Steven Spielberg\n"
ALIASES = ["Big Fish", "Blue Moon", "Red Sky", "Iron Lake", "Silver Road", "Stone Gate"]


def aliases_in_neo4j(eng: Any) -> dict[str, list[str]]:
    rows = eng.graph.read("MATCH (n:IsoragEntity {isorag_kg: $kg}) RETURN n.isorag_key AS key, "
                          "coalesce(n.isorag_aliases, []) AS aliases", kg=eng.config.kg)
    return {r["key"]: list(r["aliases"]) for r in rows if r["aliases"]}


def alias_rows_in_milvus(eng: Any) -> set[int]:
    eids = [r["eid"] for r in eng.graph.read("MATCH (n:IsoragEntity {isorag_kg: $kg}) RETURN n.isorag_eid AS eid",
                                             kg=eng.config.kg)]
    return set(eng.vectors.alias_rows(eids))


def test_set_aliases_round_trips_through_json() -> None:
    for obj in ({"op": "set", "key": "IBM", "aliases": ["Big Blue"]},
                {"op": "set", "key": "IBM", "add_aliases": ["Big Blue", "I.B.M."], "remove_aliases": ["IBM Corp"]}):
        op = op_from_json(obj)
        assert isinstance(op, SetEntity) and op_to_json(op) == obj and op_from_json(op_to_json(op)) == op


def test_change_sets_sync_and_check_keep_alias_vectors_in_step(make_engine: Callable[..., Any],
                                                                 tmp_path: Path) -> None:
    eng = make_engine()
    kb = tmp_path / "kb.txt"
    kb.write_text(KB, encoding="utf-8")
    eng.load(str(kb), progress=False)
    kg = eng.config.kg
    changes = tmp_path / "aliases.jsonl"
    changes.write_text("\n".join(json.dumps(x) for x in [
        {"op": "set", "key": "Michael Mann", "aliases": ["Mann", "M. Mann"]},
        {"op": "set", "key": "Jaws", "add_aliases": ["Les Dents de la mer"]},
    ]) + "\n", encoding="utf-8")
    eng.apply(str(changes), progress=False)
    assert aliases_in_neo4j(eng) == {"Michael Mann": ["Mann", "M. Mann"], "Jaws": ["Les Dents de la mer"]}
    mann, jaws = entity_id(kg, "Michael Mann"), entity_id(kg, "Jaws")
    assert alias_rows_in_milvus(eng) == {alias_id(kg, mann, "Mann"), alias_id(kg, mann, "M. Mann"),
                                         alias_id(kg, jaws, "Les Dents de la mer")}
    res = eng.retrieve(Pattern.from_triples([("Les Dents de la mer", "directed_by", "UNKNOWN 1")]), k=1)
    assert res.names["Les Dents de la mer"].name == "Jaws" and res.answers[0].entity.name == "Steven Spielberg"
    # removing one, and the removed one no longer resolves to the entity by being an alias
    eng.apply([SetEntity("Michael Mann", remove_aliases=("M. Mann",))], progress=False)
    assert aliases_in_neo4j(eng)["Michael Mann"] == ["Mann"]
    assert alias_id(kg, mann, "M. Mann") not in alias_rows_in_milvus(eng)
    assert eng.check(progress=False).ok
    # a vector lost: check sees it, repair embeds it again
    eng.vectors.delete("aliases", [alias_id(kg, mann, "Mann")])
    rep = eng.check(progress=False)
    assert not rep.ok and rep.missing["aliases"] == 1
    eng.check(repair=True, progress=False)
    assert eng.check(progress=False).ok and alias_id(kg, mann, "Mann") in alias_rows_in_milvus(eng)
    # a sync makes the KG's aliases the file's (JSON Lines entity lines)
    src = tmp_path / "kb.jsonl"
    src.write_text("\n".join(json.dumps(x) for x in [
        {"head": h, "relation": r, "tail": t} for h, r, t in (line.split("|") for line in KB.splitlines())] + [
        {"key": "Heat", "aliases": ["Heat (1995)"]}]) + "\n", encoding="utf-8")
    eng.sync(str(src), progress=False)
    assert aliases_in_neo4j(eng) == {"Heat": ["Heat (1995)"]}
    assert alias_rows_in_milvus(eng) == {alias_id(kg, entity_id(kg, "Heat"), "Heat (1995)")}
    assert eng.check(progress=False).ok


class AliasMachine(RuleBasedStateMachine):
    """Random alias changes (replace, add, remove) on three entities, one change set per step."""

    engine: Any = None

    @initialize()
    def load(self) -> None:
        self.model: dict[str, list[str]] = {}
        eng = type(self).engine
        eng.apply([SetEntity(k, aliases=()) for k in ("Heat", "Jaws", "Michael Mann")], progress=False)

    @rule(key=st.sampled_from(["Heat", "Jaws", "Michael Mann"]), names=st.lists(st.sampled_from(ALIASES), max_size=3),
          how=st.sampled_from(["replace", "add", "remove"]))
    def change(self, key: str, names: list[str], how: str) -> None:
        names = list(dict.fromkeys(names))
        if how == "replace":
            op = SetEntity(key, aliases=tuple(names))
            self.model[key] = names
        elif how == "add":
            op = SetEntity(key, aliases=tuple(names), add_aliases=True)
            self.model[key] = list(dict.fromkeys(self.model.get(key, []) + names))
        else:
            op = SetEntity(key, remove_aliases=tuple(names))
            self.model[key] = [a for a in self.model.get(key, []) if a not in names]
        type(self).engine.apply([op], progress=False)

    @invariant()
    def stores_hold_the_model(self) -> None:
        if not hasattr(self, "model"):
            return
        eng = type(self).engine
        kg = eng.config.kg
        want = {k: v for k, v in self.model.items() if v}
        assert aliases_in_neo4j(eng) == want
        assert alias_rows_in_milvus(eng) == {alias_id(kg, entity_id(kg, k), a) for k, v in want.items() for a in v}
        for v in want.values():
            res = eng.retrieve(Pattern.from_triples([(v[-1], "directed_by", "UNKNOWN 1")]), k=1)
            # an alias two entities share reaches one of them (found by hypothesis: "Big Fish" for Heat and Jaws)
            holders = {key for key, names in want.items() if v[-1] in names}
            assert res.names[v[-1]].name in holders and res.names[v[-1]].alias


def test_alias_changes_follow_a_model(neo4j_uri: str, milvus_uri: str, embedder: Any, tmp_path: Path) -> None:
    from engine._config import EngineConfig, MilvusSettings, Neo4jSettings
    from engine._engine import Engine

    eng = Engine(EngineConfig(kg=unique_kg("aliasmodel"), neo4j=Neo4jSettings(uri=neo4j_uri),
                              milvus=MilvusSettings(uri=milvus_uri)), embedder=embedder)
    kb = tmp_path / "kb.txt"
    kb.write_text(KB, encoding="utf-8")
    try:
        eng.load(str(kb), progress=False)
        AliasMachine.engine = eng
        run = AliasMachine.TestCase
        run.settings = settings(max_examples=4, stateful_step_count=5, deadline=None,
                                suppress_health_check=[HealthCheck.function_scoped_fixture])
        run().runTest()
    finally:
        AliasMachine.engine = None
        eng.drop()
        eng.close()
