// Matcher (engine.retrieval.matcher): a batch of states along a pattern edge into a node with candidates ($cands), every
// source expanded (hubs too). Slots as in match_expand_closing.
UNWIND $states AS s
MATCH (h:IsoragEntity {isorag_eid: s.h}){{arrow_in}}-[r{{rel_types}}]-{{arrow_out}}(t:IsoragEntity)
WHERE (s.types IS NULL OR type(r) IN s.types) AND t.isorag_eid IN $cands
RETURN s.id AS sid, collect([type(r), startNode(r) = h, t.isorag_eid]) AS hits
