// What the vectors of these entities are embedded from (their name and description, and their aliases, each
// embedded alone), for those that exist.
CYPHER replan=skip
UNWIND $eids AS eid
MATCH (n:IsoragEntity {isorag_eid: eid})
WHERE n.isorag_kg = $kg
RETURN eid, n.isorag_name AS name, n.isorag_description AS description, coalesce(n.isorag_aliases, []) AS aliases
