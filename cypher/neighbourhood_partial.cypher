// Part of one entity's KG relationships (engine.scoring.neighbourhood): when even the best entity of a hop
// has more relationships than the edge budget left, the first $limit of them ({{rel_types}} as in
// neighbourhood_hop). Same row as neighbourhood_hop. Ordered before the limit: the same part on every run
// (the storage order is not a promise), so a capped neighbourhood and what is trained on it are reproducible.
MATCH (n:IsoragEntity {isorag_eid: $eid})-[r{{rel_types}}]-(m:IsoragEntity)
WITH n, r, m ORDER BY m.isorag_eid, type(r) LIMIT $limit
WITH collect($eid) AS src,
     collect(CASE WHEN startNode(r) = n THEN $code[type(r)] ELSE -1 - $code[type(r)] END) AS code,
     collect(m) AS reached
CALL (reached) {
  UNWIND reached AS m
  WITH DISTINCT m
  RETURN collect(m.isorag_eid) AS nodes,
         collect(CASE WHEN $degrees THEN COUNT { (m)--() } ELSE -1 END) AS degree,
         collect(m.isorag_name IS NULL OR m.isorag_name = '' OR m.isorag_name =~ $nameless) AS nameless
}
RETURN src, code, [m IN reached | m.isorag_eid] AS dst, nodes, degree, nameless
