// One page of a KG's entities in eid order, after $last (a scan that resumes where it stopped), with each one's key
// and the text its vector is embedded from (name and description).
MATCH (n:IsoragEntity {isorag_kg: $kg})
WHERE n.isorag_eid > $last
RETURN n.isorag_eid AS eid, n.isorag_key AS key, n.isorag_name AS name, n.isorag_description AS description
ORDER BY n.isorag_eid
LIMIT $limit
