"""Living KGs: change sets, applying them, versions, sync, check.

A change set is a stream of operations (:mod:`engine.changes.ops`) read from JSON Lines or from two triple files;
:func:`engine.changes.apply.apply_changes` applies it to both stores in idempotent batches and gives the KG a new
version; :mod:`engine.changes.check` compares Neo4j with Milvus and repairs what differs.
"""
