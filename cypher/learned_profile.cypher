// The relationship types at each of these entities (the KG's own, $types) and whether they leave it: a pattern
// template whose edge at a topic has another type or direction cannot match there, so the learned generator gives it
// no probability.
UNWIND $eids AS eid
MATCH (n:IsoragEntity {isorag_eid: eid})-[r]-()
WHERE type(r) IN $types
RETURN DISTINCT eid, type(r) AS type, startNode(r) = n AS out
