// A KG's aliases for a sync: each key a merge made an alias, with the key of the entity it resolves to (a file's
// triple that names an alias is the target's, as a load reads it). A KG has few (one per merge).
MATCH (a:IsoragAlias {kg: $kg})
MATCH (n:IsoragEntity {isorag_eid: a.target})
RETURN a.key AS alias, n.isorag_key AS target
