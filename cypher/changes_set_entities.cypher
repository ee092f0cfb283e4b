// Set entities' display names and descriptions (rows {eid, key, name, name_key, set_desc, description,
// default_name, default_name_key, own}); an entity that is missing is created (named by its key, as an added
// triple makes it). isorag_own says whether the entity has something of its own (it stays without triples): a set
// gives it, a reset takes it away. Returns each entity's eid, whether it was created here, and the name and
// description before and after: the caller compares the texts the vector is embedded from (engine.stores.texts),
// so a field going from null to a value, or back, is a change (a list holding a null compares as null in Cypher).
CYPHER replan=skip
UNWIND $rows AS row
MERGE (n:IsoragEntity {isorag_eid: row.eid})
  ON CREATE SET n.isorag_kg = $kg, n.isorag_key = row.key, n.isorag_name = row.default_name,
                n.isorag_name_key = row.default_name_key, n.isorag_types = [], n.isorag_new = true
WITH n, row, n.isorag_name AS name_before, n.isorag_description AS desc_before,
     coalesce(n.isorag_new, false) AS created
SET n.isorag_name = coalesce(row.name, n.isorag_name), n.isorag_name_key = coalesce(row.name_key, n.isorag_name_key),
    n.isorag_description = CASE WHEN row.set_desc THEN row.description ELSE n.isorag_description END,
    n.isorag_own = row.own
REMOVE n.isorag_new
RETURN n.isorag_eid AS eid, created, name_before, desc_before, n.isorag_name AS name,
       n.isorag_description AS description
