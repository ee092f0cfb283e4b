// Entities of a KG by display name, through the name-key index (the caller sends each name with its key,
// engine.stores.graph.name_key); several entities may share a name.
UNWIND $rows AS row
MATCH (n:IsoragEntity {isorag_name_key: row.name_key})
WHERE n.isorag_kg = $kg AND n.isorag_name = row.name
RETURN row.name AS name, n.isorag_eid AS eid, n.isorag_key AS key
