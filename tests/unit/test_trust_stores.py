"""What the engine may touch in the stores (docs/security.md), without a server: KG names never share collections, an
identifier that cannot be a name is refused. A user's graph never rewritten and identifiers from data read back as
themselves, on the real Neo4j: tests/integration/test_trust_stores.py."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine._config import check_kg_name
from engine._cypher import escape_identifier
from engine._errors import ConfigError
from engine.stores.vectors import KINDS, collection_name


# -- KG names -> store names ---------------------------------------------------------------------------------------

_NAME_CHARS = st.sampled_from(list("aZk09_-. é"))


@given(st.lists(st.text(_NAME_CHARS, min_size=1, max_size=12), min_size=2, max_size=8, unique=True))
@settings(max_examples=300)
def test_kg_names_map_one_to_one_to_collections(names: list[str]) -> None:
    accepted = []
    for name in names:
        try:
            check_kg_name(name)
        except ConfigError:
            with pytest.raises(ConfigError):
                collection_name(name, "all-MiniLM-L6-v2", "entities")
            continue
        accepted.append(name)
    for model in ("all-MiniLM-L6-v2", "org/my__model", "x"):
        cols = {collection_name(n, model, kind): (n, kind) for n in accepted for kind in KINDS}
        assert len(cols) == len(accepted) * len(KINDS)  # no two (KG, kind) share a collection
        for col, (n, _) in cols.items():
            assert col.split("__", 1)[0] == n  # the KG is the part before the first "__"


@pytest.mark.parametrize("bad", ["x_", "x___y", "a__b", "_a", "1a", "a b", "a-b", "", "a" * 65, "ä"])
def test_kg_names_that_would_collide_are_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="invalid KG name"):
        check_kg_name(bad)


@pytest.mark.parametrize("good", ["x", "rr_col", "MetaQA", "t_0123abcd", "a1_b2_c3", "a" * 64])
def test_kg_names_accepted(good: str) -> None:
    assert check_kg_name(good) == good
    assert collection_name(good, "m", "types") == f"{good}__m__types"


# -- identifiers from data ----------------------------------------------------------------------------------------


def test_escape_refuses_what_cannot_be_a_name() -> None:
    from engine._errors import UnknownRelationError

    for bad in ("", "a\x00b", None):
        with pytest.raises(UnknownRelationError):
            escape_identifier(bad)  # type: ignore[arg-type]
