// A KG's key aliases: each key a merge made an alias, with the entity it resolves to (its eid and its own key). A
// sync reads a file's triple that names an alias as the target's (as a load does); a change set's batches are cut
// with keys resolved through them. A KG has few (one per merged key).
MATCH (a:IsoragAlias {kg: $kg})
MATCH (n:IsoragEntity {isorag_eid: a.target})
RETURN a.key AS alias, n.isorag_key AS target, n.isorag_eid AS target_eid
