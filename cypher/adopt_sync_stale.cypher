// Adoption re-sync ({{label}} validated and escaped by the caller): the KG's adopted nodes that no longer are what
// was adopted (the label removed, the key property removed, made a list or map, or changed: a changed key is another
// entity, adopted anew). Their eids, and whether the node is re-keyed (still of the label, with another usable key:
// it is adopted again under it). The nodes themselves are the user's.
MATCH (n:IsoragEntity {isorag_kg: $kg})
WHERE n.isorag_adopted AND (NOT n{{label}} OR toStringOrNull(n[$key]) IS NULL OR toStringOrNull(n[$key]) <> n.isorag_key)
RETURN n.isorag_eid AS eid, (n{{label}} AND toStringOrNull(n[$key]) IS NOT NULL) AS rekeyed
