// Matcher (engine.retrieval.matcher): a batch of states along a pattern edge into an unknown node with no candidate list
// (its edge typed, so no degree cap). Slots as in match_expand_closing.
UNWIND $states AS s
MATCH (h:IsoragEntity {isorag_eid: s.h}){{arrow_in}}-[r{{rel_types}}]-{{arrow_out}}(t:IsoragEntity)
WHERE (s.types IS NULL OR type(r) IN s.types)
RETURN s.id AS sid, collect([type(r), startNode(r) = h, t.isorag_eid]) AS hits
