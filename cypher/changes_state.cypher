// Where the KG's change sets stand: the version, the change set being (or last) applied, its committed batches,
// the operations they hold (null for a change set begun before they were counted), and the vector work its
// committed batches left for Milvus (engine.changes.apply).
CYPHER replan=skip
MATCH (v:IsoragKGVersion {kg: $kg})
RETURN v.seq AS seq, v.at AS at, v.stamp AS stamp, v.cs_hash AS cs_hash, v.cs_batches AS cs_batches, v.cs_ops AS cs_ops,
       v.cs_done AS cs_done, v.cs_batch_size AS cs_batch_size, coalesce(v.pending_entities, []) AS pending_entities,
       coalesce(v.pending_relations, []) AS pending_relations, coalesce(v.pending_types, []) AS pending_types
