// The database's indexes and index-backed constraints with the labels they are on (isorag 0.1's are dropped when
// unused, see engine.stores.graph.GraphStore._drop_v1_schema). A uniqueness constraint shows as its backing index.
SHOW INDEXES YIELD name, labelsOrTypes, owningConstraint
WHERE labelsOrTypes IS NOT NULL
RETURN DISTINCT coalesce(owningConstraint, name) AS name, labelsOrTypes AS labels,
       CASE WHEN owningConstraint IS NULL THEN 'index' ELSE 'constraint' END AS kind
