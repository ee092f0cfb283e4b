// Matcher (engine.retrieval.matcher): a batch of states along a pattern edge into a node with candidates ($cands), where a
// source of more than $dense relationships (a hub) is not expanded: deg tells the caller which, and it reaches
// those from the candidates' side when that is cheaper (expand_from_candidates). Slots as in match_expand_closing.
UNWIND $states AS s
MATCH (h:IsoragEntity {isorag_eid: s.h})
WITH s, h, COUNT { (h)--() } AS deg
CALL (s, h, deg) {
  WITH s, h, deg WHERE deg <= $dense
  MATCH (h){{arrow_in}}-[r{{rel_types}}]-{{arrow_out}}(t:IsoragEntity)
  WHERE (s.types IS NULL OR type(r) IN s.types) AND t.isorag_eid IN $cands
  RETURN collect([type(r), startNode(r) = h, t.isorag_eid]) AS hits
}
RETURN s.id AS sid, deg, hits
