// Entity records (labels, types, aliases) from the source: set the display name, add types and aliases (an alias
// equal to the entity's name is not kept). An entity a record describes has something of its own (isorag_own: it
// stays without triples, engine.changes.statements). Returns each entity's name and description (what its vector
// is embedded from).
UNWIND $rows AS row
MERGE (n:IsoragEntity {isorag_eid: row.eid})
  ON CREATE SET n.isorag_kg = $kg, n.isorag_key = row.key, n.isorag_name = coalesce(row.name, row.key_name),
                n.isorag_name_key = coalesce(row.name_key, row.key_name_key), n.isorag_types = row.types
  ON MATCH SET n.isorag_name = coalesce(row.name, n.isorag_name),
               n.isorag_name_key = coalesce(row.name_key, n.isorag_name_key),
               n.isorag_types = reduce(acc = coalesce(n.isorag_types, []), t IN row.types |
                                       CASE WHEN t IN acc THEN acc ELSE acc + t END)
WITH n, row, [a IN coalesce(row.aliases, []) WHERE a <> n.isorag_name] AS aliases
SET n.isorag_own = true,
    n.isorag_aliases = CASE WHEN size(aliases) = 0 THEN n.isorag_aliases
                       ELSE reduce(acc = coalesce(n.isorag_aliases, []), a IN aliases |
                                   CASE WHEN a IN acc THEN acc ELSE acc + a END) END
RETURN n.isorag_eid AS eid, n.isorag_name AS name, n.isorag_description AS description
