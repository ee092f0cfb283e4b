// Give adopted nodes back (adoption re-sync: they left the label or their key changed): delete only what isorag
// wrote on them (relationships carrying isorag_name, type links), then remove isorag's label and isorag_* properties.
// The node, its other labels, properties and its own relationships are the user's and stay as they are.
UNWIND $eids AS eid
MATCH (n:IsoragEntity {isorag_eid: eid})
WHERE n.isorag_kg = $kg AND n.isorag_adopted
CALL (n) {
  MATCH (n)-[r]-()
  WHERE r.isorag_name IS NOT NULL OR type(r) = 'ISORAG_IS_A'
  DELETE r
}
REMOVE n:IsoragEntity, n.isorag_eid, n.isorag_kg, n.isorag_key, n.isorag_name, n.isorag_name_key, n.isorag_types,
       n.isorag_adopted, n.isorag_description, n.isorag_own
RETURN count(*) AS released
