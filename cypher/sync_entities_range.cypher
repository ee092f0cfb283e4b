// One partition of a KG's entities for a sync: those whose eid lies in [$lo, $hi] (both ends included: a range seek
// on the eid constraint's index), with what a sync compares against its file: key, display name, types, whether
// the node is a user's own adopted in place (a sync from a file never removes those) and aliases. One row, one list
// of [eid, key, name, types, adopted, aliases] (a row per entity costs the client more than the list).
MATCH (n:IsoragEntity)
WHERE n.isorag_eid >= $lo AND n.isorag_eid <= $hi AND n.isorag_kg = $kg
RETURN collect([n.isorag_eid, n.isorag_key, n.isorag_name, n.isorag_types, n.isorag_adopted IS NOT NULL,
                coalesce(n.isorag_aliases, [])]) AS entities
