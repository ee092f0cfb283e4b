// Delete one batch of a KG's nodes (with their relationships); run until it deletes nothing.
MATCH (n) WHERE (n:Entity OR n:RelationType OR n:EntityType) AND n.kg = $kg
WITH n LIMIT $limit
DETACH DELETE n
RETURN count(*) AS deleted
