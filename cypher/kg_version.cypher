// The KG's version (engine.stores.graph.GraphStore.version): the sequence number of its last change set, when it
// was applied, a stamp that moves when a batch commits and again when the vectors it made stale are written (what
// caches derived from the KG follow), the Milvus timestamp of that vector write, and the KG's identity. No row:
// version 0.
MATCH (v:IsoragKGVersion {kg: $kg})
RETURN v.seq AS seq, v.at AS at, v.stamp AS stamp, v.vectors_ts AS vectors_ts, v.kg_id AS kg_id
