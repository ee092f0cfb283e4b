// Key and name of entities by eid (any KG: eids are unique across KGs).
UNWIND $eids AS eid
MATCH (n:IsoragEntity {isorag_eid: eid})
RETURN n.isorag_eid AS eid, n.isorag_key AS key, n.isorag_name AS name
