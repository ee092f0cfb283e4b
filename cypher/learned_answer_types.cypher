// The entity types of answer entities, most frequent first (the type hint of a learned pattern's answer node).
UNWIND $eids AS eid
MATCH (:IsoragEntity {isorag_eid: eid})-[:ISORAG_IS_A]->(ty:IsoragEntityType)
RETURN ty.name AS type, count(*) AS n
ORDER BY n DESC, type
LIMIT 1
