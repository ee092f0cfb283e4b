// Counts of one KG: entities, relations of its catalog and entity types (triples: count_triples).
MATCH (n:IsoragEntity {isorag_kg: $kg})
WITH count(n) AS entities
OPTIONAL MATCH (rt:IsoragRelationType {kg: $kg})
WITH entities, count(rt) AS relations
OPTIONAL MATCH (ty:IsoragEntityType {kg: $kg})
RETURN entities, relations, count(ty) AS types
