"""Embeddings in Milvus: entity, relation and type vectors of one KG under one embedding model.

Collections (DESIGN §2), one set per (KG, embedding model)::

    <kg>__<model>__entities   eid INT64 pk,                vector FLOAT_VECTOR(dim)
    <kg>__<model>__relations  rid INT64 pk, name VARCHAR,  vector FLOAT_VECTOR(dim)
    <kg>__<model>__types      tid INT64 pk, name VARCHAR,  vector FLOAT_VECTOR(dim)
    <kg>__<model>__aliases    aid INT64 pk, eid INT64, name VARCHAR, vector FLOAT_VECTOR(dim)

The aliases collection (an entity's other names, each embedded like a name, ``eid`` its entity) exists only for
a KG that has aliases: it is made by the first alias written (:data:`KINDS` are the three every KG has).

The KG name is used as it is (its rule makes it one-to-one: :func:`collection_name`); the model name is
sanitized to ``[A-Za-z0-9_]``.  Each collection's description records kg, model and dim, so two models whose
names sanitize alike cannot share a set silently.

Vectors are float32 and L2-normalized by the caller.  Distances returned are Euclidean distances
(``sqrt`` of Milvus' squared L2; derived from the score for an IP/COSINE index).

Loading follows what was measured on the bundled Milvus 2.3.5 (DESIGN §10): insert in 10k-row
batches, flush, build the index, wait until ``pending_index_rows`` is 0, then load; one
``search()`` call for all of a query's vectors.

pymilvus 2.4 with its ORM is used over one connection alias per store, with two hot paths on the
gRPC stub: upserts are built straight from the numpy arrays (pymilvus converts every float in
Python: 2-4 s per 10k x 384 batch here, against ~0.01 s), and search reads ids/scores straight
from the protobuf response (pymilvus' ``SearchResult`` builds a Python object per hit).

Consistency: search and get_vectors use "Session" (this process sees its own writes, others do
not wait); existing_ids and count use "Strong".  For a collection this store created, existing_ids
is answered from the pks written through it (no query: a first load never waits for Milvus), and
upsert inserts the pks never written through it (no delete records, so the index is built once).
Two processes loading one KG at the same time could then store a pk twice: load a KG from one
process at a time (a load resumed after a kill is safe: the collection is not its own, so it
asks Milvus and upserts).  Reading needs the collection loaded, which
needs an index: existing_ids / count / get_vectors create the index and load on first use.
"""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine._config import check_kg_name
from engine._errors import ConfigError, SchemaMismatchError, StoreError, StoreUnavailableError
from engine._secrets import mask_uri, register

KINDS = ("entities", "relations", "types")
#: the kind made only for a KG with aliases
ALIASES = "aliases"
ALL_KINDS = (*KINDS, ALIASES)
_PK = {"entities": "eid", "relations": "rid", "types": "tid", ALIASES: "aid"}
_OWNER = "eid"  # an alias row's entity
_VEC = "vector"
_NAME = "name"
_NAME_MAX = 65535
_VEC_INDEX = "vector_idx"

BATCH = 10_000  # rows per insert (DESIGN §10)
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


def fit_varchar(text: str, max_bytes: int = _NAME_MAX) -> str:
    """``text`` cut to Milvus' VARCHAR limit, which counts UTF-8 bytes (not characters), at a character boundary.
    Only the stored name is cut: the vector is embedded from the whole text."""
    if len(text) * 4 <= max_bytes:
        return text
    raw = text.encode("utf-8")
    return text if len(raw) <= max_bytes else raw[:max_bytes].decode("utf-8", "ignore")


def _model_key(model: str) -> str:
    """Model names that denote the same model ("org/name" and "name") compare equal."""
    return model.rsplit("/", 1)[-1].lower()


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _is_lite(uri: str) -> bool:
    return uri.endswith(".db") and "://" not in uri


def _unavailable_code(exc: BaseException) -> bool:
    """Does this pymilvus/grpc error mean the server cannot be reached?"""
    import grpc

    code = getattr(exc, "code", None)
    if callable(code):  # grpc.RpcError
        try:
            code = code()
        except Exception:  # noqa: BLE001
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


class _IdSet:
    """A growing set of int64 ids as one sorted array (8 bytes an id: millions of entities stay small)."""

    def __init__(self) -> None:
        self._ids = np.empty(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, ids: np.ndarray) -> None:
        self._ids = np.union1d(self._ids, np.asarray(ids, dtype=np.int64).reshape(-1))

    def contains(self, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if not len(self._ids):
            return np.zeros(len(ids), dtype=bool)
        pos = np.minimum(np.searchsorted(self._ids, ids), len(self._ids) - 1)
        return self._ids[pos] == ids


class VectorStore:
    """Entity / relation / type vectors of one KG under one embedding model, in Milvus."""

    def __init__(
        self,
        uri: str,
        *,
        token: str = "",
        kg: str = "default",
        model: str = "all-MiniLM-L6-v2",
        dim: int = 384,
        index: dict[str, Any] | None = None,
        timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        from pymilvus import connections

        if int(dim) <= 0:
            raise ConfigError(f"embedding dimension must be positive, not {dim}")
        self.uri, self.kg, self.model, self.dim = str(uri), kg, model, int(dim)
        self.lite = _is_lite(self.uri)
        base = dict(LITE_INDEX if self.lite else DEFAULT_INDEX)
        if index:
            base.update({k: v for k, v in index.items() if k != "params"})
            if "params" in index:
                base["params"] = dict(index["params"] or {})
            elif str(index.get("index_type", base["index_type"])).upper() != str(
                (LITE_INDEX if self.lite else DEFAULT_INDEX)["index_type"]
            ):
                base["params"] = {}  # the default's HNSW params do not fit another index type
        base["metric_type"] = str(base.get("metric_type", "L2")).upper()
        base["index_type"] = str(base.get("index_type", "HNSW")).upper()
        if base["metric_type"] not in ("L2", "IP", "COSINE"):
            raise ConfigError(f"unsupported Milvus metric {base['metric_type']!r} (L2, IP or COSINE)")
        self.index = base
        self._explicit_index = bool(index)
        self.names = {kind: collection_name(kg, model, kind) for kind in ALL_KINDS}
        self._alias = f"isorag-vs-{uuid.uuid4().hex[:12]}"
        self._cols: dict[str, Any] = {}
        self._loaded: set[str] = set()
        self._index_names: dict[str, str] = {}
        self._metric: dict[str, str] = {}  # metric of each collection's existing index
        self._itype: dict[str, str] = {}  # and its type
        # pks written so far to collections this store created (see _new_rows, existing_ids)
        self._written: dict[str, _IdSet] = {}
        self._closed = False

        kwargs: dict[str, Any] = {"uri": self.uri, "timeout": timeout}
        if not token and not self.lite:
            from engine.servers.milvus import local_token

            token = local_token(self.uri)  # this machine's local server: its secret
        if token:
            register(token)
            kwargs["token"] = token
        if self.lite:
            try:
                import milvus_lite  # noqa: F401  # type: ignore[import-untyped]
            except ImportError as exc:
                raise ConfigError(
                    f"MILVUS_URI={self.uri!r} is a Milvus Lite file; install it with "
                    "`pip install milvus-lite` (or point MILVUS_URI at a Milvus server)"
                ) from exc
            parent = Path(self.uri).expanduser().resolve().parent
            parent.mkdir(parents=True, exist_ok=True)
            kwargs["uri"] = str(Path(self.uri).expanduser().resolve())
        t0 = time.monotonic()
        try:
            connections.connect(alias=self._alias, **kwargs)
        except Exception as exc:  # noqa: BLE001 - pymilvus raises several types
            reason = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            raise StoreUnavailableError(
                "Milvus", self.uri, f"{reason} (after {time.monotonic() - t0:.1f} s)"
            ) from exc
        self._conn = connections._fetch_handler(self._alias)

    # ------------------------------------------------------------------ helpers
    def __enter__(self) -> VectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"VectorStore(uri={mask_uri(self.uri)!r}, kg={self.kg!r}, model={self.model!r}, dim={self.dim})"

    def _wrap(self, what: str, exc: BaseException) -> StoreError:
        reason = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        if isinstance(exc, StoreError):
            return exc
        if _unavailable_code(exc):
            return StoreUnavailableError("Milvus", self.uri, f"{what}: {reason}")
        return StoreError(f"Milvus {what} failed ({self.uri}): {reason}")

    def _check_kind(self, kind: str) -> None:
        if kind not in ALL_KINDS:
            raise ValueError(f"kind must be one of {ALL_KINDS}, not {kind!r}")

    def _schema(self, kind: str) -> Any:
        from pymilvus import CollectionSchema, DataType, FieldSchema

        fields = [FieldSchema(_PK[kind], DataType.INT64, is_primary=True, auto_id=False)]
        if kind == ALIASES:
            fields.append(FieldSchema(_OWNER, DataType.INT64))
        if kind != "entities":
            fields.append(FieldSchema(_NAME, DataType.VARCHAR, max_length=_NAME_MAX))
        fields.append(FieldSchema(_VEC, DataType.FLOAT_VECTOR, dim=self.dim))
        desc = json.dumps({"isorag": 1, "kg": self.kg, "model": self.model, "dim": self.dim, "kind": kind})
        return CollectionSchema(fields, description=desc)

    def _check_existing(self, kind: str, col: Any) -> None:
        name = self.names[kind]
        fields = {f.name: f for f in col.schema.fields}
        vec = fields.get(_VEC)
        stored_dim = None
        if vec is not None:
            stored_dim = (vec.params or {}).get("dim")
        if vec is None or stored_dim is None:
            raise SchemaMismatchError(
                f"Milvus collection {name!r} has no float vector field {_VEC!r}; it was not made by isorag"
            )
        if int(stored_dim) != self.dim:
            raise SchemaMismatchError(
                f"Milvus collection {name!r} stores {stored_dim}-d vectors but the embedding model "
                f"{self.model!r} gives {self.dim}-d vectors: use the model the KG was loaded with, "
                f"or drop and reload its vectors"
            )
        if _PK[kind] not in fields or (kind != "entities" and _NAME not in fields) or (
                kind == ALIASES and _OWNER not in fields):
            raise SchemaMismatchError(
                f"Milvus collection {name!r} lacks the fields {_PK[kind]!r}/{_NAME!r} isorag expects"
            )
        try:
            meta = json.loads(col.schema.description or "{}")
        except ValueError:
            meta = {}
        stored_model = meta.get("model") if isinstance(meta, dict) else None
        if stored_model is not None and _model_key(stored_model) != _model_key(self.model):
            raise SchemaMismatchError(
                f"Milvus collection {name!r} holds vectors of model {stored_model!r}, not {self.model!r}"
            )

    def _col(self, kind: str, create: bool = False) -> Any:
        """The ORM Collection of ``kind`` (checked against this store's dim); None if missing."""
        self._check_kind(kind)
        col = self._cols.get(kind)
        if col is not None:
            return col
        from pymilvus import Collection, utility

        name = self.names[kind]
        try:
            exists = utility.has_collection(name, using=self._alias, timeout=DDL_TIMEOUT)
            if exists:
                col = Collection(name, using=self._alias)
                self._check_existing(kind, col)
                idx = self._vector_index(col)
                if idx is not None:
                    # search with the metric the collection is indexed with (another metric is
                    # an error in Milvus); distances are converted accordingly
                    self._index_names[kind] = idx.index_name
                    self._metric[kind] = str(idx.params.get("metric_type", "L2")).upper()
                    self._itype[kind] = str(idx.params.get("index_type", "")).upper()
            elif create:
                col = Collection(
                    name, schema=self._schema(kind), using=self._alias, shards_num=1,
                    consistency_level="Bounded", timeout=DDL_TIMEOUT,
                )
                self._written[kind] = _IdSet()
            else:
                return None
        except Exception as exc:  # noqa: BLE001
            raise self._wrap(f"opening collection {name!r}", exc) from exc
        self._cols[kind] = col
        return col

    def _need(self, kind: str) -> Any:
        col = self._col(kind)
        if col is None:
            raise StoreError(
                f"Milvus collection {self.names[kind]!r} does not exist at {self.uri} "
                f"(KG {self.kg!r} not loaded with model {self.model!r}?)"
            )
        return col

    def _search_params(self, kind: str, limit: int) -> dict[str, Any]:
        itype = self._itype.get(kind) or self.index["index_type"]
        params: dict[str, Any] = {}
        extra = self.index.get("search_params")
        if itype == "HNSW":
            # ef floor 256: recall@16 against exact search 0.993 -> 0.997 on MetaQA (M=32, efC=128)
            params["ef"] = min(max(8 * limit, 256, limit), EF_MAX)
        elif itype.startswith("IVF") or itype == "SCANN":
            params["nprobe"] = 32
        elif itype == "DISKANN":
            params["search_list"] = min(max(2 * limit, 100), 65535)
        if extra:
            params.update(extra)
        return {"metric_type": self._metric.get(kind, self.index["metric_type"]), "params": params}

    def _to_distances(self, kind: str, scores: Iterable[float]) -> list[float]:
        if self._metric.get(kind, self.index["metric_type"]) == "L2":
            return [math.sqrt(s) if s > 0.0 else 0.0 for s in scores]
        # IP / COSINE on normalized vectors: ||a-b||^2 = 2 - 2 cos
        return [math.sqrt(max(0.0, 2.0 - 2.0 * s)) for s in scores]

    def _as_matrix(self, vectors: Any) -> np.ndarray:
        arr = np.asarray(vectors, dtype=np.float32)
        if arr.ndim == 1:
            arr = arr.reshape(1, -1)
        if arr.ndim != 2 or (arr.shape[0] and arr.shape[1] != self.dim):
            raise ValueError(f"expected vectors of shape (n, {self.dim}), got {arr.shape}")
        return np.ascontiguousarray(arr)

    # ------------------------------------------------------------------ schema
    def ensure_collections(self) -> None:
        """Create the three collections if missing; check the dim of existing ones."""
        for kind in KINDS:
            self._col(kind, create=True)

    def existing_kinds(self) -> list[str]:
        """The kinds whose collection exists (checked against this store's dim and model); creates nothing."""
        return [kind for kind in KINDS if self._col(kind) is not None]

    # ------------------------------------------------------------------ writes
    def upsert(
        self,
        kind: str,
        ids: Sequence[int],
        vectors: np.ndarray,
        names: Sequence[str] | None = None,
        owners: Sequence[int] | None = None,
    ) -> None:
        """Insert or replace rows by primary key, in batches of 10k rows (``names`` for every kind but entities;
        ``owners``, the entity of each alias, for aliases)."""
        self._check_kind(kind)
        ids_arr = np.asarray(ids, dtype=np.int64).reshape(-1)
        vecs = self._as_matrix(vectors)
        if len(ids_arr) != len(vecs):
            raise ValueError(f"{len(ids_arr)} ids but {len(vecs)} vectors")
        if kind != "entities":
            if names is None:
                raise ValueError(f"{kind} need names")
            names = list(names)
            if len(names) != len(ids_arr):
                raise ValueError(f"{len(ids_arr)} ids but {len(names)} names")
        own = None
        if kind == ALIASES:
            if owners is None or len(owners) != len(ids_arr):
                raise ValueError("aliases need the eid of their entity (owners), one per id")
            own = np.asarray(owners, dtype=np.int64).reshape(-1)
        if not len(ids_arr):
            return
        # a pk twice in one call: keep the last row (what sequential upserts would leave)
        _, last = np.unique(ids_arr[::-1], return_index=True)
        if len(last) != len(ids_arr):
            keep = np.sort(len(ids_arr) - 1 - last)
            ids_arr, vecs = ids_arr[keep], vecs[keep]
            if names is not None:
                names = [names[i] for i in keep]
            if own is not None:
                own = own[keep]
        self._col(kind, create=True)
        name = self.names[kind]
        is_new = self._new_rows(kind, ids_arr)
        for insert in (True, False):
            sel = np.flatnonzero(is_new == insert)
            for start in range(0, len(sel), BATCH):
                rows = sel[start : start + BATCH]
                request = self._mutation_request(
                    kind, ids_arr[rows], vecs[rows],
                    None if names is None else [names[i] for i in rows], insert=insert,
                    owners=None if own is None else own[rows],
                )
                self._send_mutation(name, request, insert=insert)
        self._mark_written(kind, ids_arr)

    def delete(self, kind: str, ids: Sequence[int]) -> None:
        """Delete the rows of these primary keys (missing ones are ignored), in batches."""
        self._check_kind(kind)
        wanted = np.unique(np.asarray(ids, dtype=np.int64).reshape(-1))
        if not len(wanted) or self._col(kind) is None:
            return
        col = self._col(kind)
        pk = _PK[kind]
        for start in range(0, len(wanted), QUERY_BATCH):
            chunk = wanted[start : start + QUERY_BATCH].tolist()
            try:
                col.delete(f"{pk} in {chunk}", timeout=DATA_TIMEOUT)
            except Exception as exc:  # noqa: BLE001
                raise self._wrap(f"deleting from {self.names[kind]!r}", exc) from exc

    def get_names(self, kind: str, ids: Sequence[int]) -> dict[int, str]:
        """The stored names (what the vectors were embedded from) of these relation or type ids."""
        self._check_kind(kind)
        if kind == "entities":
            raise ValueError("entity rows have no name field")
        wanted = np.unique(np.asarray(ids, dtype=np.int64).reshape(-1))
        out: dict[int, str] = {}
        if not len(wanted) or self._col(kind) is None:
            return out
        pk = _PK[kind]
        for start in range(0, len(wanted), QUERY_BATCH):
            chunk = wanted[start : start + QUERY_BATCH].tolist()
            for r in self._query(kind, f"{pk} in {chunk}", [pk, _NAME], "Strong"):
                out[int(r[pk])] = str(r[_NAME])
        return out

    def _new_rows(self, kind: str, ids: np.ndarray) -> np.ndarray:
        """Mask of rows whose pk is surely not stored: pks never written to a collection this
        store created.  Those are inserted, the rest upserted.  An upsert is a delete plus an
        insert in Milvus: its delete records make compaction rewrite the segment later, and the
        segment's index is then built a second time (measured: 15 s more for 43k rows)."""
        written = self._written.get(kind)
        if written is None:
            return np.zeros(len(ids), dtype=bool)
        return ~written.contains(ids)

    def _mark_written(self, kind: str, ids: np.ndarray) -> None:
        written = self._written.get(kind)
        if written is not None:
            written.add(ids)

    def _mutation_request(
        self, kind: str, ids: np.ndarray, vecs: np.ndarray, names: Sequence[str] | None,
        insert: bool = False, owners: np.ndarray | None = None,
    ) -> Any:
        """An Insert/UpsertRequest built straight from the arrays.

        pymilvus' own conversion walks every float in Python (about 2-4 s per 10k x 384 rows on
        this machine); here the vector column is handed to protobuf as one packed buffer.
        """
        from pymilvus.grpc_gen import milvus_pb2, schema_pb2

        cls = milvus_pb2.InsertRequest if insert else milvus_pb2.UpsertRequest
        request = cls(collection_name=self.names[kind], num_rows=len(ids))
        fd = request.fields_data.add(type=schema_pb2.Int64, field_name=_PK[kind])
        fd.scalars.long_data.data.extend(ids.tolist())
        if owners is not None:
            fd = request.fields_data.add(type=schema_pb2.Int64, field_name=_OWNER)
            fd.scalars.long_data.data.extend(np.asarray(owners, dtype=np.int64).tolist())
        if names is not None:
            fd = request.fields_data.add(type=schema_pb2.VarChar, field_name=_NAME)
            fd.scalars.string_data.data.extend(fit_varchar(str(n)) for n in names)
        fd = request.fields_data.add(type=schema_pb2.FloatVector, field_name=_VEC)
        fd.vectors.dim = self.dim
        raw = np.ascontiguousarray(vecs, dtype="<f4").tobytes()
        # FloatArray{repeated float data = 1} in wire format: tag 0x0a, varint length, packed floats
        fd.vectors.float_vector.MergeFromString(b"\x0a" + _varint(len(raw)) + raw)
        return request

    def _send_mutation(self, name: str, request: Any, insert: bool = False) -> None:
        import grpc
        from pymilvus.client import ts_utils
        from pymilvus.client.utils import check_status

        delay = 0.2
        for attempt in range(4):
            try:
                rpc = self._conn._stub.Insert if insert else self._conn._stub.Upsert
                response = rpc(request, timeout=DATA_TIMEOUT)
                check_status(response.status)
                ts_utils.update_collection_ts(name, response.timestamp)
                return
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.UNAVAILABLE and attempt < 3:
                    time.sleep(delay)
                    delay *= 3
                    continue
                raise self._wrap(f"upsert into {name!r}", exc) from exc
            except Exception as exc:  # noqa: BLE001
                raise self._wrap(f"upsert into {name!r}", exc) from exc

    # ------------------------------------------------------------------ index + load
    def _vector_index(self, col: Any) -> Any:
        """The index on the vector field (Milvus Lite also indexes the pk), or None."""
        for idx in col.indexes:
            if idx.field_name == _VEC:
                return idx
        return None

    def _ensure_index(self, kind: str, col: Any) -> None:
        wanted = {
            "index_type": self.index["index_type"],
            "metric_type": self.index["metric_type"],
            "params": dict(self.index.get("params") or {}),
        }
        try:
            current_idx = self._vector_index(col)
            if current_idx is not None and not self._explicit_index:
                # the default settings adopt whatever index a collection already has (an earlier
                # load's, maybe under older defaults): reloading never rebuilds it
                self._index_names[kind] = current_idx.index_name
                self._metric[kind] = str(current_idx.params.get("metric_type", "L2")).upper()
                self._itype[kind] = str(current_idx.params.get("index_type", "")).upper()
                return
            if current_idx is not None:
                current = current_idx.params
                cur_params = current.get("params", {})
                if isinstance(cur_params, str):
                    cur_params = json.loads(cur_params)
                same = (
                    str(current.get("index_type", "")).upper() == wanted["index_type"]
                    and str(current.get("metric_type", "")).upper() == wanted["metric_type"]
                    and {k: str(v) for k, v in cur_params.items()}
                    == {k: str(v) for k, v in wanted["params"].items()}
                )
                if same:
                    self._index_names[kind] = current_idx.index_name
                    return
                col.release(timeout=DDL_TIMEOUT)
                self._loaded.discard(kind)
                col.drop_index(index_name=current_idx.index_name, timeout=DDL_TIMEOUT)
            col.create_index(_VEC, wanted, index_name=_VEC_INDEX, timeout=DDL_TIMEOUT, sync=False)
            self._index_names[kind] = _VEC_INDEX
            self._metric[kind] = wanted["metric_type"]
            self._itype[kind] = wanted["index_type"]
        except Exception as exc:  # noqa: BLE001
            raise self._wrap(f"creating the index of {self.names[kind]!r}", exc) from exc

    def _wait_index(self, kind: str, timeout: float = INDEX_TIMEOUT) -> None:
        from pymilvus import utility

        name = self.names[kind]
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            try:
                prog = utility.index_building_progress(
                    name, index_name=self._index_names.get(kind, ""), using=self._alias,
                    timeout=DDL_TIMEOUT,
                )
            except Exception as exc:  # noqa: BLE001
                raise self._wrap(f"index progress of {name!r}", exc) from exc
            pending = prog.get("pending_index_rows")
            if pending is None:  # servers that do not report it
                pending = max(0, int(prog.get("total_rows", 0)) - int(prog.get("indexed_rows", 0)))
            if int(pending) == 0 and prog.get("state") != "Failed":
                return
            if prog.get("state") == "Failed":
                raise StoreError(f"Milvus failed to build the index of {name!r}: {prog}")
            if time.monotonic() > deadline:
                raise StoreError(f"the index of {name!r} is not built after {timeout:.0f} s: {prog}")
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)

    def _load(self, kind: str, col: Any) -> None:
        try:
            col.load(timeout=LOAD_TIMEOUT)
        except Exception as exc:  # noqa: BLE001
            raise self._wrap(f"loading {self.names[kind]!r}", exc) from exc
        self._loaded.add(kind)

    def _is_loaded(self, kind: str) -> bool:
        if kind in self._loaded:
            return True
        from pymilvus import utility

        try:
            state = utility.load_state(self.names[kind], using=self._alias, timeout=DDL_TIMEOUT)
        except Exception as exc:  # noqa: BLE001
            raise self._wrap(f"load state of {self.names[kind]!r}", exc) from exc
        if getattr(state, "name", str(state)).endswith("Loaded"):
            self._loaded.add(kind)
            return True
        return False

    def _ensure_loaded(self, kind: str) -> Any:
        """The collection, loaded (creating its index first if it has none).

        Does not wait for the index to cover every row (that is finalize's job): segments not
        indexed yet are searched exhaustively, which is exact.
        """
        col = self._need(kind)
        if not self._is_loaded(kind):
            try:
                has_index = self._vector_index(col) is not None
            except Exception as exc:  # noqa: BLE001
                raise self._wrap(f"describing the index of {self.names[kind]!r}", exc) from exc
            if not has_index:
                self._ensure_index(kind, col)
            self._load(kind, col)
        return col

    def finalize(self, kind: str | None = None) -> None:
        """Flush, build the index, wait until every row is indexed, load.  Safe to call again.

        The kinds are finalized at once, one thread each: most of a small collection's time here is
        Milvus' own waiting (flush, index scheduling, load), which then overlaps the entities' index build.
        """
        kinds = (*KINDS, *((ALIASES,) if self._col(ALIASES) is not None else ())) if kind is None else (kind,)
        for k in kinds:
            self._check_kind(k)
            self._col(k, create=True)
        if len(kinds) == 1:
            self._finalize_one(kinds[0])
            return
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(kinds), thread_name_prefix="isorag-finalize") as pool:
            futures = [pool.submit(self._finalize_one, k) for k in kinds]
        for f in futures:
            f.result()

    def ensure_ready(self) -> None:
        """Finalize (:meth:`finalize`) the kinds whose collection is not loaded yet; rows written into a loaded
        collection are searchable as they are (a change set's few rows need no flush or index build)."""
        for k in (*KINDS, *((ALIASES,) if self._col(ALIASES) is not None else ())):
            if not self._is_loaded(k):
                self.finalize(k)

    def _segments(self, kind: str) -> int:
        """Number of flushed segments of a collection (2 when the server cannot tell: compact then)."""
        try:
            infos = self._conn.get_persistent_segment_infos(self.names[kind], timeout=DDL_TIMEOUT)
        except Exception:  # noqa: BLE001 - an optimization only: compact as before
            return 2
        return sum(1 for i in infos if getattr(i, "num_rows", 1) > 0)

    def _finalize_one(self, k: str) -> None:
        col = self._col(k, create=True)
        try:
            col.flush(timeout=DATA_TIMEOUT)
            if self._vector_index(col) is None and not self.lite and self._segments(k) > 1:
                # First build: merge the bulk load's small segments before indexing them, or
                # Milvus' compaction merges them after and the index is built twice.  (Only
                # servers with dataCoord.compaction.indexBasedCompaction=false, like the
                # embedded one, compact segments that have no index; elsewhere a no-op.)
                # A single segment has nothing to merge: skipped (6-10 s at 43k rows).
                col.compact(timeout=DDL_TIMEOUT)
                col.wait_for_compaction_completed(timeout=DATA_TIMEOUT)
        except Exception as exc:  # noqa: BLE001
            raise self._wrap(f"flushing {self.names[k]!r}", exc) from exc
        self._ensure_index(k, col)
        self._wait_index(k)
        self._load(k, col)

    # ------------------------------------------------------------------ reads
    def _raw_search(
        self, kind: str, mat: np.ndarray, limit: int, output_fields: list[str] | None
    ) -> Any:
        """One Search RPC; returns the protobuf SearchResultData."""
        from pymilvus.client.prepare import Prepare
        from pymilvus.client.utils import check_status

        name = self.names[kind]
        request = Prepare.search_requests_with_expr(
            name, list(mat), _VEC, self._search_params(kind, limit), limit, None, None,
            output_fields, -1,
        )
        last_exc: BaseException | None = None
        for attempt in range(2):
            try:
                response = self._conn._stub.Search(request, timeout=SEARCH_TIMEOUT)
                check_status(response.status)
                return response.results
            except Exception as exc:  # noqa: BLE001
                last_exc = exc
                text = str(exc).lower()
                if attempt == 0 and ("not loaded" in text or "not load" in text):
                    self._loaded.discard(kind)
                    self._ensure_loaded(kind)
                    continue
                break
        raise self._wrap(f"search in {name!r}", last_exc) from last_exc  # type: ignore[arg-type]

    def search(self, kind: str, vectors: np.ndarray, limit: int) -> list[list[tuple[int, float]]]:
        """Nearest rows for each query vector, ``[(id, euclidean_distance)]`` ascending.

        One Search RPC for up to :data:`SEARCH_BATCH` vectors (more are split: Milvus refuses over 16,384 in one).
        ``limit`` is capped at 16,384 (Milvus' cap).
        """
        self._check_kind(kind)
        mat = self._as_matrix(vectors)
        limit = min(int(limit), TOPK_MAX)
        if limit <= 0 or not len(mat):
            return [[] for _ in range(len(mat))]
        if kind not in self._cols:
            self._need(kind)
        out: list[list[tuple[int, float]]] = []
        for start in range(0, len(mat), SEARCH_BATCH):
            res = self._raw_search(kind, mat[start: start + SEARCH_BATCH], limit, None)
            ids = res.ids.int_id.data
            dists = self._to_distances(kind, res.scores)
            pos = 0
            for k in res.topks:
                out.append(list(zip(ids[pos : pos + k], dists[pos : pos + k])))
                pos += k
        return out

    def search_aliases(self, vectors: np.ndarray, limit: int) -> list[list[tuple[int, str, float]]]:
        """For each query vector, the ``limit`` nearest aliases as ``(eid of their entity, alias, distance)``,
        nearest first; nothing where the KG has no aliases collection."""
        mat = self._as_matrix(vectors)
        limit = min(int(limit), TOPK_MAX)
        if limit <= 0 or not len(mat) or self._col(ALIASES) is None:
            return [[] for _ in range(len(mat))]
        out: list[list[tuple[int, str, float]]] = []
        for start in range(0, len(mat), SEARCH_BATCH):
            res = self._raw_search(ALIASES, mat[start: start + SEARCH_BATCH], limit, [_OWNER, _NAME])
            dists = self._to_distances(ALIASES, res.scores)
            owners: Sequence[int] = []
            names: Sequence[str] = []
            for field in res.fields_data:
                if field.field_name == _OWNER:
                    owners = field.scalars.long_data.data
                elif field.field_name == _NAME:
                    names = field.scalars.string_data.data
            pos = 0
            for k in res.topks:
                out.append([(int(owners[i]), names[i] if i < len(names) else "", dists[i])
                            for i in range(pos, pos + k) if i < len(owners)])
                pos += k
        return out

    def search_names(
        self, kind: str, vectors: np.ndarray, limit: int
    ) -> list[list[tuple[int, str, float]]]:
        """Like :meth:`search` for relations/types, with each row's name."""
        self._check_kind(kind)
        if kind == "entities":
            raise ValueError("entities have no names in Milvus (they are in Neo4j)")
        mat = self._as_matrix(vectors)
        limit = min(int(limit), TOPK_MAX)
        if limit <= 0 or not len(mat):
            return [[] for _ in range(len(mat))]
        if kind not in self._cols:
            self._need(kind)
        out: list[list[tuple[int, str, float]]] = []
        for start in range(0, len(mat), SEARCH_BATCH):
            res = self._raw_search(kind, mat[start: start + SEARCH_BATCH], limit, [_NAME])
            ids = res.ids.int_id.data
            dists = self._to_distances(kind, res.scores)
            names: Sequence[str] = []
            for field in res.fields_data:
                if field.field_name == _NAME:
                    names = field.scalars.string_data.data
            pos = 0
            for k in res.topks:
                out.append(
                    [(ids[i], names[i] if i < len(names) else "", dists[i]) for i in range(pos, pos + k)]
                )
                pos += k
        return out

    def _query(self, kind: str, expr: str, fields: list[str], consistency: str) -> list[dict[str, Any]]:
        col = self._ensure_loaded(kind)
        try:
            return col.query(
                expr=expr, output_fields=fields, consistency_level=consistency, timeout=DATA_TIMEOUT
            )
        except Exception as exc:  # noqa: BLE001
            raise self._wrap(f"query on {self.names[kind]!r}", exc) from exc

    def existing_ids(self, kind: str, ids: Sequence[int]) -> set[int]:
        """Which of these primary keys are stored (strong consistency), e.g. to resume a load."""
        self._check_kind(kind)
        wanted = np.unique(np.asarray(ids, dtype=np.int64).reshape(-1))
        if not len(wanted):
            return set()
        if self._col(kind) is None:
            return set()
        written = self._written.get(kind)
        if written is not None:  # created by this store: every row in it was written through it
            return set(wanted[written.contains(wanted)].tolist())
        pk = _PK[kind]
        found: set[int] = set()
        for start in range(0, len(wanted), QUERY_BATCH):
            chunk = wanted[start : start + QUERY_BATCH].tolist()
            rows = self._query(kind, f"{pk} in {chunk}", [pk], "Strong")
            found.update(int(r[pk]) for r in rows)
        return found

    def get_vectors(self, kind: str, ids: Sequence[int]) -> dict[int, np.ndarray]:
        """The stored vectors of these primary keys (missing ones are left out)."""
        self._check_kind(kind)
        wanted = np.unique(np.asarray(ids, dtype=np.int64).reshape(-1))
        out: dict[int, np.ndarray] = {}
        if not len(wanted):
            return out
        pk = _PK[kind]
        for start in range(0, len(wanted), QUERY_BATCH):
            chunk = wanted[start : start + QUERY_BATCH].tolist()
            rows = self._query(kind, f"{pk} in {chunk}", [pk, _VEC], "Session")
            for r in rows:
                out[int(r[pk])] = np.asarray(r[_VEC], dtype=np.float32)
        return out

    def count(self, kind: str) -> int:
        """Number of rows (exact, strong consistency; upserted pks count once)."""
        self._check_kind(kind)
        if self._col(kind) is None:
            return 0
        rows = self._query(kind, "", ["count(*)"], "Strong")
        return int(rows[0]["count(*)"]) if rows else 0

    def iter_ids(self, kind: str, batch: int = QUERY_BATCH) -> Iterable[np.ndarray]:
        """Every stored primary key of ``kind``, in batches (a pk stored twice comes twice)."""
        self._check_kind(kind)
        if self._col(kind) is None:
            return
        col = self._ensure_loaded(kind)
        pk = _PK[kind]
        try:
            it = col.query_iterator(batch_size=batch, expr=f"{pk} >= {-(1 << 63) + 1}", output_fields=[pk],
                                    consistency_level="Strong", timeout=DATA_TIMEOUT)
            while rows := it.next():
                yield np.fromiter((r[pk] for r in rows), dtype=np.int64, count=len(rows))
            it.close()
        except Exception as exc:  # noqa: BLE001
            raise self._wrap(f"reading the ids of {self.names[kind]!r}", exc) from exc

    #: rows one query returns at most (Milvus' result cap)
    query_limit = 16_384

    def all_ids(self, kind: str) -> list[int]:
        """Every stored primary key of a collection of at most :attr:`query_limit` rows, in one query (strong
        consistency); a larger one: :meth:`iter_ids`."""
        self._check_kind(kind)
        if self._col(kind) is None:
            return []
        pk = _PK[kind]
        rows = self._query(kind, f"{pk} >= {-(1 << 63) + 1}", [pk], "Strong")
        return [int(r[pk]) for r in rows]

    def excess_rows(self, kind: str) -> int:
        """Rows beyond one per primary key. Milvus keeps a pk inserted twice twice (two processes loading one KG at
        once did that before loads took the KG's lease): ``count(*)`` counts both rows, a query returns one."""
        total = self.count(kind)
        return total - sum(len(ids) for ids in self.iter_ids(kind)) if total else 0

    def remove_duplicates(self, kind: str) -> int:
        """Keep one row of every primary key stored more than once; returns the rows removed.

        Milvus cannot name the duplicated pks (a query returns a pk once), but a filtered ``count(*)`` counts every
        row: the pks are scanned in sorted batches, and only a batch counting more rows than pks is rewritten
        (its rows read, deleted, inserted once)."""
        col = self._need(kind)
        pk = _PK[kind]
        fields = [pk, _VEC] + ([_NAME] if kind != "entities" else []) + ([_OWNER] if kind == ALIASES else [])
        parts = list(self.iter_ids(kind))  # 8 bytes an id: 80 MB at 10M rows
        ids = np.unique(np.concatenate(parts)) if parts else np.empty(0, np.int64)
        removed = 0
        for start in range(0, len(ids), QUERY_BATCH):
            chunk = ids[start: start + QUERY_BATCH].tolist()
            expr = f"{pk} in {chunk}"
            rows_stored = int(self._query(kind, expr, ["count(*)"], "Strong")[0]["count(*)"])
            if rows_stored <= len(chunk):
                continue
            rows = {int(r[pk]): r for r in self._query(kind, expr, fields, "Strong")}
            try:
                col.delete(expr, timeout=DATA_TIMEOUT)
            except Exception as exc:  # noqa: BLE001
                raise self._wrap(f"deleting duplicates from {self.names[kind]!r}", exc) from exc
            keep = np.asarray(sorted(rows), dtype=np.int64)
            vecs = np.stack([np.asarray(rows[i][_VEC], dtype=np.float32) for i in keep.tolist()])
            names = [rows[i][_NAME] for i in keep.tolist()] if kind != "entities" else None
            owners = np.asarray([rows[i][_OWNER] for i in keep.tolist()], np.int64) if kind == ALIASES else None
            self._send_mutation(self.names[kind], self._mutation_request(kind, keep, vecs, names, insert=True,
                                                                         owners=owners), insert=True)
            removed += rows_stored - len(keep)
        if removed:
            try:
                col.flush(timeout=DATA_TIMEOUT)
            except Exception as exc:  # noqa: BLE001
                raise self._wrap(f"flushing {self.names[kind]!r}", exc) from exc
        return removed

    # ------------------------------------------------------------------ lifecycle
    def drop(self) -> None:
        """Drop this (kg, model)'s collections."""
        from pymilvus import utility

        for kind in ALL_KINDS:
            name = self.names[kind]
            try:
                if utility.has_collection(name, using=self._alias, timeout=DDL_TIMEOUT):
                    utility.drop_collection(name, using=self._alias, timeout=DDL_TIMEOUT)
            except Exception as exc:  # noqa: BLE001
                raise self._wrap(f"dropping {name!r}", exc) from exc
        self._cols.clear()
        self._loaded.clear()
        self._index_names.clear()
        self._written.clear()
        self._metric.clear()
        self._itype.clear()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        from pymilvus import connections

        try:
            connections.remove_connection(self._alias)
        except Exception:  # noqa: BLE001
            pass
