// Triples of a KG: the relationships from its entities to its entities. A node isorag created has only those and its
// ISORAG_IS_A type links, so its count comes from the degree store; an adopted node (a user's own) may also have
// relationships to nodes outside the KG, so its relationships are read.
MATCH (n:IsoragEntity {isorag_kg: $kg})
RETURN sum(CASE WHEN n.isorag_adopted
                THEN COUNT { (n)-->(m:IsoragEntity) WHERE m.isorag_kg = $kg }
                ELSE COUNT { (n)-->() } - COUNT { (n)-[:ISORAG_IS_A]->() } END) AS triples
