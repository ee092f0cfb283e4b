// Matcher (engine.retrieval.matcher): a batch of states along a pattern edge whose two ends are already mapped (a cycle, a
// multi-edge or a self-loop): the relationships between s.h and s.t. {{rel_types}} is empty or the edge's
// candidate types (validated against the KG's catalog and escaped by engine._cypher); {{arrow_in}} and
// {{arrow_out}} give the direction (engine._cypher.direction). Each row filters by its own s.types (null: any).
UNWIND $states AS s
MATCH (h:IsoragEntity {isorag_eid: s.h}){{arrow_in}}-[r{{rel_types}}]-{{arrow_out}}(t:IsoragEntity {isorag_eid: s.t})
WHERE (s.types IS NULL OR type(r) IN s.types)
RETURN s.id AS sid, collect([type(r), startNode(r) = h, t.isorag_eid]) AS hits
