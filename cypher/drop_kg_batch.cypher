// Delete one batch of the nodes isorag created for a KG (the entities it loaded, its relation and type catalog,
// its version node and the aliases of merged entities);
// run until it deletes nothing. Adopted entities are the user's nodes: drop_kg_release_batch gives them back.
CALL () {
  MATCH (n:IsoragEntity {isorag_kg: $kg}) WHERE n.isorag_adopted IS NULL RETURN n
  UNION
  MATCH (n:IsoragRelationType {kg: $kg}) RETURN n
  UNION
  MATCH (n:IsoragEntityType {kg: $kg}) RETURN n
  UNION
  MATCH (n:IsoragKGVersion {kg: $kg}) RETURN n
  UNION
  MATCH (n:IsoragAlias {kg: $kg}) RETURN n
}
WITH n LIMIT $limit
DETACH DELETE n
RETURN count(*) AS deleted
