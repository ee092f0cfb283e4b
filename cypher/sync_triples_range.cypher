// One part of a KG's triples for a sync: those whose head's eid lies in [$lo, $hi] and whose tail's eid lies in
// [$tlo, $thi] (all ends included; the whole eid space for the tail but in a partition cut by tails because its heads
// have more triples than a partition holds), at most $limit of them, as [head eid, relationship type, tail eid] in
// one list (integers and a type: no property strings to send). Only what isorag wrote: every relationship of a node
// isorag created but its ISORAG_* links, and on a user's node adopted in place only the relationships carrying
// isorag_name, so a user's own relationships are never compared or removed.
MATCH (h:IsoragEntity)
WHERE h.isorag_eid >= $lo AND h.isorag_eid <= $hi AND h.isorag_kg = $kg
MATCH (h)-[r]->(t:IsoragEntity)
WHERE NOT type(r) STARTS WITH 'ISORAG_' AND (h.isorag_adopted IS NULL OR r.isorag_name IS NOT NULL)
  AND t.isorag_eid >= $tlo AND t.isorag_eid <= $thi
WITH h, r, t
LIMIT $limit
RETURN collect([h.isorag_eid, type(r), t.isorag_eid]) AS triples
