// Delete the type catalog nodes among $tids that no entity links to any more; returns their ids.
CYPHER replan=skip
UNWIND $tids AS tid
MATCH (ty:IsoragEntityType {tid: tid})
WHERE ty.kg = $kg AND NOT EXISTS { (:IsoragEntity)-[:ISORAG_IS_A]->(ty) }
WITH ty, tid
DETACH DELETE ty
RETURN tid
