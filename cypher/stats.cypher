MATCH (n:Entity {kg: $kg})
WITH count(n) AS entities
OPTIONAL MATCH (rt:RelationType {kg: $kg})
WITH entities, count(rt) AS relations
OPTIONAL MATCH (ty:EntityType {kg: $kg})
RETURN entities, relations, count(ty) AS types
