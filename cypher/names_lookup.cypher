// The entities a written name may mean (engine.linking.search): for each full-text query ($queries: {id, text: a
// Lucene query of fuzzy words, engine.linking.names.fulltext_query}) the entities of KG $kg that the index
// isoragentity_names finds over names and aliases (at most $limit a query), and for each exact name ($exact: {id,
// name, name_key}) the entities named so; each row with the entity's name, key and aliases, from which the caller
// measures the spelling distance.
CALL () {
  UNWIND $queries AS q
  CALL db.index.fulltext.queryNodes('isoragentity_names', q.text, {limit: $limit}) YIELD node
  WITH q, node WHERE node.isorag_kg = $kg
  RETURN q.id AS id, node
  UNION ALL
  UNWIND $exact AS row
  MATCH (node:IsoragEntity {isorag_name_key: row.name_key})
  WHERE node.isorag_kg = $kg AND node.isorag_name = row.name
  RETURN row.id AS id, node
}
RETURN id, node.isorag_eid AS eid, node.isorag_name AS name, node.isorag_key AS key,
       coalesce(node.isorag_aliases, []) AS aliases
