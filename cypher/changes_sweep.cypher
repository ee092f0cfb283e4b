// Entities that only triples brought in leave with their last triple (rows {eid, default_name}: the batch's
// entities that may have lost theirs; most have not, so whether one has a relationship left is asked first).
// One is deleted when it is isorag's own node (never a user's adopted one), has no relationship left and
// nothing of its own: no alias resolves to it and it was given no name, description or types (isorag_own
// false; an entity written before isorag_own, which has none, counts as bare only with its key's default name
// and no description or types). Returns the eids deleted. (The same rule in Python:
// engine.changes.statements.stays_without_triples.)
UNWIND $rows AS row
MATCH (n:IsoragEntity {isorag_eid: row.eid})
WHERE NOT EXISTS { (n)--() }
WITH n, row
WHERE n.isorag_kg = $kg AND n.isorag_adopted IS NULL AND NOT EXISTS { MATCH (:IsoragAlias {target: n.isorag_eid}) }
  AND (n.isorag_own = false
       OR (n.isorag_own IS NULL AND n.isorag_name = row.default_name AND n.isorag_description IS NULL
           AND size(coalesce(n.isorag_types, [])) = 0))
WITH n, row.eid AS eid
DELETE n
RETURN eid
