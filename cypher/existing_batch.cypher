// Nodes of the user's label not yet adopted into any KG ({{label}} validated and escaped by the caller), with their
// key and name as text (a property holding a list or map gives null: such nodes are counted by existing_survey), and
// its aliases from the property $aliases (a list of strings, or one string; none when $aliases is null).
MATCH (n{{label}})
WHERE n.isorag_eid IS NULL AND toStringOrNull(n[$key]) IS NOT NULL
RETURN elementId(n) AS id, toStringOrNull(n[$key]) AS key,
       coalesce(toStringOrNull(n[$name]), toStringOrNull(n[$key])) AS name,
       CASE WHEN $aliases IS NULL OR n[$aliases] IS NULL THEN []
            WHEN n[$aliases] IS :: LIST<ANY> THEN [a IN n[$aliases] WHERE toStringOrNull(a) IS NOT NULL | toString(a)]
            ELSE [x IN [toStringOrNull(n[$aliases])] WHERE x IS NOT NULL] END AS aliases
LIMIT $limit
