// One statement per ';'-terminated block, applied before any write. Idempotent.
CREATE CONSTRAINT isorag_entity_eid IF NOT EXISTS FOR (n:Entity) REQUIRE n.eid IS UNIQUE;
CREATE CONSTRAINT isorag_entity_kg_key IF NOT EXISTS FOR (n:Entity) REQUIRE (n.kg, n.key) IS UNIQUE;
CREATE INDEX isorag_entity_kg IF NOT EXISTS FOR (n:Entity) ON (n.kg);
CREATE INDEX isorag_entity_name IF NOT EXISTS FOR (n:Entity) ON (n.name);
CREATE CONSTRAINT isorag_reltype_rid IF NOT EXISTS FOR (n:RelationType) REQUIRE n.rid IS UNIQUE;
CREATE INDEX isorag_reltype_kg IF NOT EXISTS FOR (n:RelationType) ON (n.kg);
CREATE CONSTRAINT isorag_etype_tid IF NOT EXISTS FOR (n:EntityType) REQUIRE n.tid IS UNIQUE;
CREATE INDEX isorag_etype_kg IF NOT EXISTS FOR (n:EntityType) ON (n.kg);
