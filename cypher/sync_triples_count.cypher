// How many triples the heads of one partition of a sync have ([$lo, $hi], both ends included), counted as
// sync_triples_range reads them: the partition is then cut by tails into parts of about $per each.
MATCH (h:IsoragEntity)
WHERE h.isorag_eid >= $lo AND h.isorag_eid <= $hi AND h.isorag_kg = $kg
MATCH (h)-[r]->(t:IsoragEntity)
WHERE NOT type(r) STARTS WITH 'ISORAG_' AND (h.isorag_adopted IS NULL OR r.isorag_name IS NOT NULL)
RETURN count(r) AS triples
