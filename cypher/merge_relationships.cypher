// Triples of one relationship type ({rel_type} is validated and escaped by the caller).
UNWIND $rows AS row
MATCH (h:Entity {eid: row.h})
MATCH (t:Entity {eid: row.t})
MERGE (h)-[r{rel_type}]->(t)
  ON CREATE SET r.name = $name
