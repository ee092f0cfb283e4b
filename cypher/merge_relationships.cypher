// The triples of a batch, grouped by head entity, all relationship types in one statement.
// row.type is a dynamic relationship type (Neo4j 5.26+); the caller has validated every type against
// [A-Za-z_][A-Za-z0-9_]* and the reserved types. The original relation name goes into r.isorag_name, which also
// marks the relationship as isorag's own (drop deletes those, never a user's relationship of an adopted graph).
// $create: heads this load created and has not written triples from yet, their triples without duplicates:
// no relationship can start from them yet, so CREATE (no look-up of existing relationships; see
// loaders/bulk.py for why this is exact). $merge: every other head, MERGE.
CYPHER replan=skip
CALL () {
  UNWIND $create AS g
  MATCH (h:IsoragEntity {isorag_eid: g.h})
  UNWIND g.rels AS row
  MATCH (t:IsoragEntity {isorag_eid: row.t})
  CREATE (h)-[:$(row.type) {isorag_name: row.name}]->(t)
}
CALL () {
  UNWIND $merge AS g
  MATCH (h:IsoragEntity {isorag_eid: g.h})
  UNWIND g.rels AS row
  MATCH (t:IsoragEntity {isorag_eid: row.t})
  MERGE (h)-[r:$(row.type)]->(t)
    ON CREATE SET r.isorag_name = row.name
}
