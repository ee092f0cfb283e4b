// Drop one of isorag 0.1's constraints by name ({{name}}: a name read from SHOW CONSTRAINTS, escaped by
// engine._cypher.identifier), once no data of that format is left (GraphStore._drop_v1_schema).
DROP CONSTRAINT {{name}} IF EXISTS
