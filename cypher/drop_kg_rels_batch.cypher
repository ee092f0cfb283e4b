// Delete one batch of the relationships of a KG's entities; run until it deletes nothing, before the nodes
// (a DETACH DELETE of a batch of hub nodes would hold all their relationships in one transaction).
MATCH (n:Entity {kg: $kg})-[r]-()
WITH DISTINCT r LIMIT $limit
DELETE r
RETURN count(*) AS deleted
