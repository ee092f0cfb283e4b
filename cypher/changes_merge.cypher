// Merge entity a into entity b (rows {src, dst}: resolved eids, engine.stores.aliases): b takes a's relationships
// (isorag's own: those with isorag_name; a self-loop of a becomes one of b), types and type links; a's own key
// becomes an alias of b (whatever key the operation named a by), and the aliases of a now point to b, so an alias
// always resolves in one hop; then a is deleted. An adopted (user's) node is never merged (the caller refuses it).
UNWIND $rows AS row
MATCH (a:IsoragEntity {isorag_eid: row.src}), (b:IsoragEntity {isorag_eid: row.dst})
CALL (a, b) {
  MATCH (a)-[r]->(t)
  WHERE r.isorag_name IS NOT NULL
  WITH r, type(r) AS ty, r.isorag_name AS nm, CASE WHEN t = a THEN b ELSE t END AS t2
  MERGE (b)-[r2:$(ty)]->(t2) ON CREATE SET r2.isorag_name = nm
  DELETE r
}
CALL (a, b) {
  MATCH (s)-[r]->(a)
  WHERE r.isorag_name IS NOT NULL AND s <> a
  WITH r, type(r) AS ty, r.isorag_name AS nm, s
  MERGE (s)-[r2:$(ty)]->(b) ON CREATE SET r2.isorag_name = nm
  DELETE r
}
CALL (a, b) {
  MATCH (a)-[l:ISORAG_IS_A]->(ty)
  MERGE (b)-[:ISORAG_IS_A]->(ty)
  DELETE l
}
SET b.isorag_types = reduce(acc = coalesce(b.isorag_types, []), t IN coalesce(a.isorag_types, []) |
                            CASE WHEN t IN acc THEN acc ELSE acc + t END)
WITH a, b, row
CALL (a, b) {
  MATCH (o:IsoragAlias {target: a.isorag_eid})
  SET o.target = b.isorag_eid
}
MERGE (al:IsoragAlias {aid: row.src})
SET al.kg = $kg, al.key = a.isorag_key, al.target = row.dst
WITH a, row
DETACH DELETE a
RETURN row.src AS src
