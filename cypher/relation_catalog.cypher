// The relation catalog of one KG: relation id, original name and relationship type.
MATCH (rt:IsoragRelationType {kg: $kg})
RETURN rt.rid AS rid, rt.name AS name, rt.type AS type
