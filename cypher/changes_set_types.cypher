// Set entities' types (rows {eid, types: [{tid, name}], replace}): replace them, or add to them. Type links follow;
// returns the type ids whose use changed (the caller checks what still uses them).
UNWIND $rows AS row
MATCH (n:IsoragEntity {isorag_eid: row.eid})
CALL (n, row) {
  OPTIONAL MATCH (n)-[l:ISORAG_IS_A]->(ty)
  WHERE row.replace AND NOT ty.tid IN [x IN row.types | x.tid]
  DELETE l
  RETURN collect(ty.tid) AS dropped
}
SET n.isorag_types = CASE WHEN row.replace THEN [x IN row.types | x.name]
                          ELSE reduce(acc = coalesce(n.isorag_types, []), x IN row.types |
                                      CASE WHEN x.name IN acc THEN acc ELSE acc + x.name END) END
WITH n, row, dropped
CALL (n, row) {
  UNWIND row.types AS x
  MERGE (ty:IsoragEntityType {tid: x.tid}) ON CREATE SET ty.kg = $kg, ty.name = x.name
  MERGE (n)-[:ISORAG_IS_A]->(ty)
}
RETURN dropped + [x IN row.types | x.tid] AS tids
