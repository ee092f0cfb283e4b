// How many distinct entities each relation path of two hops reaches from a topic entity (see learned_path_reach_1);
// distinct relationships, as the paths were found.
UNWIND $paths AS p
CALL {
  WITH p
  MATCH (t:IsoragEntity {isorag_eid: $topic})-[r1]-(a:IsoragEntity)-[r2]-(b:IsoragEntity)
  WHERE type(r1) = p.types[0] AND (startNode(r1) = t) = p.outs[0]
    AND type(r2) = p.types[1] AND (startNode(r2) = a) = p.outs[1] AND b <> t
  WITH DISTINCT b
  LIMIT $cap
  RETURN count(b) AS reach
}
RETURN p.i AS i, reach
