"""Reads of the vectors (:class:`engine.stores.vectors.VectorStore`): searches, look-ups by id, counts, every id
and every row's text digest. Searches and look-ups use Session consistency: they see this process's writes, and
those of another process once :meth:`Reads.observe` was told the Milvus timestamp of its last write (the KG's
version node records it)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ._common import (ALIASES, ALL_KINDS, DATA_TIMEOUT, DIGEST_FIELD, EF_MAX, NAME_FIELD, OWNER_FIELD, PK_FIELD,
                      QUERY_BATCH, SEARCH_BATCH, SEARCH_TIMEOUT,
                      TOPK_MAX, VECTOR_FIELD)
from ._indexing import Indexing


class Reads(Indexing):
    """Searches and look-ups."""

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

    # ------------------------------------------------------------------ reads
    def _raw_search(
        self, kind: str, mat: np.ndarray, limit: int, output_fields: list[str] | None
    ) -> Any:
        """One Search RPC; returns the protobuf SearchResultData."""
        from pymilvus.client.prepare import Prepare
        from pymilvus.client.utils import check_status

        name = self.names[kind]
        request = Prepare.search_requests_with_expr(
            name, list(mat), VECTOR_FIELD, self._search_params(kind, limit), limit, None, None,
            output_fields, -1, consistency_level="Session",
        )
        last_exc: BaseException | None = None
        for attempt in range(2):
            try:
                response = self._conn._stub.Search(request, timeout=SEARCH_TIMEOUT)
                check_status(response.status)
                return response.results
            except Exception as exc:  # noqa: BLE001 - any failure of a search attempt is retried, then reported typed
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

    def alias_rows(self, eids: Sequence[int]) -> dict[int, int]:
        """aid -> eid of the alias rows of these entities (none where the KG has no aliases collection)."""
        wanted = sorted({int(e) for e in eids})
        out: dict[int, int] = {}
        if not wanted or self._col(ALIASES) is None:
            return out
        for start in range(0, len(wanted), QUERY_BATCH):
            chunk = wanted[start: start + QUERY_BATCH]
            for r in self._query(ALIASES, f"{OWNER_FIELD} in {chunk}", [PK_FIELD[ALIASES], OWNER_FIELD], "Strong"):
                out[int(r[PK_FIELD[ALIASES]])] = int(r[OWNER_FIELD])
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
            res = self._raw_search(ALIASES, mat[start: start + SEARCH_BATCH], limit, [OWNER_FIELD, NAME_FIELD])
            dists = self._to_distances(ALIASES, res.scores)
            owners: Sequence[int] = []
            names: Sequence[str] = []
            for field in res.fields_data:
                if field.field_name == OWNER_FIELD:
                    owners = field.scalars.long_data.data
                elif field.field_name == NAME_FIELD:
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
            res = self._raw_search(kind, mat[start: start + SEARCH_BATCH], limit, [NAME_FIELD])
            ids = res.ids.int_id.data
            dists = self._to_distances(kind, res.scores)
            names: Sequence[str] = []
            for field in res.fields_data:
                if field.field_name == NAME_FIELD:
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
        except Exception as exc:
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
        if written is not None:
            # created by this store: a key it never wrote is not there (a fresh load asks nothing); one it wrote
            # may have been deleted since (a change set or a sync, maybe of another process): Milvus says
            wanted = wanted[written.contains(wanted)]
            if not len(wanted):
                return set()
        pk = PK_FIELD[kind]
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
        pk = PK_FIELD[kind]
        for start in range(0, len(wanted), QUERY_BATCH):
            chunk = wanted[start : start + QUERY_BATCH].tolist()
            rows = self._query(kind, f"{pk} in {chunk}", [pk, VECTOR_FIELD], "Session")
            for r in rows:
                out[int(r[pk])] = np.asarray(r[VECTOR_FIELD], dtype=np.float32)
        return out

    def count(self, kind: str) -> int:
        """Number of rows (exact, strong consistency; upserted pks count once)."""
        self._check_kind(kind)
        if self._col(kind) is None:
            return 0
        rows = self._query(kind, "", ["count(*)"], "Strong")
        return int(rows[0]["count(*)"]) if rows else 0

    def _scan(self, kind: str, fields: list[str], batch: int, what: str) -> Iterator[list[dict[str, Any]]]:
        """Every row of ``kind`` (its ``fields``), in batches (strong consistency; a pk stored twice comes once)."""
        self._check_kind(kind)
        if self._col(kind) is None:
            return
        col = self._ensure_loaded(kind)
        pk = PK_FIELD[kind]
        try:
            it = col.query_iterator(batch_size=batch, expr=f"{pk} >= {-(1 << 63) + 1}", output_fields=fields,
                                    consistency_level="Strong", timeout=DATA_TIMEOUT)
            while rows := it.next():
                yield rows
            it.close()
        except Exception as exc:
            raise self._wrap(f"reading the {what} of {self.names[kind]!r}", exc) from exc

    def iter_ids(self, kind: str, batch: int = QUERY_BATCH) -> Iterable[np.ndarray]:
        """Every stored primary key of ``kind``, in batches (a pk stored twice comes once: ``count`` tells)."""
        self._check_kind(kind)
        pk = PK_FIELD[kind]
        for rows in self._scan(kind, [pk], batch, "ids"):
            yield np.fromiter((r[pk] for r in rows), dtype=np.int64, count=len(rows))

    def iter_vectors(self, kind: str, batch: int = QUERY_BATCH) -> Iterable[tuple[np.ndarray, np.ndarray]]:
        """``(ids, vectors)`` of every stored row of ``kind`` in batches (int64 ids, float32 rows of the
        collection's dimension: the very floats :meth:`get_vectors` returns); strong consistency, a pk stored twice
        comes once. Nothing where the collection does not exist."""
        pk = PK_FIELD[kind]
        for rows in self._scan(kind, [pk, VECTOR_FIELD], batch, "vectors"):
            ids = np.fromiter((r[pk] for r in rows), dtype=np.int64, count=len(rows))
            mat = (np.asarray([r[VECTOR_FIELD] for r in rows], dtype=np.float32) if rows
                   else np.zeros((0, self.dim), dtype=np.float32))
            yield ids, mat.reshape(len(rows), self.dim)

    def iter_digests(self, kind: str, batch: int = QUERY_BATCH) -> Iterable[tuple[np.ndarray, np.ndarray]]:
        """``(ids, digests)`` of every stored row of ``kind`` in batches: the digest of the text each row was
        embedded from (:func:`engine.stores.texts.text_digest`). Nothing for a collection made before digests
        (:meth:`has_digests`)."""
        if not self.has_digests(kind):
            return
        pk = PK_FIELD[kind]
        for rows in self._scan(kind, [pk, DIGEST_FIELD], batch, "text digests"):
            yield (np.fromiter((r[pk] for r in rows), dtype=np.int64, count=len(rows)),
                   np.fromiter((r[DIGEST_FIELD] for r in rows), dtype=np.int64, count=len(rows)))

    def observe(self, ts: int) -> None:
        """Read, from now on, every row written until Milvus timestamp ``ts`` (another process's
        :attr:`~engine.stores.vectors.VectorStore.last_write_ts`): searches and look-ups wait, if they must, until
        the server has applied it. This process's own writes are read without it."""
        if not ts:
            return
        from pymilvus.client import ts_utils

        for kind in ALL_KINDS:
            ts_utils.update_collection_ts(self.names[kind], int(ts))

    #: rows one query returns at most (Milvus' result cap)
    query_limit = 16_384

    def all_ids(self, kind: str) -> list[int]:
        """Every stored primary key of a collection of at most :attr:`query_limit` rows, in one query (strong
        consistency); a larger one: :meth:`iter_ids`."""
        self._check_kind(kind)
        if self._col(kind) is None:
            return []
        pk = PK_FIELD[kind]
        rows = self._query(kind, f"{pk} >= {-(1 << 63) + 1}", [pk], "Strong")
        return [int(r[pk]) for r in rows]

    def excess_rows(self, kind: str) -> int:
        """Rows beyond one per primary key. Milvus keeps a pk inserted twice twice (two processes loading one KG at
        once did that before loads took the KG's lease): ``count(*)`` counts both rows, a query returns one."""
        total = self.count(kind)
        return total - sum(len(ids) for ids in self.iter_ids(kind)) if total else 0

    def get_names(self, kind: str, ids: Sequence[int]) -> dict[int, str]:
        """The stored names (what the vectors were embedded from) of these relation or type ids."""
        self._check_kind(kind)
        if kind == "entities":
            raise ValueError("entity rows have no name field")
        wanted = np.unique(np.asarray(ids, dtype=np.int64).reshape(-1))
        out: dict[int, str] = {}
        if not len(wanted) or self._col(kind) is None:
            return out
        pk = PK_FIELD[kind]
        for start in range(0, len(wanted), QUERY_BATCH):
            chunk = wanted[start : start + QUERY_BATCH].tolist()
            for r in self._query(kind, f"{pk} in {chunk}", [pk, NAME_FIELD], "Strong"):
                out[int(r[pk])] = str(r[NAME_FIELD])
        return out
