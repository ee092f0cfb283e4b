// Whether any entity of the KG still has a relationship of one type (isorag's own), as a row; none: unused.
MATCH (h:IsoragEntity)-[r{{rel_type}}]->()
WHERE h.isorag_kg = $kg AND r.isorag_name IS NOT NULL
RETURN 1 AS used
LIMIT 1
