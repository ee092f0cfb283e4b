// Adopt existing nodes as KG entities in place: add isorag's label and its isorag_* properties, nothing else (the
// user's own properties, labels and relationships are left exactly as they are; drop removes only what this adds).
UNWIND $rows AS row
MATCH (n) WHERE elementId(n) = row.id AND n.isorag_eid IS NULL
SET n:IsoragEntity, n.isorag_kg = $kg, n.isorag_eid = row.eid, n.isorag_key = row.key, n.isorag_name = row.name,
    n.isorag_name_key = row.name_key, n.isorag_types = [], n.isorag_adopted = true,
    n.isorag_aliases = CASE WHEN size(row.aliases) = 0 THEN null ELSE row.aliases END
