// A KG's entities that have aliases, with them (each alias has a vector of its own: engine.changes.check).
MATCH (n:IsoragEntity {isorag_kg: $kg})
WHERE n.isorag_aliases IS NOT NULL
RETURN n.isorag_eid AS eid, n.isorag_aliases AS aliases
