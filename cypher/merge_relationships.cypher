// The triples of a batch, grouped by head entity, all relationship types in one statement.
// row.type is a dynamic relationship type (Neo4j 5.26+); the caller has validated every type against
// [A-Za-z_][A-Za-z0-9_]* and the reserved types, and the original relation name goes into r.name.
// $create: heads this load created and has not written triples from yet, their triples without duplicates:
// no relationship can start from them yet, so CREATE (no look-up of existing relationships; see
// loaders/bulk.py for why this is exact). $merge: every other head, MERGE.
CALL {
  UNWIND $create AS g
  MATCH (h:Entity {eid: g.h})
  UNWIND g.rels AS row
  MATCH (t:Entity {eid: row.t})
  CREATE (h)-[:$(row.type) {name: row.name}]->(t)
}
CALL {
  UNWIND $merge AS g
  MATCH (h:Entity {eid: g.h})
  UNWIND g.rels AS row
  MATCH (t:Entity {eid: row.t})
  MERGE (h)-[r:$(row.type)]->(t)
    ON CREATE SET r.name = row.name
}
