// Remove entities with their triples ($eids). isorag's own nodes are deleted; an adopted node (a user's) is given
// back: isorag's relationships, type links, label and isorag_* properties go, the user's own stay. Aliases that
// resolve to a removed entity go with it (engine.stores.aliases). Returns, per removed entity, the relationship
// types and type ids it used (the caller checks whether anything still uses them) and the [eid, key] of the
// entities its triples joined it to (they may have lost their last triple).
UNWIND $eids AS eid
MATCH (n:IsoragEntity {isorag_eid: eid})
WHERE n.isorag_kg = $kg
CALL (n) {
  OPTIONAL MATCH (n)-[r]-(m)
  WHERE r.isorag_name IS NOT NULL
  RETURN collect(DISTINCT type(r)) AS rel_types,
         [x IN collect(DISTINCT CASE WHEN m <> n THEN [m.isorag_eid, m.isorag_key] END) WHERE x IS NOT NULL]
           AS neighbours
}
CALL (n) {
  OPTIONAL MATCH (n)-[:ISORAG_IS_A]->(ty)
  RETURN collect(ty.tid) AS tids
}
CALL (n) {
  MATCH (o:IsoragAlias {target: n.isorag_eid})
  DELETE o
}
CALL (n) {
  MATCH (n)-[r]-()
  WHERE r.isorag_name IS NOT NULL OR type(r) = 'ISORAG_IS_A'
  DELETE r
}
WITH n, eid, rel_types, neighbours, tids, coalesce(n.isorag_adopted, false) AS adopted
CALL (n, adopted) {
  WITH n, adopted
  WHERE adopted
  REMOVE n:IsoragEntity, n.isorag_eid, n.isorag_kg, n.isorag_key, n.isorag_name, n.isorag_name_key, n.isorag_types,
         n.isorag_adopted, n.isorag_description, n.isorag_own
}
CALL (n, adopted) {
  WITH n, adopted
  WHERE NOT adopted
  DETACH DELETE n
}
RETURN eid, rel_types, neighbours, tids
