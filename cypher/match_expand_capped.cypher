// Matcher (engine.retrieval.matcher): a batch of states along a wildcard edge (any type) into an untyped unknown node: at
// most $cap relationships per state (the caller warns when the degree cap is reached). Slots as in
// match_expand_closing.
UNWIND $states AS s
CALL (s) {
  MATCH (h:IsoragEntity {isorag_eid: s.h}){{arrow_in}}-[r{{rel_types}}]-{{arrow_out}}(t:IsoragEntity)
  WHERE (s.types IS NULL OR type(r) IN s.types)
  WITH type(r) AS type, startNode(r) = h AS out, t.isorag_eid AS t LIMIT $cap
  RETURN collect([type, out, t]) AS hits
}
RETURN s.id AS sid, hits
