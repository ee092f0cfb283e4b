// Key values held by more than one node of the label ({{label}} validated and escaped by the caller): a key names one
// entity, so such a graph cannot be adopted as it is. Up to 5 of them, and how many there are.
MATCH (n{{label}})
WITH toStringOrNull(n[$key]) AS key, count(*) AS c
WHERE key IS NOT NULL AND c > 1
RETURN collect([key, c])[..5] AS examples, count(*) AS keys
