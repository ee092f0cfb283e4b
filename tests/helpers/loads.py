"""A generated HRT file and the counts a load of it must give in both stores (tests of loads)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def write_hrt(path: Path, n_movies: int = 40) -> list[tuple[str, str, str]]:
    triples = []
    for i in range(n_movies):
        m = f"Movie {i}"
        triples += [(m, "directed_by", f"Director {i % 7}"), (m, "release_year", str(1990 + i % 11)),
                    (m, "starred_actors", f"Actor {i % 13}"), (m, "starred_actors", f"Actor {(i + 5) % 13}")]
    path.write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in triples), encoding="utf-8")
    return triples


def expected_counts(triples: list[tuple[str, str, str]]) -> dict[str, int]:
    ents = {x for h, _, t in triples for x in (h, t)}
    return {"entities": len(ents), "relations": len({r for _, r, _ in triples}), "triples": len(set(triples))}


def check_stats(eng: Any, want: dict[str, int]) -> None:
    st = eng.stats()
    assert st["agree"], st
    for key, value in want.items():
        assert st["neo4j"][key] == value, (key, st)
    assert st["milvus"]["entities"] == want["entities"]
    assert st["milvus"]["relations"] == want["relations"]
