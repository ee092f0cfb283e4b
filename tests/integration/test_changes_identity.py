"""A KG's identity, on the real Neo4j and Milvus: made with the KG, kept in its version node, recorded by the files
made for it; a file made for another KG of the same name (dropped and made again since) is refused, and a drop
removes the KG's files under ISORAG_HOME."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from engine._errors import CheckpointError
from engine.learned.generator import load_generator
from engine.learned.train import GeneratorSettings, make_record

MOVIES = [("Heat", "directed_by", "Michael Mann"), ("Collateral", "directed_by", "Michael Mann"),
          ("Alien", "directed_by", "Ridley Scott"), ("Gladiator", "directed_by", "Ridley Scott"),
          ("Heat", "release_year", "1995"), ("Alien", "release_year", "1979")]


def load(eng: Any, tmp_path: Path) -> None:
    kb = tmp_path / "kb.txt"
    kb.write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in MOVIES), encoding="utf-8")
    eng.load(kb, progress=False)


def train(eng: Any) -> Path:
    records = [make_record(f"{form} [{film}]", None, [], {"triples": [[film, rel, "UNKNOWN 1"]]})
               for film in ("Heat", "Collateral", "Alien", "Gladiator")
               for rel, forms in (("directed_by", ["who directed", "the director of"]),
                                  ("release_year", ["when was the release of", "the year of"]))
               for form in forms]
    res = eng.train_generator(records, settings=GeneratorSettings(seed=1, dev_fraction=0.0, epochs=3),
                              progress=False)
    return Path(res.checkpoint)


def test_a_file_made_for_a_kg_of_the_same_name_dropped_since_is_refused(make_engine: Any, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ISORAG_HOME", str(tmp_path / "home"))
    eng = make_engine(llm=False)
    load(eng, tmp_path)
    first = eng.graph.identity()
    assert first  # made with the KG
    path = train(eng)
    assert path == tmp_path / "home" / "generators" / f"{eng.kg}.pt" and path.is_file()
    assert load_generator(path).kg_id == first
    kept = tmp_path / "kept.pt"
    shutil.copy(path, kept)

    eng.drop()
    assert not path.exists()  # the KG's files under ISORAG_HOME go with it
    again = make_engine(kg=eng.kg, llm=False)
    load(again, tmp_path)
    second = again.graph.identity()
    assert second and second != first
    other = make_engine(kg=eng.kg, llm=False, generator=str(kept))
    with pytest.raises(CheckpointError, match="a generator of another KG named .* dropped and made again since"):
        other.propose("who directed [Heat]")

    # a file that records another identity is another KG's (another server's, sharing ISORAG_HOME): a drop leaves it
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(kept, path)
    again.drop()
    assert path.is_file()


def test_a_scorer_checkpoint_made_for_another_kg_of_the_same_name_is_refused(make_engine: Any,
                                                                             tmp_path: Path) -> None:
    from engine.scoring.checkpoint import make_model, save_checkpoint

    eng = make_engine(llm=False)
    load(eng, tmp_path)
    types = sorted(eng.graph.relation_types())
    model = make_model("dde_mlp", eng.embedder.dim, hidden=8)
    common = dict(kg=eng.kg, embedding_model="all-MiniLM-L6-v2", embedding_slug=eng.embedder.slug,
                  relation_types=types, hops=1, max_edges=100)
    mine, theirs = tmp_path / "mine.pt", tmp_path / "theirs.pt"
    save_checkpoint(mine, model, kg_id=eng.graph.identity(), **common)
    save_checkpoint(theirs, model, kg_id="0" * 32, **common)
    assert make_engine(kg=eng.kg, llm=False, scorer=str(mine)).scorer is not None
    with pytest.raises(CheckpointError, match="trained on another KG named .* dropped and made again since"):
        _ = make_engine(kg=eng.kg, llm=False, scorer=str(theirs)).scorer
