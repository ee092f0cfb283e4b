// One statement per ';'-terminated block, applied before any write. Idempotent.
// Everything isorag writes is namespaced (docs/security.md): its own labels (Isorag*), and on entity nodes, which may be
// a user's own nodes adopted in place, only isorag_* properties. An entity's source key is not indexed: its eid is
// a digest of (kg, key), so a look-up by key is a look-up by eid, and a key of any length can be stored. Names are
// looked up through isorag_name_key (engine.stores.graph.name_key: the name, or a digest of a name too long to index).
// (The names differ from isorag 0.1's schema on Entity/RelationType/EntityType, which engine.stores.graph.GraphStore
// drops once no data of that format is left: IF NOT EXISTS would take a same-named old one for the new one.)
CREATE CONSTRAINT isoragentity_eid IF NOT EXISTS FOR (n:IsoragEntity) REQUIRE n.isorag_eid IS UNIQUE;
CREATE INDEX isoragentity_kg IF NOT EXISTS FOR (n:IsoragEntity) ON (n.isorag_kg);
CREATE INDEX isoragentity_name_key IF NOT EXISTS FOR (n:IsoragEntity) ON (n.isorag_name_key);
CREATE CONSTRAINT isoragreltype_rid IF NOT EXISTS FOR (n:IsoragRelationType) REQUIRE n.rid IS UNIQUE;
CREATE INDEX isoragreltype_kg IF NOT EXISTS FOR (n:IsoragRelationType) ON (n.kg);
CREATE CONSTRAINT isoragetype_tid IF NOT EXISTS FOR (n:IsoragEntityType) REQUIRE n.tid IS UNIQUE;
CREATE INDEX isoragetype_kg IF NOT EXISTS FOR (n:IsoragEntityType) ON (n.kg);
CREATE CONSTRAINT isoraglock_kg IF NOT EXISTS FOR (n:IsoragLock) REQUIRE n.kg IS UNIQUE;
CREATE CONSTRAINT isoragkgversion_kg IF NOT EXISTS FOR (n:IsoragKGVersion) REQUIRE n.kg IS UNIQUE;
CREATE CONSTRAINT isoragalias_aid IF NOT EXISTS FOR (n:IsoragAlias) REQUIRE n.aid IS UNIQUE;
CREATE INDEX isoragalias_target IF NOT EXISTS FOR (n:IsoragAlias) ON (n.target);
CREATE INDEX isoragalias_kg IF NOT EXISTS FOR (n:IsoragAlias) ON (n.kg);
// Names and aliases by spelling (engine.linking): words folded (no case, no diacritics), looked up with fuzzy edits;
// isorag_kg is indexed too, so that a query asks for one KG's entities.
CREATE FULLTEXT INDEX isoragentity_names IF NOT EXISTS FOR (n:IsoragEntity) ON EACH [n.isorag_name, n.isorag_aliases, n.isorag_kg] OPTIONS {indexConfig: {`fulltext.analyzer`: 'standard-folding'}};
