// The keys these entity ids are aliases of (a key merged into another entity by an earlier change set): the batch
// cutter compares keys as the statements will resolve them (engine.changes.apply).
UNWIND $eids AS eid
MATCH (a:IsoragAlias {aid: eid})
MATCH (n:IsoragEntity {isorag_eid: a.target})
RETURN a.aid AS aid, n.isorag_key AS target
