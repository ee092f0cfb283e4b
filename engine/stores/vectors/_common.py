"""Names, limits and small helpers the parts of :class:`engine.stores.vectors.VectorStore` share."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from engine._config import check_kg_name
from engine._errors import ConfigError

KINDS = ("entities", "relations", "types")
#: the kind made only for a KG with aliases (an entity's other names, each embedded like a name)
ALIASES = "aliases"
ALL_KINDS = (*KINDS, ALIASES)
PK_FIELD = {"entities": "eid", "relations": "rid", "types": "tid", ALIASES: "aid"}
#: the INT64 field of an alias row holding its entity's eid
OWNER_FIELD = "eid"
VECTOR_FIELD = "vector"
NAME_FIELD = "name"
NAME_MAX = 65535
VECTOR_INDEX = "vector_idx"
#: the INT64 field holding the digest of the text a row was embedded from (engine.stores.texts.text_digest)
DIGEST_FIELD = "digest"

BATCH = 10_000  # rows per insert (the measured best on the bundled Milvus)
QUERY_BATCH = 8_192  # pks per query (<= Milvus' 16,384 result cap)
TOPK_MAX = 16_384  # Milvus' cap on limit
SEARCH_BATCH = 4_096  # query vectors per Search RPC (Milvus refuses more than 16,384 in one)
EF_MAX = 32_768  # knowhere's cap on HNSW ef

# HNSW build cost grows with M and efConstruction; 32/128 builds MetaQA's 43k entities in less than half
# the time of 64/512 with recall against exact search 0.993 at k=16, 0.998 at 64, 1.0 at 1024 (search ef as
# in _search_params; benchmarks/load.py --recall measures it).  An existing index is kept unless the store
# is given an explicit ``index``.
DEFAULT_INDEX: dict[str, Any] = {
    "index_type": "HNSW",
    "metric_type": "L2",
    "params": {"M": 32, "efConstruction": 128},
}
# Milvus Lite (a *.db path) builds FLAT only.
LITE_INDEX: dict[str, Any] = {"index_type": "FLAT", "metric_type": "L2", "params": {}}

CONNECT_TIMEOUT = 5  # seconds; an unreachable server is reported after this, never a hang
DDL_TIMEOUT = 60
DATA_TIMEOUT = 120
SEARCH_TIMEOUT = 30
LOAD_TIMEOUT = 1800
INDEX_TIMEOUT = 6 * 3600


def slug(text: str) -> str:
    """``text`` as a Milvus identifier part: ``[A-Za-z0-9_]``, starting with a letter."""
    s = re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_")
    s = re.sub(r"_{3,}", "__", s)
    if not s or not s[0].isalpha():
        s = "m" + ("_" + s if s else "")
    return s


def collection_name(kg: str, model: str, kind: str) -> str:
    """``<kg>__<model>__<kind>``. A valid KG name (:func:`engine._config.check_kg_name`) is its own prefix and holds
    no ``__``, so the KG is the text before the first ``__``: distinct KGs never share a collection."""
    if kind not in ALL_KINDS:
        raise ValueError(f"kind must be one of {ALL_KINDS}, not {kind!r}")
    check_kg_name(kg)
    model_part = slug(model.rsplit("/", 1)[-1]) if "/" in model else slug(model)
    name = f"{kg}__{model_part}__{kind}"
    if len(name) > 255:
        raise ConfigError(f"collection name too long for Milvus (255): {name!r}")
    return name


def fit_varchar(text: str, max_bytes: int = NAME_MAX) -> str:
    """``text`` cut to Milvus' VARCHAR limit, which counts UTF-8 bytes (not characters), at a character boundary.
    Only the stored name is cut: the vector is embedded from the whole text."""
    if len(text) * 4 <= max_bytes:
        return text
    raw = text.encode("utf-8")
    return text if len(raw) <= max_bytes else raw[:max_bytes].decode("utf-8", "ignore")


def model_key(model: str) -> str:
    """Model names that denote the same model ("org/name" and "name") compare equal."""
    return model.rsplit("/", 1)[-1].lower()


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def is_lite(uri: str) -> bool:
    return uri.endswith(".db") and "://" not in uri


def unavailable_code(exc: BaseException) -> bool:
    """Does this pymilvus/grpc error mean the server cannot be reached?"""
    import grpc

    code = getattr(exc, "code", None)
    if callable(code):  # grpc.RpcError
        try:
            code = code()
        except Exception:  # noqa: BLE001 - a status code that cannot be read is no known code
            code = None
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return True
    if code == 2:  # pymilvus Status.CONNECT_FAILED
        return True
    text = str(exc).lower()
    return any(
        s in text
        for s in ("connect", "unavailable", "deadline", "server unavailable", "failed to connect")
    ) and "not loaded" not in text


class IdSet:
    """A growing set of int64 ids as one sorted array (8 bytes an id: millions of entities stay small)."""

    def __init__(self) -> None:
        self._ids = np.empty(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, ids: np.ndarray) -> None:
        self._ids = np.union1d(self._ids, np.asarray(ids, dtype=np.int64).reshape(-1))

    def discard(self, ids: np.ndarray) -> None:
        self._ids = np.setdiff1d(self._ids, np.asarray(ids, dtype=np.int64).reshape(-1), assume_unique=False)

    def contains(self, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if not len(self._ids):
            return np.zeros(len(ids), dtype=bool)
        pos = np.minimum(np.searchsorted(self._ids, ids), len(self._ids) - 1)
        return self._ids[pos] == ids
