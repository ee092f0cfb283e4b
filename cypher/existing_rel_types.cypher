// Relationship types used between the KG's entities (isorag's own ISORAG_* types left out).
MATCH (n:IsoragEntity {isorag_kg: $kg})-[r]->(m:IsoragEntity)
WHERE m.isorag_kg = $kg AND NOT type(r) STARTS WITH 'ISORAG_'
RETURN DISTINCT type(r) AS type
