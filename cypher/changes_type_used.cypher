// Whether any triple of the KG still has one relationship type (isorag's own, or a user's between adopted nodes, as
// count_triples counts them): one row with the type, none when it is unused. Statements of many types join these
// with UNION ALL (one round trip for a chunk of types; each branch stops at its first triple).
MATCH (h:IsoragEntity)-[r{{rel_type}}]->(t:IsoragEntity)
WHERE h.isorag_kg = $kg AND t.isorag_kg = $kg
RETURN type(r) AS type
LIMIT 1
