// Adoption re-sync ({{label}} validated and escaped by the caller): how many nodes of the label no KG has adopted yet
// and have a usable key (what the adoption will add).
MATCH (n{{label}})
WHERE n.isorag_eid IS NULL AND toStringOrNull(n[$key]) IS NOT NULL
RETURN count(n) AS new
