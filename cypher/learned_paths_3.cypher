// Relation paths of three hops from a topic entity to the answers (see learned_paths_1): per sequence of
// relationship types and directions, the answers reached; distinct relationships, at most $cap walks read.
MATCH (t:IsoragEntity {isorag_eid: $topic})-[r1]-(a:IsoragEntity)-[r2]-(c:IsoragEntity)-[r3]-(b:IsoragEntity)
WHERE b.isorag_eid IN $answers AND b <> t AND type(r1) IN $types AND type(r2) IN $types AND type(r3) IN $types
WITH type(r1) AS t1, startNode(r1) = t AS o1, type(r2) AS t2, startNode(r2) = a AS o2, type(r3) AS t3,
     startNode(r3) = c AS o3, b
LIMIT $cap
RETURN [t1, t2, t3] AS types, [o1, o2, o3] AS outs, count(DISTINCT b) AS reached
