"""Without a server: the version watch every cache of a KG follows, the caches on it, and key aliases in memory."""

from __future__ import annotations

from typing import Any

from engine.stores.aliases import AliasMap
from engine.stores.texts import entity_text, text_digest
from engine.stores.version import Cached, VersionWatch


class Stamps:
    """A KG's version node as a reader sees it: the stamp, and the Milvus timestamp of the last vector write."""

    def __init__(self) -> None:
        self.stamp, self.vectors_ts, self.reads = 1, 0, 0

    def __call__(self) -> dict[str, Any]:
        self.reads += 1
        return {"seq": 1, "at": None, "stamp": self.stamp, "vectors_ts": self.vectors_ts}


def test_a_new_generation_when_the_stamp_moves_and_the_vector_store_told_the_last_write() -> None:
    kg = Stamps()
    watch = VersionWatch(kg)
    seen: list[int] = []
    watch.on_vector_writes(seen.append)
    watch.check()
    first = watch.generation
    watch.check()
    assert watch.generation == first and seen == [0]  # the stamp did not move: the caches stay
    kg.stamp, kg.vectors_ts = 2, 12345
    watch.check()
    assert watch.generation == first + 1 and seen == [0, 12345]
    watch.forget()  # a write through this process
    assert watch.generation == first + 2
    watch.check()  # read anew after a forget: the vector store is told again
    assert seen[-1] == 12345


def test_a_value_read_while_a_change_lands_is_not_kept() -> None:
    """Computed under one generation, the value is used once but not kept when the stamp moved meanwhile: no cache
    holds what was read before a change under a stamp from after it."""
    kg = Stamps()
    watch = VersionWatch(kg)
    watch.check()
    calls: list[int] = []

    def compute() -> int:
        calls.append(kg.stamp)
        if len(calls) == 1:  # the change lands while the first value is read
            kg.stamp = 2
            watch.check()
        return len(calls)

    cached = Cached(watch, compute)
    assert cached.get() == 1  # used by this caller...
    assert cached.get() == 2  # ...but not kept: computed again, under the new generation
    assert cached.get() == 2 and len(calls) == 2
    watch.forget()
    assert cached.get() == 3
    assert cached.get(refresh=True) == 4


def test_a_cached_none_is_a_value() -> None:
    watch = VersionWatch(None)
    calls: list[None] = []
    cached: Cached[None] = Cached(watch, lambda: calls.append(None))
    assert cached.get() is None and cached.get() is None and len(calls) == 1
    assert watch.check() is None  # a graph without versions: nothing to read


def test_aliases_resolve_in_one_hop_and_leave_with_their_target() -> None:
    aliases = AliasMap({"a": "b"})
    assert aliases.merge("b", "c") == {"a", "b"}  # b's alias a follows b into c
    assert aliases.as_dict() == {"a": "c", "b": "c"} and aliases.resolve("a") == "c"
    assert aliases.merge("c", "c") == set()
    assert aliases.remove("c") == {"a", "b"}  # keys of their own again
    assert aliases.as_dict() == {} and aliases.resolve("a") == "a" and len(aliases) == 0


def test_the_digest_is_of_the_text_the_vector_embeds() -> None:
    assert entity_text("Alien", None) == "Alien" and entity_text("Alien", "1979 film") == "Alien: 1979 film"
    assert text_digest("Alien") == text_digest("Alien") != text_digest("Alien: 1979 film")
    assert -(1 << 63) <= text_digest("x") < (1 << 63)
