// Entities of a KG by source key (the (kg, key) constraint's index).
UNWIND $keys AS key
MATCH (n:Entity {kg: $kg, key: key})
RETURN key, n.eid AS eid, n.name AS name
