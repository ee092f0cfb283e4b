// Create the entities of a batch that do not exist yet; existing ones are left as they are.
// Returns one row per entity that existed before this statement (with its stored name, which is what gets
// embedded); every other entity of the batch was created here, under the row's name. The loader takes the
// entities created here as "fresh": no relationship can start from them but those this load writes.
// (Exact while a KG is loaded by one process at a time: eids are per KG, and the eid key constraint
// makes a concurrent duplicate fail rather than exist twice.)
UNWIND $rows AS row
OPTIONAL MATCH (old:Entity {eid: row.eid})
WITH row, old IS NOT NULL AS existed
MERGE (n:Entity {eid: row.eid})
  ON CREATE SET n.kg = $kg, n.key = row.key, n.name = row.name, n.types = row.types
WITH n, existed
WHERE existed
RETURN n.eid AS eid, n.name AS name
