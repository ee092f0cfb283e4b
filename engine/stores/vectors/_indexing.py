"""Index and load of the collections (:class:`engine.stores.vectors.VectorStore`): a bulk load inserts, flushes,
builds the index, waits until every row is indexed and then loads (the order measured fastest on the bundled Milvus
2.3.5); a collection already loaded takes a change set's few rows as they are."""

from __future__ import annotations

import json
import time
from typing import Any

from engine._errors import StoreError

from ._collections import Collections
from ._common import DATA_TIMEOUT, DDL_TIMEOUT, INDEX_TIMEOUT, LOAD_TIMEOUT, VECTOR_FIELD, VECTOR_INDEX


class Indexing(Collections):
    """Index, load and finalize the collections."""

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
            col.create_index(VECTOR_FIELD, wanted, index_name=VECTOR_INDEX, timeout=DDL_TIMEOUT, sync=False)
            self._index_names[kind] = VECTOR_INDEX
            self._metric[kind] = wanted["metric_type"]
            self._itype[kind] = wanted["index_type"]
        except Exception as exc:
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
            except Exception as exc:
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
        except Exception as exc:
            raise self._wrap(f"loading {self.names[kind]!r}", exc) from exc
        self._loaded.add(kind)

    def _is_loaded(self, kind: str) -> bool:
        if kind in self._loaded:
            return True
        from pymilvus import utility

        try:
            state = utility.load_state(self.names[kind], using=self._alias, timeout=DDL_TIMEOUT)
        except Exception as exc:
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
            except Exception as exc:
                raise self._wrap(f"describing the index of {self.names[kind]!r}", exc) from exc
            if not has_index:
                self._ensure_index(kind, col)
            self._load(kind, col)
        return col

    def finalize(self, kind: str | None = None) -> None:
        """Flush, build the index, wait until every row is indexed, load.  Safe to call again.

        The kinds are finalized at once, one thread each: most of a small collection's time here is
        Milvus' own waiting (flush, index scheduling, load), which then overlaps the entities' index build.

        A finalized collection is no longer this store's alone: the record of the pks written through it since it
        created the collection is dropped (:meth:`forget_written`).
        """
        kinds = self.kinds_made() if kind is None else (kind,)
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
        collection are searchable as they are (a change set's few rows need no flush or index build). The end of
        a writer's work (a change set, a repair): the record of pks written is dropped for every kind, also for a
        collection it made that a read had loaded already (:meth:`forget_written`)."""
        for k in self.kinds_made():
            if not self._is_loaded(k):
                self.finalize(k)
        self.forget_written()

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
        except Exception as exc:
            raise self._wrap(f"flushing {self.names[k]!r}", exc) from exc
        self._ensure_index(k, col)
        self._wait_index(k)
        self._load(k, col)
        self.forget_written(k)

    def forget_written(self, kind: str | None = None) -> None:
        """Stop answering from the pks written through this store (all kinds: ``None``): ask Milvus and upsert.

        Only while the load that created a collection runs (holding the KG's writer lease) is this store its only
        writer; once the load is done, a change set, sync or load of another process may write rows this store
        never saw, and inserting such a pk again would store it twice, which Milvus 2.3 does not survive: a query
        by pk over a pk stored twice returns fewer rows than asked for, dropping *other* pks of the same query
        (a change set killed and run again by a process that had loaded the KG lost 7 of 560 entity vectors so).
        """
        if kind is None:
            self._written.clear()
        else:
            self._written.pop(kind, None)
