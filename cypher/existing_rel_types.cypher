// Relationship types used between the KG's entities.
MATCH (n:Entity {kg: $kg})-[r]->(:Entity)
WHERE type(r) <> 'IS_A'
RETURN DISTINCT type(r) AS type
