"""Embeddings in Milvus: entity, relation and type vectors of one KG under one embedding model.

Collections, one set per (KG, embedding model)::

    <kg>__<model>__entities   eid INT64 pk,                digest INT64, vector FLOAT_VECTOR(dim)
    <kg>__<model>__relations  rid INT64 pk, name VARCHAR,  digest INT64, vector FLOAT_VECTOR(dim)
    <kg>__<model>__types      tid INT64 pk, name VARCHAR,  digest INT64, vector FLOAT_VECTOR(dim)
    <kg>__<model>__aliases    aid INT64 pk, eid INT64, name VARCHAR, digest INT64, vector FLOAT_VECTOR(dim)

The aliases collection (an entity's other names, each embedded like a name, ``eid`` its entity) exists only for a
KG that has aliases: the first alias written makes it (:data:`KINDS` are the three every KG has).

``digest`` is :func:`engine.stores.texts.text_digest` of the exact text the row's vector was embedded from, so that
the stores can prove they agree without embedding anything again (``isorag check``); a collection made before it
has no such field and is checked by embedding (``check --deep``).

The KG name is used as it is (its rule makes it one-to-one: :func:`collection_name`); the model name is
sanitized to ``[A-Za-z0-9_]``.  Each collection's description records kg, model and dim, so two models whose
names sanitize alike cannot share a set silently.

Vectors are float32 and L2-normalized by the caller.  Distances returned are Euclidean distances
(``sqrt`` of Milvus' squared L2; derived from the score for an IP/COSINE index).

Loading follows what was measured on the bundled Milvus 2.3.5: insert in 10k-row batches, flush, build the index,
wait until ``pending_index_rows`` is 0, then load; one ``search()`` call for all of a query's vectors.

pymilvus 2.4 with its ORM is used over one connection alias per store, with two hot paths on the
gRPC stub: upserts are built straight from the numpy arrays, and search reads ids/scores straight
from the protobuf response (pymilvus' ``SearchResult`` builds a Python object per hit).

Consistency: search and get_vectors use "Session": this process sees its own writes, and another process's once
:meth:`VectorStore.observe` is given their :attr:`VectorStore.last_write_ts` (the KG's version node carries it:
:class:`engine.stores.version.VersionWatch`); existing_ids and count use "Strong". For a collection this store
created, until it is finalized (the end of the load that created it, which holds the KG's writer lease),
existing_ids is answered from the pks written through it (no query: a first load never waits for Milvus), and upsert
inserts the pks never written through it (no delete records, so the index is built once). After that other processes
may write to it, and the store asks Milvus and upserts like any other (a pk inserted twice is stored twice, and
Milvus 2.3 then drops rows from queries by pk: :meth:`VectorStore.forget_written`). Reading needs the collection
loaded, which needs an index: existing_ids / count / get_vectors create the index and load on first use.

The class is written in parts, one module each, stacked: ``_collections`` (connection, schema, checks),
``_indexing`` (index, load, finalize), ``_reads`` (search, look-ups, scans, digests), ``_writes`` (upsert, delete,
duplicates); :class:`VectorStore` adds the lifecycle.
"""

from __future__ import annotations

from engine._secrets import mask_uri

from ._common import (ALIASES, ALL_KINDS, BATCH, CONNECT_TIMEOUT, DATA_TIMEOUT, DDL_TIMEOUT, DEFAULT_INDEX, EF_MAX,
                      INDEX_TIMEOUT, KINDS, LITE_INDEX, LOAD_TIMEOUT, QUERY_BATCH, SEARCH_TIMEOUT, TOPK_MAX,
                      collection_name, fit_varchar, slug)
from ._writes import Writes


class VectorStore(Writes):
    """Entity / relation / type vectors of one KG under one embedding model, in Milvus."""

    def __enter__(self) -> VectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"VectorStore(uri={mask_uri(self.uri)!r}, kg={self.kg!r}, model={self.model!r}, dim={self.dim})"

    def drop(self) -> None:
        """Drop this (kg, model)'s collections."""
        from pymilvus import utility

        for kind in ALL_KINDS:
            name = self.names[kind]
            try:
                if utility.has_collection(name, using=self._alias, timeout=DDL_TIMEOUT):
                    utility.drop_collection(name, using=self._alias, timeout=DDL_TIMEOUT)
            except Exception as exc:
                raise self._wrap(f"dropping {name!r}", exc) from exc
        self._cols.clear()
        self._loaded.clear()
        self._index_names.clear()
        self._written.clear()
        self._metric.clear()
        self._itype.clear()
        self._digests.clear()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        from pymilvus import connections

        try:
            connections.remove_connection(self._alias)
        except Exception:  # noqa: BLE001 - closing: a connection already gone is fine
            pass


__all__ = [
    "VectorStore", "KINDS", "ALIASES", "ALL_KINDS", "collection_name", "fit_varchar", "slug", "BATCH", "QUERY_BATCH",
    "TOPK_MAX", "EF_MAX",
    "DEFAULT_INDEX", "LITE_INDEX", "CONNECT_TIMEOUT", "DDL_TIMEOUT", "DATA_TIMEOUT", "SEARCH_TIMEOUT", "LOAD_TIMEOUT",
    "INDEX_TIMEOUT",
]
