// Whether the database still holds data in isorag 0.1's format (labels Entity, RelationType, EntityType without
// the Isorag prefix): the KGs named by its catalog nodes, which carry kg and rid / tid (Entity nodes alone may be a
// user's own).
CALL () {
  MATCH (rt:RelationType) WHERE rt.kg IS NOT NULL AND rt.rid IS NOT NULL RETURN rt.kg AS kg
  UNION
  MATCH (ty:EntityType) WHERE ty.kg IS NOT NULL AND ty.tid IS NOT NULL RETURN ty.kg AS kg
}
RETURN collect(kg)[..20] AS kgs
