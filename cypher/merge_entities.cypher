// Create the entities of a batch that do not exist yet; existing ones are left as they are.
// Returns the stored name of each, which is what gets embedded (it may come from an earlier label record).
UNWIND $rows AS row
MERGE (n:Entity {eid: row.eid})
  ON CREATE SET n.kg = $kg, n.key = row.key, n.name = row.name, n.types = row.types
RETURN n.eid AS eid, n.name AS name
