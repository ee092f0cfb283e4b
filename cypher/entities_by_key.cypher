// Entities of a KG by source key: the caller sends each key with its eid (engine.stores.graph.entity_id, a digest of kg and
// key), so the look-up runs on the eid constraint's index and the key itself is never indexed.
UNWIND $rows AS row
MATCH (n:IsoragEntity {isorag_eid: row.eid})
WHERE n.isorag_kg = $kg AND n.isorag_key = row.key
RETURN row.key AS key, n.isorag_eid AS eid, n.isorag_name AS name
