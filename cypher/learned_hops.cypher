// One step of the relation paths at a topic (engine/learned/compose.py): per entity, per relationship type (the
// KG's own, $types) and direction, up to $cap of the entities it leads to. Read once per hop from the frontier.
UNWIND $eids AS eid
MATCH (n:IsoragEntity {isorag_eid: eid})-[r]-(m:IsoragEntity)
WHERE type(r) IN $types
RETURN eid, type(r) AS type, startNode(r) = n AS out, collect(DISTINCT m.isorag_eid)[..$cap] AS next
