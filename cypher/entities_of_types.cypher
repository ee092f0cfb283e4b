// Candidates of a typed unknown pattern node: the entities of the top-k(t) types.
MATCH (ty:IsoragEntityType) WHERE ty.tid IN $tids
MATCH (ty)<-[:ISORAG_IS_A]-(e:IsoragEntity)
RETURN DISTINCT e.isorag_eid AS eid
LIMIT $limit
