// Entities at one end of relationships of one type ({rel_type} validated and escaped by the caller):
// replacements of the same relation for corrupted claims.
MATCH (h:Entity)-[r{rel_type}]->(t:Entity)
WHERE h.kg = $kg
WITH CASE WHEN $end = 'head' THEN h ELSE t END AS x
WHERE NOT x.eid IN $exclude
RETURN DISTINCT x.eid AS eid, x.name AS name
LIMIT $limit
