// How many distinct entities each relation path of one hop reaches from a topic entity (the learned generator's
// training weighs a question's candidate paths by precision as well as recall: a path through a hub, a year or a
// genre, reaches its answers among thousands of others). $paths: [{i, types: [t1], outs: [o1]}]; at most $cap
// entities counted per path.
UNWIND $paths AS p
CALL {
  WITH p
  MATCH (t:IsoragEntity {isorag_eid: $topic})-[r1]-(b:IsoragEntity)
  WHERE type(r1) = p.types[0] AND (startNode(r1) = t) = p.outs[0] AND b <> t
  WITH DISTINCT b
  LIMIT $cap
  RETURN count(b) AS reach
}
RETURN p.i AS i, reach
