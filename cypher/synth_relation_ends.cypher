// Entities at one end of relationships of one type ({{rel_type}} validated and escaped by the caller):
// replacements of the same relation for corrupted claims.
MATCH (h:IsoragEntity)-[r{{rel_type}}]->(t:IsoragEntity)
WHERE h.isorag_kg = $kg
WITH CASE WHEN $end = 'head' THEN h ELSE t END AS x
WHERE NOT x.isorag_eid IN $exclude
RETURN DISTINCT x.isorag_eid AS eid, x.isorag_name AS name
LIMIT $limit
