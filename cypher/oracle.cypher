// The matcher's test oracle (engine.retrieval.oracle): every binding of a pattern with its GSD, ascending. Built by
// engine.retrieval.statements.oracle_statement: {{match}} one MATCH (relationships distinct) or one per edge,
// {{conditions}} the candidate filters and distinctness (oracle_in_candidates, distinct_pair; true when none),
// {{gsd}} the sum of oracle_node_cost and oracle_rel_cost terms, {{columns}} oracle_node_column and
// oracle_rel_column. Candidates and distances are parameters ($c_<node>, $d_<node>, $d_<rel>).
{{match}}
WHERE {{conditions}}
WITH *, {{gsd}} AS gsd
RETURN {{columns}}, gsd
ORDER BY gsd ASC
LIMIT $limit
