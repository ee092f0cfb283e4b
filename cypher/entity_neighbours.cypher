// One page of an entity's KG triples, either way, in their source direction, ordered by relation, then neighbour, so
// that pages do not overlap. Type links (ISORAG_IS_A) are no triples; an adopted graph's relationships have no
// isorag_name: their type is their relation.
MATCH (n:IsoragEntity {isorag_eid: $eid, isorag_kg: $kg})-[r]-(m:IsoragEntity {isorag_kg: $kg})
WHERE type(r) <> 'ISORAG_IS_A'
WITH coalesce(r.isorag_name, type(r)) AS relation, m, startNode(r) = n AS out
RETURN CASE WHEN out THEN $eid ELSE m.isorag_eid END AS head_eid,
       relation,
       CASE WHEN out THEN m.isorag_eid ELSE $eid END AS tail_eid,
       m.isorag_eid AS eid, m.isorag_name AS name, m.isorag_key AS key
ORDER BY relation, eid, out
SKIP $skip
LIMIT $limit
