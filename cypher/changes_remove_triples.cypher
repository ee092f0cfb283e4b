// Remove triples (rows {i, h, t, type}): isorag's own relationship of that type from h to t (a user's relationship,
// without isorag_name, is never deleted). Returns the rows' i, how many relationships each deleted, and whether its
// head and tail are left with no relationship once it is deleted (only those can leave with their last triple: the
// sweep, changes_sweep, is asked about them alone; the row of a node that reads the deletions of all rows before it
// is its last, so a node left bare is reported bare by at least one row).
UNWIND $rows AS row
OPTIONAL MATCH (h:IsoragEntity {isorag_eid: row.h})-[r]->(t:IsoragEntity {isorag_eid: row.t})
WHERE type(r) = row.type AND r.isorag_name IS NOT NULL
WITH row, h, t, collect(r) AS rs
FOREACH (r IN rs | DELETE r)
RETURN row.i AS i, size(rs) AS removed,
       h IS NOT NULL AND NOT EXISTS { (h)--() } AS h_bare,
       t IS NOT NULL AND NOT EXISTS { (t)--() } AS t_bare
