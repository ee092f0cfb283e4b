// The aliases among these entity ids: a key merged into another entity resolves to it (engine.changes).
UNWIND $eids AS eid
MATCH (a:IsoragAlias {aid: eid})
RETURN a.aid AS aid, a.target AS target
