// A synthetic sample's own query (engine.evaluation.synth, built by engine.retrieval.statements.answer_statement): every
// binding of its pattern with the seeds fixed ({{conditions}}: synth_seed and distinct_pair, true when none),
// returning the answer's eid and the matched triples (triple_of fragments) per row.
{{match}}
WHERE {{conditions}}
RETURN {{answer}}.isorag_eid AS answer, [{{triples}}] AS triples
LIMIT $limit
