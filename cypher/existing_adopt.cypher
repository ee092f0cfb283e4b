// Adopt existing nodes as KG entities in place: add the label and the ids, move nothing.
UNWIND $rows AS row
MATCH (n) WHERE elementId(n) = row.id
SET n:Entity, n.kg = $kg, n.eid = row.eid, n.key = row.key, n.name = row.name,
    n.types = coalesce(n.types, [])
