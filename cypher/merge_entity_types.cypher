// Type catalog and IS_A links (typed unknown pattern nodes take the entities of a type).
UNWIND $rows AS row
MERGE (ty:EntityType {tid: row.tid}) ON CREATE SET ty.kg = $kg, ty.name = row.name
WITH ty, row
UNWIND row.eids AS eid
MATCH (n:Entity {eid: eid})
MERGE (n)-[:IS_A]->(ty)
