// Graph read replica (engine.retrieval.replica): what a replica of the KG would hold, from the counts store and
// the degree store (no property read): its entities and their outgoing relationships (ISORAG_IS_A type links
// included: an estimate, on the high side).
MATCH (n:IsoragEntity {isorag_kg: $kg})
RETURN count(n) AS entities, sum(COUNT { (n)-->() }) AS relationships
