// One page of a KG's entities in eid order, after $last (a scan that resumes where it stopped).
MATCH (n:IsoragEntity {isorag_kg: $kg})
WHERE n.isorag_eid > $last
RETURN n.isorag_eid AS eid, n.isorag_name AS name
ORDER BY n.isorag_eid
LIMIT $limit
