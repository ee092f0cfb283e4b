// Resolve keys to their final entity (engine.stores.aliases.resolve_keys): among these key eids ($eids, each the
// eid of a key), those that are aliases, each with the entity it resolves to (its eid and its own key). An alias
// always names an entity's own eid (merges repoint the aliases of what they merge away; a removal deletes the
// aliases of what it removes), so one hop is the final entity.
CYPHER replan=skip
UNWIND $eids AS eid
MATCH (a:IsoragAlias {aid: eid})
MATCH (n:IsoragEntity {isorag_eid: a.target})
RETURN a.aid AS aid, n.isorag_eid AS target, n.isorag_key AS key
