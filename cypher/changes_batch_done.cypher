// In the transaction of a change set's batch: the batch is committed (and the operations committed so far: a rerun
// resumes after them; null leaves the count as it was), and the ids whose vectors it made stale (to
// embed again or to delete: engine.changes.apply decides by what Neo4j holds) are queued for the vector side.
MATCH (v:IsoragKGVersion {kg: $kg})
SET v.cs_batches = $batches, v.cs_ops = coalesce($ops, v.cs_ops), v.stamp = coalesce(v.stamp, 0) + 1,
    v.pending_entities = coalesce(v.pending_entities, []) + $entities,
    v.pending_relations = coalesce(v.pending_relations, []) + $relations,
    v.pending_types = coalesce(v.pending_types, []) + $types
