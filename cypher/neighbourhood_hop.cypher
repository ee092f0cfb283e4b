// One hop of a neighbourhood fetch (engine.scoring.neighbourhood): every KG relationship of the frontier
// entities, either way, its direction kept. {{rel_types}} is the KG's relation types, validated against the
// catalog and escaped by the caller, so ISORAG_IS_A and other bookkeeping relationships are left out.
// One row of flat lists (few records decode fast): per relationship its frontier entity (src), the entity
// reached (dst) and code = relation index (from $code) when src is the head, -1 - index when src is the tail;
// per distinct entity reached, its degree (degree store: an upper bound on the cost of expanding it next),
// only when $degrees, and whether it is nameless (no text to embed).
UNWIND $frontier AS eid
MATCH (n:IsoragEntity {isorag_eid: eid})-[r{{rel_types}}]-(m:IsoragEntity)
WITH collect(eid) AS src,
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
