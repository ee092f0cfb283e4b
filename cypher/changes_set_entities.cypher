// Set entities' display names and descriptions (rows {eid, key, name, name_key, set_desc, description,
// default_name, default_name_key}); an entity that is missing is created. Returns each entity's eid and whether
// the text its vector is embedded from (name, description) changed.
UNWIND $rows AS row
MERGE (n:IsoragEntity {isorag_eid: row.eid})
  ON CREATE SET n.isorag_kg = $kg, n.isorag_key = row.key, n.isorag_name = row.default_name,
                n.isorag_name_key = row.default_name_key, n.isorag_types = [], n.isorag_new = true
WITH n, row, [n.isorag_name, n.isorag_description] AS before, coalesce(n.isorag_new, false) AS created
SET n.isorag_name = coalesce(row.name, n.isorag_name), n.isorag_name_key = coalesce(row.name_key, n.isorag_name_key),
    n.isorag_description = CASE WHEN row.set_desc THEN row.description ELSE n.isorag_description END
REMOVE n.isorag_new
RETURN n.isorag_eid AS eid, created OR before <> [n.isorag_name, n.isorag_description] AS changed
