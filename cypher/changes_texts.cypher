// What the vectors of these entities are embedded from (their name and description), for those that exist.
UNWIND $eids AS eid
MATCH (n:IsoragEntity {isorag_eid: eid})
WHERE n.isorag_kg = $kg
RETURN eid, n.isorag_name AS name, n.isorag_description AS description
