// Entities of a KG whose display name contains $text, case folded (the explorer's search box): exact names
// first, then names that start with the text, then the shorter names (equal names: the better connected first);
// one page ($skip, $limit). A scan of the KG's entities through its isorag_kg index.
MATCH (n:IsoragEntity {isorag_kg: $kg})
WITH n, toLower(coalesce(n.isorag_name, n.isorag_key)) AS folded
WHERE folded CONTAINS $text
RETURN n.isorag_eid AS eid, n.isorag_name AS name, n.isorag_key AS key, COUNT { (n)-[r]-(:IsoragEntity {isorag_kg: $kg}) WHERE type(r) <> 'ISORAG_IS_A' } AS degree
ORDER BY CASE WHEN folded = $text THEN 0 WHEN folded STARTS WITH $text THEN 1 ELSE 2 END, size(folded), folded, degree DESC, eid
SKIP $skip
LIMIT $limit
