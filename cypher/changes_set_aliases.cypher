// Set entities' aliases (rows {eid, aliases, replace, remove}): replace them or add to them, then drop those to
// remove; an alias equal to the entity's name is not kept. Returns each entity's eid and whether its aliases changed
// (their vectors follow: engine.changes.apply.sync_vectors).
UNWIND $rows AS row
MATCH (n:IsoragEntity {isorag_eid: row.eid})
WITH n, row, coalesce(n.isorag_aliases, []) AS before
WITH n, row, before,
     CASE WHEN row.replace THEN row.aliases
          ELSE reduce(acc = before, a IN row.aliases | CASE WHEN a IN acc THEN acc ELSE acc + a END) END AS kept
WITH n, before, [a IN kept WHERE NOT a IN row.remove AND a <> n.isorag_name] AS after
SET n.isorag_aliases = CASE WHEN size(after) = 0 THEN null ELSE after END
RETURN n.isorag_eid AS eid, before <> after AS changed
