"""The base of :class:`engine.stores.vectors.VectorStore`: the connection, the three collections of a (KG, model),
their schema and the checks an existing collection passes before it is used."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from engine._errors import ConfigError, SchemaMismatchError, StoreError, StoreUnavailableError
from engine._secrets import register

from ._common import (ALIASES, ALL_KINDS, CONNECT_TIMEOUT, DDL_TIMEOUT, DEFAULT_INDEX, DIGEST_FIELD, KINDS,
                      LITE_INDEX, NAME_FIELD, OWNER_FIELD,
                      NAME_MAX, PK_FIELD, VECTOR_FIELD, IdSet, collection_name, is_lite, model_key,
                      unavailable_code)


def index_settings(index: dict[str, Any] | None, lite: bool) -> dict[str, Any]:
    """The index a store builds: the default (HNSW on a server, FLAT on Milvus Lite) with ``index``'s keys over it."""
    default = LITE_INDEX if lite else DEFAULT_INDEX
    base = dict(default)
    if index:
        base.update({k: v for k, v in index.items() if k != "params"})
        if "params" in index:
            base["params"] = dict(index["params"] or {})
        elif str(index.get("index_type", base["index_type"])).upper() != str(default["index_type"]):
            base["params"] = {}  # the default's HNSW params do not fit another index type
    base["metric_type"] = str(base.get("metric_type", "L2")).upper()
    base["index_type"] = str(base.get("index_type", "HNSW")).upper()
    if base["metric_type"] not in ("L2", "IP", "COSINE"):
        raise ConfigError(f"unsupported Milvus metric {base['metric_type']!r} (L2, IP or COSINE)")
    return base


class Collections:
    """The connection to Milvus and the collections of one KG under one embedding model."""

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
        self.lite = is_lite(self.uri)
        self.index = index_settings(index, self.lite)
        self._explicit_index = bool(index)
        self.names = {kind: collection_name(kg, model, kind) for kind in ALL_KINDS}
        self._alias = f"isorag-vs-{uuid.uuid4().hex[:12]}"
        self._cols: dict[str, Any] = {}
        self._loaded: set[str] = set()
        self._index_names: dict[str, str] = {}
        self._metric: dict[str, str] = {}  # metric of each collection's existing index
        self._itype: dict[str, str] = {}  # and its type
        # pks written so far to collections this store created (see _new_rows, existing_ids)
        self._written: dict[str, IdSet] = {}
        self._digests: dict[str, bool] = {}  # whether each collection records text digests
        self._last_ts = 0  # the Milvus timestamp of this store's last write (see last_write_ts)
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
                import milvus_lite  # noqa: F401 - only whether it is installed  # type: ignore[import-untyped]
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
        except Exception as exc:
            reason = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            raise StoreUnavailableError(
                "Milvus", self.uri, f"{reason} (after {time.monotonic() - t0:.1f} s)"
            ) from exc
        self._conn = connections._fetch_handler(self._alias)

    def _wrap(self, what: str, exc: BaseException) -> StoreError:
        reason = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        if isinstance(exc, StoreError):
            return exc
        if unavailable_code(exc):
            return StoreUnavailableError("Milvus", self.uri, f"{what}: {reason}")
        return StoreError(f"Milvus {what} failed ({self.uri}): {reason}")

    def _check_kind(self, kind: str) -> None:
        if kind not in ALL_KINDS:
            raise ValueError(f"kind must be one of {ALL_KINDS}, not {kind!r}")

    def _schema(self, kind: str) -> Any:
        from pymilvus import CollectionSchema, DataType, FieldSchema

        fields = [FieldSchema(PK_FIELD[kind], DataType.INT64, is_primary=True, auto_id=False)]
        if kind == ALIASES:
            fields.append(FieldSchema(OWNER_FIELD, DataType.INT64))
        if kind != "entities":
            fields.append(FieldSchema(NAME_FIELD, DataType.VARCHAR, max_length=NAME_MAX))
        fields.append(FieldSchema(DIGEST_FIELD, DataType.INT64))
        fields.append(FieldSchema(VECTOR_FIELD, DataType.FLOAT_VECTOR, dim=self.dim))
        desc = json.dumps({"isorag": 1, "kg": self.kg, "model": self.model, "dim": self.dim, "kind": kind})
        return CollectionSchema(fields, description=desc)

    def _check_existing(self, kind: str, col: Any) -> None:
        name = self.names[kind]
        fields = {f.name: f for f in col.schema.fields}
        vec = fields.get(VECTOR_FIELD)
        stored_dim = None
        if vec is not None:
            stored_dim = (vec.params or {}).get("dim")
        if vec is None or stored_dim is None:
            raise SchemaMismatchError(
                f"Milvus collection {name!r} has no float vector field {VECTOR_FIELD!r}; it was not made by isorag"
            )
        if int(stored_dim) != self.dim:
            raise SchemaMismatchError(
                f"Milvus collection {name!r} stores {stored_dim}-d vectors but the embedding model "
                f"{self.model!r} gives {self.dim}-d vectors: use the model the KG was loaded with, "
                f"or drop and reload its vectors"
            )
        if PK_FIELD[kind] not in fields or (kind != "entities" and NAME_FIELD not in fields) or (
                kind == ALIASES and OWNER_FIELD not in fields):
            raise SchemaMismatchError(
                f"Milvus collection {name!r} lacks the fields {PK_FIELD[kind]!r}/{NAME_FIELD!r} isorag expects"
            )
        try:
            meta = json.loads(col.schema.description or "{}")
        except ValueError:
            meta = {}
        stored_model = meta.get("model") if isinstance(meta, dict) else None
        if stored_model is not None and model_key(stored_model) != model_key(self.model):
            raise SchemaMismatchError(
                f"Milvus collection {name!r} holds vectors of model {stored_model!r}, not {self.model!r}"
            )
        # a collection made before rows recorded the digest of their text has no such field: its rows are checked
        # by embedding them again (check --deep)
        self._digests[kind] = DIGEST_FIELD in fields

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
                self._written[kind] = IdSet()
                self._digests[kind] = True
            else:
                return None
        except Exception as exc:
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

    @staticmethod
    def _vector_index(col: Any) -> Any:
        """The index on the vector field (Milvus Lite also indexes the pk), or None."""
        for idx in col.indexes:
            if idx.field_name == VECTOR_FIELD:
                return idx
        return None

    def has_digests(self, kind: str) -> bool:
        """Whether the rows of ``kind`` record the digest of the text they were embedded from
        (:func:`engine.stores.texts.text_digest`); False for a missing collection or one made before digests."""
        return self._col(kind) is not None and self._digests.get(kind, False)

    def ensure_collections(self) -> None:
        """Create the three collections if missing; check the dim of existing ones."""
        for kind in KINDS:
            self._col(kind, create=True)

    def kinds_made(self) -> tuple[str, ...]:
        """The kinds every KG has, and the aliases where this KG's collection of them exists."""
        return (*KINDS, *((ALIASES,) if self._col(ALIASES) is not None else ()))

    def existing_kinds(self) -> list[str]:
        """The kinds whose collection exists (checked against this store's dim and model); creates nothing."""
        return [kind for kind in ALL_KINDS if self._col(kind) is not None]
