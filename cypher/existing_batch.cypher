// Nodes of the user's label not yet adopted into the KG ({label} validated and escaped by the caller).
MATCH (n{label})
WHERE n.eid IS NULL AND n[$key] IS NOT NULL
RETURN elementId(n) AS id, toString(n[$key]) AS key, toString(coalesce(n[$name], n[$key])) AS name
LIMIT $limit
