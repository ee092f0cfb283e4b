"""KG names of their own, and a KG loaded once for a module, on the real Neo4j and Milvus (integration tests)."""

from __future__ import annotations

import uuid
from typing import Any, Callable, Iterator


def unique_kg(prefix: str = "t") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def shared_kg(prefix: str, records: list[Any], neo4j_uri: str, milvus_uri: str,
              embedder: Any) -> Iterator[Callable[..., Any]]:
    """Load ``records`` once into a fresh KG; yield ``factory(llm=False, **overrides)`` -> an Engine on it.

    For module-scoped fixtures: the engines are closed and the KG dropped from both stores afterwards.
    """
    from engine._config import EngineConfig, MilvusSettings, Neo4jSettings
    from engine._engine import Engine
    from loaders.bulk import BulkLoader, LoadSummary

    cfg = EngineConfig(kg=unique_kg(prefix), neo4j=Neo4jSettings(uri=neo4j_uri), milvus=MilvusSettings(uri=milvus_uri))
    owner = Engine(cfg, llm=False, embedder=embedder)
    BulkLoader(owner.graph, owner.vectors, embedder, progress=False).load_records(records, LoadSummary())
    made: list[Any] = []

    def factory(llm: Any = False, **overrides: Any) -> Any:
        eng = Engine(cfg, llm=llm, embedder=embedder, **overrides)
        made.append(eng)
        return eng

    yield factory
    for eng in made:
        eng.close()
    owner.drop()
    owner.close()


def kg_triples(eng: Any, *, relation: str = "type") -> list[tuple[str, str, str]]:
    """The KG's triples as (head key, relation, tail key), sorted, repeats kept (a duplicated triple shows);
    ``relation``: the relationship ``"type"`` or the relation's ``"name"`` as loaded."""
    rel = {"type": "type(r)", "name": "r.isorag_name"}[relation]
    rows = eng.graph.read("MATCH (h:IsoragEntity {isorag_kg: $kg})-[r]->(t:IsoragEntity) "
                          "WHERE r.isorag_name IS NOT NULL "
                          f"RETURN h.isorag_key AS h, {rel} AS r, t.isorag_key AS t", kg=eng.kg)
    return sorted((r["h"], r["r"], r["t"]) for r in rows)


def kg_names(eng: Any) -> dict[str, str]:
    """The KG's entities: key -> name."""
    rows = eng.graph.read("MATCH (n:IsoragEntity {isorag_kg: $kg}) RETURN n.isorag_key AS k, n.isorag_name AS n",
                          kg=eng.kg)
    return {r["k"]: r["n"] for r in rows}
