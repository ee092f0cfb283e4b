// The relation and type catalog nodes among these ids that exist, with their names (what their vectors embed).
CYPHER replan=skip
CALL () {
  UNWIND $rids AS id
  MATCH (rt:IsoragRelationType {rid: id})
  WHERE rt.kg = $kg
  RETURN 'relations' AS kind, id, rt.name AS name
  UNION
  UNWIND $tids AS id
  MATCH (ty:IsoragEntityType {tid: id})
  WHERE ty.kg = $kg
  RETURN 'types' AS kind, id, ty.name AS name
}
RETURN kind, id, name
