// Before an adoption ({{label}} validated and escaped by the caller): how many nodes the label has, how many have no
// usable key (missing, or a list or map) and how many another KG has adopted already (a node is in one KG at most).
MATCH (n{{label}})
RETURN count(n) AS nodes,
       count(CASE WHEN toStringOrNull(n[$key]) IS NULL THEN 1 END) AS no_key,
       count(CASE WHEN n.isorag_kg IS NOT NULL AND n.isorag_kg <> $kg THEN 1 END) AS other_kg,
       collect(DISTINCT CASE WHEN n.isorag_kg <> $kg THEN n.isorag_kg END)[..5] AS other_kgs
