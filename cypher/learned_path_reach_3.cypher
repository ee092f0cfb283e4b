// How many distinct entities each relation path of three hops reaches from a topic entity (see
// learned_path_reach_1); distinct relationships, as the paths were found.
UNWIND $paths AS p
CALL {
  WITH p
  MATCH (t:IsoragEntity {isorag_eid: $topic})-[r1]-(a:IsoragEntity)-[r2]-(c:IsoragEntity)-[r3]-(b:IsoragEntity)
  WHERE type(r1) = p.types[0] AND (startNode(r1) = t) = p.outs[0]
    AND type(r2) = p.types[1] AND (startNode(r2) = a) = p.outs[1]
    AND type(r3) = p.types[2] AND (startNode(r3) = c) = p.outs[2] AND b <> t
  WITH DISTINCT b
  LIMIT $cap
  RETURN count(b) AS reach
}
RETURN p.i AS i, reach
