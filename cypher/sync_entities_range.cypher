// One partition of a KG's entities for a sync: those whose eid lies in [$lo, $hi] (both ends included: a range seek
// on the eid constraint's index), with what a sync compares against its file: key, display name, types, whether the
// node is a user's own adopted in place (a sync from a file never removes those), whether it has something of its
// own (isorag_own: true, false, or null for an entity written before it was recorded), whether it has a description,
// whether it is in any triple, and its aliases. One row, one list of [eid, key, name, types, adopted, own, described,
// linked, aliases] (a row per entity costs the client more than the list).
MATCH (n:IsoragEntity)
WHERE n.isorag_eid >= $lo AND n.isorag_eid <= $hi AND n.isorag_kg = $kg
RETURN collect([n.isorag_eid, n.isorag_key, n.isorag_name, n.isorag_types, n.isorag_adopted IS NOT NULL,
                n.isorag_own, n.isorag_description IS NOT NULL,
                EXISTS { (n)-[r]-() WHERE NOT type(r) STARTS WITH 'ISORAG_' },
                coalesce(n.isorag_aliases, [])]) AS entities
