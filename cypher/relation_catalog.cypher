MATCH (rt:IsoragRelationType {kg: $kg})
RETURN rt.rid AS rid, rt.name AS name, rt.type AS type
