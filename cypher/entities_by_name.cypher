// Entities of a KG by display name (the name index); several entities may share a name.
UNWIND $names AS name
MATCH (n:Entity {name: name})
WHERE n.kg = $kg
RETURN name, n.eid AS eid, n.key AS key
