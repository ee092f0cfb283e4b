// The one-statement path (engine.retrieval.one_statement): a connected pattern's exact top-k in one statement, built
// by engine.retrieval.statements.match_statement. {{tiers}}: one match_statement_tier block per cost tier, each
// enumerating (at most $cap) bindings only when the tiers before it did not settle the top-k. The rows returned
// are those within $eps of the $k-th smallest GSD of the tier that settled it (all its ties), with the names and
// keys of their entities and of $near (the named nodes' nearest candidates, for the name check), as one list
// [tier, n, top, names] (one value to decode): `tier` says which tier that was (-1: none ran) and `n` how many
// bindings it enumerated ($cap: too many, not settled).
WITH [] AS rows, -1 AS tier, false AS done
{{tiers}}
WITH tier, size(rows) AS n, CASE WHEN size(rows) <= $k THEN rows
                                 ELSE [r IN rows WHERE r[0] <= rows[$k - 1][0] + $eps] END AS top
CALL (top) {
  UNWIND [r IN top | r[1]] + [$near] AS eids
  UNWIND eids AS e
  WITH DISTINCT e
  MATCH (x:IsoragEntity {isorag_eid: e})
  RETURN collect([e, x.isorag_name, x.isorag_key]) AS names
}
RETURN [tier, n, top, names] AS out
