// Type catalog and ISORAG_IS_A links (typed unknown pattern nodes take the entities of a type).
UNWIND $rows AS row
MERGE (ty:IsoragEntityType {tid: row.tid}) ON CREATE SET ty.kg = $kg, ty.name = row.name
WITH ty, row
UNWIND row.eids AS eid
MATCH (n:IsoragEntity {isorag_eid: eid})
MERGE (n)-[:ISORAG_IS_A]->(ty)
