// Triples of a KG = out-degrees of its entities (read from the degree store), less the IS_A type links.
MATCH (n:Entity {kg: $kg})
RETURN sum(COUNT { (n)-->() }) - sum(COUNT { (n)-[:IS_A]->() }) AS triples
