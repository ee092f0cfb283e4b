"""Two writers of one KG's vectors, on the real Neo4j and Milvus: the engine that loaded a KG (and so created its
collections) and another (a change set applied by another process) both write the KG afterwards, and no vector is
stored twice. The loader trusted, after its load, its own record of what it had written: a pk another engine wrote
was inserted again, stored twice, and Milvus 2.3 then answered queries by pk with rows missing (the other pks of
the same query too: a change set killed and resumed lost entity vectors so)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.changes.ops import AddTriple, SetEntity

from helpers.kg import unique_kg


def test_an_entity_another_engine_made_is_embedded_again_in_place(make_engine: Any, tmp_path: Path) -> None:
    loader = make_engine(kg=unique_kg("writers"), llm=False)
    other = make_engine(kg=loader.kg, llm=False)
    path = tmp_path / "kg.tsv"
    path.write_text("A\tr\tB\nB\tr\tC\n", encoding="utf-8")
    loader.load(path, progress=False)
    other.apply([AddTriple("C", "r", "D")], progress=False)  # D: a new entity, embedded by the other engine
    loader.apply([SetEntity("D", name="Dee")], progress=False)  # ... and embedded again by the loader
    assert loader.vectors.count("entities") == 4 and loader.vectors.excess_rows("entities") == 0
    assert loader.stats()["agree"]
    check = loader.check(progress=False)
    assert check.ok, check.lines()
    # and a load by the loader of a file naming D (which it never wrote) neither embeds nor inserts it again
    more = tmp_path / "more.tsv"
    more.write_text("D\tr\tA\n", encoding="utf-8")
    loader.load(more, progress=False)
    assert loader.vectors.count("entities") == 4 and loader.vectors.excess_rows("entities") == 0
    assert loader.check(progress=False).ok
