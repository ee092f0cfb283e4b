// Delete one batch of the relationships isorag made for a KG; run until it deletes nothing, before the nodes (a
// DETACH DELETE of a batch of hub nodes would hold all their relationships in one transaction). isorag's own: every
// relationship of an entity isorag created, and on an adopted entity (a user's node) only the relationships isorag
// wrote (they carry isorag_name) and its type links; the user's own relationships are never touched.
MATCH (n:IsoragEntity {isorag_kg: $kg})-[r]-()
WHERE n.isorag_adopted IS NULL OR r.isorag_name IS NOT NULL OR type(r) = 'ISORAG_IS_A'
WITH DISTINCT r LIMIT $limit
DELETE r
RETURN count(*) AS deleted
