// An entity of a KG with its number of KG triples (as entity_neighbours counts them); no row: no such entity.
MATCH (n:IsoragEntity {isorag_eid: $eid, isorag_kg: $kg})
RETURN n.isorag_eid AS eid, n.isorag_name AS name, n.isorag_key AS key,
       COUNT { (n)-[r]-(m:IsoragEntity {isorag_kg: $kg}) WHERE type(r) <> 'ISORAG_IS_A' } AS degree
