// Remove triples (rows {i, h, t, type}): isorag's own relationship of that type from h to t (a user's relationship,
// without isorag_name, is never deleted). Returns the rows' i and how many relationships each deleted.
UNWIND $rows AS row
OPTIONAL MATCH (h:IsoragEntity {isorag_eid: row.h})-[r]->(t:IsoragEntity {isorag_eid: row.t})
WHERE type(r) = row.type AND r.isorag_name IS NOT NULL
WITH row, collect(r) AS rs
FOREACH (r IN rs | DELETE r)
RETURN row.i AS i, size(rs) AS removed
