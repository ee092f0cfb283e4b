// The entities of a change set's added triples that do not exist yet (rows {eid, key, name, name_key, types}, one
// row per eid; key: the resolved key, whose eid is eid): created, bare (nothing of their own: they leave with their
// last triple); existing ones are only looked up (an index seek, no write lock). Exact under the KG's writer lease
// (one writer; the eid constraint refuses a duplicate anyway). Returns the eids created here.
CYPHER replan=skip
UNWIND $rows AS row
OPTIONAL MATCH (old:IsoragEntity {isorag_eid: row.eid})
WITH row, old
WHERE old IS NULL
CREATE (n:IsoragEntity {isorag_eid: row.eid})
SET n.isorag_kg = $kg, n.isorag_key = row.key, n.isorag_name = row.name, n.isorag_name_key = row.name_key,
    n.isorag_types = row.types, n.isorag_own = false
RETURN row.eid AS eid
