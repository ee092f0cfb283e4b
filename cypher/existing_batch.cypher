// Nodes of the user's label not yet adopted into any KG ({{label}} validated and escaped by the caller), with their
// key and name as text (a property holding a list or map gives null: such nodes are counted by existing_survey).
MATCH (n{{label}})
WHERE n.isorag_eid IS NULL AND toStringOrNull(n[$key]) IS NOT NULL
RETURN elementId(n) AS id, toStringOrNull(n[$key]) AS key,
       coalesce(toStringOrNull(n[$name]), toStringOrNull(n[$key])) AS name
LIMIT $limit
