// Candidates of a typed unknown pattern node: the entities of the top-k(t) types.
MATCH (ty:EntityType) WHERE ty.tid IN $tids
MATCH (ty)<-[:IS_A]-(e:Entity)
RETURN DISTINCT e.eid AS eid
LIMIT $limit
