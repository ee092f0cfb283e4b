"""Writes of the vectors (:class:`engine.stores.vectors.VectorStore`): upserts built straight from the numpy arrays
(pymilvus converts every float in Python: 2-4 s per 10k x 384 batch here, against about 0.01 s), each row with the
digest of the text it was embedded from; deletes; duplicate rows removed."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.stores.texts import text_digest

from ._common import (ALIASES, BATCH, DATA_TIMEOUT, DIGEST_FIELD, NAME_FIELD, OWNER_FIELD, PK_FIELD, QUERY_BATCH,
                      VECTOR_FIELD,
                      fit_varchar, varint)
from ._reads import Reads


class Writes(Reads):
    """Upserts and deletes."""

    def upsert(self, kind: str, ids: Sequence[int], vectors: np.ndarray, names: Sequence[str] | None = None, *,
               texts: Sequence[str] | None = None, owners: Sequence[int] | None = None) -> None:
        """Insert or replace rows by primary key, in batches of 10k rows. ``texts``: what each vector was embedded
        from, whose digest the row records (default: ``names``, what relations and types embed; an entity row
        written without its text records 0, which no text has, so ``check`` embeds it again). Relations and types
        need ``names``; aliases ``names`` (the alias) and ``owners`` (its entity's eid)."""
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
        said = texts if texts is not None else names
        if said is not None and len(said) != len(ids_arr):
            raise ValueError(f"{len(ids_arr)} ids but {len(said)} texts")
        digests = np.asarray([text_digest(t) for t in said] if said is not None else np.zeros(len(ids_arr)),
                             dtype=np.int64)
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
            ids_arr, vecs, digests = ids_arr[keep], vecs[keep], digests[keep]
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
                    None if names is None else [names[i] for i in rows], insert=insert, digests=digests[rows],
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
        pk = PK_FIELD[kind]
        for start in range(0, len(wanted), QUERY_BATCH):
            chunk = wanted[start : start + QUERY_BATCH].tolist()
            try:
                col.delete(f"{pk} in {chunk}", timeout=DATA_TIMEOUT)
            except Exception as exc:
                raise self._wrap(f"deleting from {self.names[kind]!r}", exc) from exc
        written = self._written.get(kind)
        if written is not None:
            written.discard(wanted)
        self._deleted(kind)

    def _deleted(self, kind: str) -> None:
        """After a delete: Milvus 2.3 answers a delete without its timestamp, so one is taken from the server (a
        timestamp after the delete), for this process's reads and for :attr:`last_write_ts`."""
        from pymilvus.client import ts_utils
        from pymilvus.grpc_gen import milvus_pb2

        try:
            reply = self._conn._stub.AllocTimestamp(milvus_pb2.AllocTimestampRequest(), timeout=DATA_TIMEOUT)
            ts = int(reply.timestamp)
        except Exception:  # noqa: BLE001 - a server without the call (Milvus Lite): reads see the delete later
            return
        if ts:
            ts_utils.update_collection_ts(self.names[kind], ts)
            self._wrote(ts)

    def _wrote(self, ts: int) -> None:
        """Keep the Milvus timestamp of a write (see :meth:`last_write_ts`)."""
        self._last_ts = max(self._last_ts, int(ts or 0))

    @property
    def last_write_ts(self) -> int:
        """The Milvus timestamp of this store's last write (0: none). A reader in another process that passes it to
        :meth:`observe` reads every row written until then (the KG's version node carries it to readers)."""
        return self._last_ts

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
        insert: bool = False, digests: np.ndarray | None = None, owners: np.ndarray | None = None,
    ) -> Any:
        """An Insert/UpsertRequest built straight from the arrays.

        pymilvus' own conversion walks every float in Python (about 2-4 s per 10k x 384 rows on
        this machine); here the vector column is handed to protobuf as one packed buffer.
        """
        from pymilvus.grpc_gen import milvus_pb2, schema_pb2

        cls = milvus_pb2.InsertRequest if insert else milvus_pb2.UpsertRequest
        request = cls(collection_name=self.names[kind], num_rows=len(ids))
        fd = request.fields_data.add(type=schema_pb2.Int64, field_name=PK_FIELD[kind])
        fd.scalars.long_data.data.extend(ids.tolist())
        if owners is not None:
            fd = request.fields_data.add(type=schema_pb2.Int64, field_name=OWNER_FIELD)
            fd.scalars.long_data.data.extend(np.asarray(owners, dtype=np.int64).tolist())
        if names is not None:
            fd = request.fields_data.add(type=schema_pb2.VarChar, field_name=NAME_FIELD)
            fd.scalars.string_data.data.extend(fit_varchar(str(n)) for n in names)
        if self._digests.get(kind):  # (a collection made before digests has no such field)
            fd = request.fields_data.add(type=schema_pb2.Int64, field_name=DIGEST_FIELD)
            fd.scalars.long_data.data.extend(
                (digests if digests is not None else np.zeros(len(ids), np.int64)).tolist())
        fd = request.fields_data.add(type=schema_pb2.FloatVector, field_name=VECTOR_FIELD)
        fd.vectors.dim = self.dim
        raw = np.ascontiguousarray(vecs, dtype="<f4").tobytes()
        # FloatArray{repeated float data = 1} in wire format: tag 0x0a, varint length, packed floats
        fd.vectors.float_vector.MergeFromString(b"\x0a" + varint(len(raw)) + raw)
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
                self._wrote(response.timestamp)
                return
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.UNAVAILABLE and attempt < 3:
                    time.sleep(delay)
                    delay *= 3
                    continue
                raise self._wrap(f"upsert into {name!r}", exc) from exc
            except Exception as exc:
                raise self._wrap(f"upsert into {name!r}", exc) from exc

    def remove_duplicates(self, kind: str) -> int:
        """Keep one row of every primary key stored more than once; returns the rows removed.

        Milvus cannot name the duplicated pks (a query returns a pk once), but a filtered ``count(*)`` counts every
        row: the pks are scanned in sorted batches, and only a batch counting more rows than pks is rewritten
        (its rows read, deleted, inserted once)."""
        col = self._need(kind)
        pk = PK_FIELD[kind]
        fields = [pk, VECTOR_FIELD] + ([NAME_FIELD] if kind != "entities" else []) + (
            [DIGEST_FIELD] if self._digests.get(kind) else []) + ([OWNER_FIELD] if kind == ALIASES else [])
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
            except Exception as exc:
                raise self._wrap(f"deleting duplicates from {self.names[kind]!r}", exc) from exc
            keep = np.asarray(sorted(rows), dtype=np.int64)
            vecs = np.stack([np.asarray(rows[i][VECTOR_FIELD], dtype=np.float32) for i in keep.tolist()])
            names = [rows[i][NAME_FIELD] for i in keep.tolist()] if kind != "entities" else None
            digests = (np.asarray([rows[i][DIGEST_FIELD] for i in keep.tolist()], np.int64)
                       if self._digests.get(kind) else None)
            owners = (np.asarray([rows[i][OWNER_FIELD] for i in keep.tolist()], np.int64) if kind == ALIASES
                      else None)
            self._send_mutation(self.names[kind], self._mutation_request(kind, keep, vecs, names, insert=True,
                                                                         digests=digests, owners=owners),
                                insert=True)
            removed += rows_stored - len(keep)
        if removed:
            try:
                col.flush(timeout=DATA_TIMEOUT)
            except Exception as exc:
                raise self._wrap(f"flushing {self.names[kind]!r}", exc) from exc
        return removed
