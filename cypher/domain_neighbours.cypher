// Matcher pre-pass: for each (known pattern node, pattern edge) row, the distinct entities adjacent to any of the
// known node's candidates through any of the edge's candidate types (s.types null: any type), at most $cap of them
// (a capped set constrains nothing). An unknown node's domain is the intersection of these sets over its known
// neighbours: a superset of every entity a complete match can bind there, so pruning by it keeps the top-k exact.
UNWIND $rows AS s
CALL (s) {
  UNWIND s.cands AS c
  MATCH (h:IsoragEntity {isorag_eid: c})-[r]-(t:IsoragEntity)
  WHERE s.types IS NULL OR type(r) IN s.types
  WITH DISTINCT t.isorag_eid AS eid
  LIMIT $cap
  RETURN collect(eid) AS eids
}
RETURN s.id AS id, eids
