// Matcher: the relationships between the candidates of a pattern node and some hub entities ($srcs), fetched from
// the candidates' side. A best-first expansion whose source is a hub would otherwise read every relationship of the
// hub to find the few that reach a candidate; from the candidates' side the work is the candidates' own degrees.
// Grouped by hub h; `out` is true when the relationship starts at h. Types and directions are filtered by the
// caller (each state has its own).
UNWIND $cands AS c
MATCH (t:IsoragEntity {isorag_eid: c})
CALL (t) {
  MATCH (t)-[r]-(h:IsoragEntity)
  WHERE h.isorag_eid IN $srcs
  RETURN r, h
}
RETURN h.isorag_eid AS h, collect([type(r), startNode(r) = h, t.isorag_eid]) AS hits
