// Up to $cap KG neighbours of one entity with their degree (inverse-degree sampling, SynthKGQA's Algorithm 1).
// Only the KG's relation types ($types, its catalog): type links and a user's other relationships are left out.
// $out: true for the relationships that leave the entity, false for those that enter it, null for both.
MATCH (z:IsoragEntity {isorag_eid: $eid})-[r]-(m:IsoragEntity)
WHERE type(r) IN $types AND NOT m.isorag_eid IN $exclude AND ($out IS NULL OR (startNode(r) = z) = $out)
WITH z, r, m
LIMIT $cap
RETURN m.isorag_eid AS eid, m.isorag_name AS name, type(r) AS type, startNode(r) = z AS out,
       COUNT { (m)--() } AS degree
