// Graph read replica (engine.retrieval.replica): every entity of a KG, one row each, streamed: its eid, name, key,
// whether it has a description, its entity type ids and its outgoing relationships to entities of the KG as
// [relationship type, tail eid] (isorag's own ISORAG_* links left out). One read for the whole KG.
MATCH (h:IsoragEntity {isorag_kg: $kg})
RETURN h.isorag_eid AS eid, h.isorag_name AS name, h.isorag_key AS key,
       h.isorag_description IS NOT NULL AS described,
       [(h)-[:ISORAG_IS_A]->(ty:IsoragEntityType) | ty.tid] AS tids,
       [(h)-[r]->(t:IsoragEntity) WHERE t.isorag_kg = $kg AND NOT type(r) STARTS WITH 'ISORAG_' |
        [type(r), t.isorag_eid]] AS out
