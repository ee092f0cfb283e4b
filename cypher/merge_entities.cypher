// Create the entities of a batch that do not exist yet; existing ones are left as they are.
// Returns one row per entity that existed before this statement (with its stored name and description, what its
// vector is embedded from); every other entity of the batch was created here, under the row's name, bare (nothing
// of its own: it leaves with its last triple, engine.changes.statements). The loader takes the
// entities created here as "fresh": no relationship can start from them but those this load writes.
// (Exact while a KG is loaded by one process at a time, which the KG's load lock ensures: eids are per KG, and the
// eid key constraint makes a concurrent duplicate fail rather than exist twice.)
UNWIND $rows AS row
OPTIONAL MATCH (old:IsoragEntity {isorag_eid: row.eid})
WITH row, old IS NOT NULL AS existed
MERGE (n:IsoragEntity {isorag_eid: row.eid})
  ON CREATE SET n.isorag_kg = $kg, n.isorag_key = row.key, n.isorag_name = row.name,
                n.isorag_name_key = row.name_key, n.isorag_types = row.types, n.isorag_own = false
WITH n, existed
WHERE existed
RETURN n.isorag_eid AS eid, n.isorag_name AS name, n.isorag_description AS description
