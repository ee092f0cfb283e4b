// Entity records (labels, types) from the source: set the display name and add types.
UNWIND $rows AS row
MERGE (n:Entity {eid: row.eid})
  ON CREATE SET n.kg = $kg, n.key = row.key, n.name = coalesce(row.name, row.key), n.types = row.types
  ON MATCH SET n.name = coalesce(row.name, n.name),
               n.types = reduce(acc = coalesce(n.types, []), t IN row.types | CASE WHEN t IN acc THEN acc ELSE acc + t END)
RETURN n.eid AS eid, n.name AS name
