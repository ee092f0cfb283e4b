// The KG's identity, made now ($kg_id) if it has none: kept in its version node, which a drop deletes, so a KG made
// again under the same name gets another (engine.stores.graph.GraphStore.ensure_identity).
MERGE (v:IsoragKGVersion {kg: $kg})
  ON CREATE SET v.seq = 0, v.stamp = 0
SET v.kg_id = coalesce(v.kg_id, $kg_id)
RETURN v.kg_id AS kg_id
