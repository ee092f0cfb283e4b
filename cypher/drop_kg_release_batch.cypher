// Give one batch of a KG's adopted nodes back as they were before adoption: remove isorag's label and its
// isorag_* properties, nothing else (the node, its other labels, properties and relationships are the user's).
MATCH (n:IsoragEntity {isorag_kg: $kg})
WHERE n.isorag_adopted
WITH n LIMIT $limit
REMOVE n:IsoragEntity, n.isorag_eid, n.isorag_kg, n.isorag_key, n.isorag_name, n.isorag_name_key, n.isorag_types,
       n.isorag_adopted, n.isorag_description, n.isorag_own, n.isorag_aliases
RETURN count(*) AS released
