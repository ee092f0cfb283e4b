// Which of $types some triple of the KG still has (isorag's own, or a user's between adopted nodes, as count_triples
// counts them), by one scan of the KG's relationships: one plan for any number of types, where a statement per type
// costs a plan per type (engine.changes.apply.unused_types chooses). Stops once every type is seen.
MATCH (h:IsoragEntity)-[r]->(t:IsoragEntity)
WHERE h.isorag_kg = $kg AND t.isorag_kg = $kg AND type(r) IN $types
WITH DISTINCT type(r) AS type
RETURN type
LIMIT $n
