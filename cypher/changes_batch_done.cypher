// In the transaction of a change set's batch (after changes_begin): the batch is committed (and the operations
// committed so far: a rerun resumes after them; null leaves the count as it was), the stamp moves, and the ids
// whose vectors it made stale (to embed again or to delete: engine.changes.vectors decides by what Neo4j holds)
// are queued for the vector side. $record: one row, or none for a batch that applied nothing before any did.
CYPHER replan=skip
UNWIND $record AS r
MATCH (v:IsoragKGVersion {kg: $kg})
SET v.cs_batches = r.batches, v.cs_ops = coalesce(r.ops, v.cs_ops), v.stamp = coalesce(v.stamp, 0) + 1,
    v.pending_entities = coalesce(v.pending_entities, []) + r.entities,
    v.pending_relations = coalesce(v.pending_relations, []) + r.relations,
    v.pending_types = coalesce(v.pending_types, []) + r.types
