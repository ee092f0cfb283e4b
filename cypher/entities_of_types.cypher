// Candidates of a typed unknown pattern node: the entities of the top-k(t) types, lowest eids first (a cut at
// $limit is then the same on every call; the caller asks for one more row to know that it cut).
MATCH (ty:IsoragEntityType) WHERE ty.tid IN $tids
MATCH (ty)<-[:ISORAG_IS_A]-(e:IsoragEntity)
WITH DISTINCT e.isorag_eid AS eid
RETURN eid
ORDER BY eid
LIMIT $limit
