// Relation paths of one hop from a topic entity to the answers of a question whose data names no path (the
// learned generator's training label): per relationship type and direction, the answers reached. The KG's own
// relationship types only ($types); at most $cap walks are read.
MATCH (t:IsoragEntity {isorag_eid: $topic})-[r1]-(b:IsoragEntity)
WHERE b.isorag_eid IN $answers AND type(r1) IN $types
WITH type(r1) AS t1, startNode(r1) = t AS o1, b
LIMIT $cap
RETURN [t1] AS types, [o1] AS outs, count(DISTINCT b) AS reached
