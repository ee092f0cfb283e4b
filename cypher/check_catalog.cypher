// The KG's relation and type catalog: ids and names (what their vectors are embedded from).
CALL () {
  MATCH (rt:IsoragRelationType {kg: $kg})
  RETURN 'relations' AS kind, rt.rid AS id, rt.name AS name
  UNION
  MATCH (ty:IsoragEntityType {kg: $kg})
  RETURN 'types' AS kind, ty.tid AS id, ty.name AS name
}
RETURN kind, id, name
