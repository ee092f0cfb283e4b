// Whether any triple of the KG still has one relationship type (isorag's own, or a user's between adopted nodes, as
// count_triples counts them), as a row; none: the type is unused.
MATCH (h:IsoragEntity)-[r{{rel_type}}]->(t:IsoragEntity)
WHERE h.isorag_kg = $kg AND t.isorag_kg = $kg
RETURN 1 AS used
LIMIT 1
