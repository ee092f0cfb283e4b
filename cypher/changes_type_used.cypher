// Whether any entity of the KG still has a relationship of one type, as a row; none: unused. A triple is a
// relationship isorag wrote (it carries isorag_name) or, between two nodes adopted from a user's graph, one of the
// user's own (load --from-neo4j: the user's relationships are the KG's triples, see count_triples).
MATCH (h:IsoragEntity)-[r{{rel_type}}]->(t:IsoragEntity)
WHERE h.isorag_kg = $kg AND (r.isorag_name IS NOT NULL OR (h.isorag_adopted AND t.isorag_kg = $kg))
RETURN 1 AS used
LIMIT 1
