UNWIND $eids AS eid
MATCH (n:Entity {eid: eid})
RETURN n.eid AS eid, n.key AS key, n.name AS name
