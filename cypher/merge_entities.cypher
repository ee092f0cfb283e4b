// Create the entities of a batch that do not exist yet; existing ones are left as they are.
// Returns only the entities whose stored name differs from the row's (set earlier by a label record):
// the stored name is what gets embedded; for the others it is the row's name (fewer rows to send back).
UNWIND $rows AS row
MERGE (n:Entity {eid: row.eid})
  ON CREATE SET n.kg = $kg, n.key = row.key, n.name = row.name, n.types = row.types
WITH n, row
WHERE n.name IS NULL OR n.name <> row.name
RETURN n.eid AS eid, n.name AS name
