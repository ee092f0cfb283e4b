// Which of these entity ids exist in the KG, and whether each is an adopted node (the user's own).
CYPHER replan=skip
UNWIND $eids AS eid
MATCH (n:IsoragEntity {isorag_eid: eid})
WHERE n.isorag_kg = $kg
RETURN eid, coalesce(n.isorag_adopted, false) AS adopted
