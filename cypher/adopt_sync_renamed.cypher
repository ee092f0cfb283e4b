// Adoption re-sync ({{label}} validated and escaped by the caller): the KG's adopted nodes, still of the label with
// the same key, whose name property (else key) is no longer the name isorag embedded.
MATCH (n:IsoragEntity {isorag_kg: $kg})
WHERE n.isorag_adopted AND n{{label}} AND toStringOrNull(n[$key]) = n.isorag_key
WITH n, coalesce(toStringOrNull(n[$name]), toStringOrNull(n[$key])) AS name
WHERE n.isorag_name IS NULL OR name <> n.isorag_name
RETURN n.isorag_key AS key, name
