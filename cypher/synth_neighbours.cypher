// Up to $cap KG neighbours of one entity with their degree (inverse-degree sampling, paper 003 Algorithm 1).
// Only KG relations (they carry r.name); bookkeeping relationships and type nodes are left out.
MATCH (z:Entity {eid: $eid})-[r]-(m:Entity)
WHERE r.name IS NOT NULL AND NOT m.eid IN $exclude
WITH z, r, m
LIMIT $cap
RETURN m.eid AS eid, m.name AS name, type(r) AS type, r.name AS rel, startNode(r) = z AS out,
       COUNT { (m)--() } AS degree
