// Fragment (one-statement path): one cost tier, run only when no tier before it settled the top-k (`done`). Its
// parameters are the map ${{tier}}: how many of each node's candidates (k_<node>) and of each edge's types
// (k_<rel>) it keeps (the nearest; the lists and distances, $c_<node>, $d_<node>, $t_<rel>, $d_<rel>, are
// the statement's, shared by its tiers), its index, and
// `bound` (a binding that uses a candidate the tier leaves out costs more), `last` (it leaves none out) and `skip`
// (it keeps what the tier before kept: not run). It settles the top-k when it reaches the cap, when its k-th
// binding costs less than `bound`, or when it is the last. Every query has the same number of tiers, so that the
// statement's text depends on the pattern's shape alone.
CALL (done) {
  WITH done WHERE NOT done AND NOT ${{tier}}.skip
  CALL () {
    {{match}}
    WHERE {{conditions}}
    WITH {{nodes}} AS nodes, {{rels}} AS rels, {{gsd}} AS gsd
    LIMIT $cap
    RETURN nodes, rels, gsd
    ORDER BY gsd ASC
  }
  RETURN collect([gsd, nodes, rels]) AS found
}
WITH CASE WHEN done OR ${{tier}}.skip THEN rows ELSE found END AS rows,
     CASE WHEN done OR ${{tier}}.skip THEN tier ELSE ${{tier}}.index END AS tier,
     done OR (NOT ${{tier}}.skip AND (size(found) >= $cap OR (size(found) >= $k AND found[$k - 1][0] < ${{tier}}.bound)
                                    OR ${{tier}}.last)) AS done
