// The anchors of a neighbourhood fetch (engine.scoring.neighbourhood): which exist in this KG, their degree
// (degree store) and whether they are nameless.
UNWIND $eids AS eid
MATCH (n:Entity {eid: eid})
WHERE n.kg = $kg
RETURN n.eid AS eid, COUNT { (n)--() } AS degree,
       (n.name IS NULL OR n.name = '' OR n.name =~ $nameless) AS nameless
