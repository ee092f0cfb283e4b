"""Living KGs: change sets, applying them, versions, sync, check.

A change set is a stream of operations (:mod:`engine.changes.ops`) read from JSON Lines or from two triple files;
:func:`engine.changes.apply.apply_changes` applies it to both stores in idempotent batches and gives the KG a new
version: :mod:`engine.changes.batching` checks, hashes and cuts it, :mod:`engine.changes.statements` makes one
batch's transaction (one statement per kind of operation, then the sweep of the entities left without triples), and
:mod:`engine.changes.vectors` brings Milvus in line after each batch. :mod:`engine.changes.sync` makes a KG equal to
a file (:mod:`engine.changes.adopt_sync`: to the user's graph it adopted); :mod:`engine.changes.check` compares
Neo4j with Milvus and repairs what differs. Key aliases are :mod:`engine.stores.aliases`; the version stamp every
cache follows is :mod:`engine.stores.version`.
"""
