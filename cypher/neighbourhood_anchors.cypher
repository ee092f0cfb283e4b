// The anchors of a neighbourhood fetch (engine.scoring.neighbourhood): which exist in this KG, their degree
// (degree store) and whether they are nameless.
UNWIND $eids AS eid
MATCH (n:IsoragEntity {isorag_eid: eid})
WHERE n.isorag_kg = $kg
RETURN n.isorag_eid AS eid, COUNT { (n)--() } AS degree,
       (n.isorag_name IS NULL OR n.isorag_name = '' OR n.isorag_name =~ $nameless) AS nameless
