"""From a pattern to the top-k subgraphs: the pattern model and its LLM-text reader, the retriever and its results,
the exact matcher, the graph stage's paths (the in-process read replica, one statement per query, Cypher expansions)
and the seam that chooses among them, the table of name vectors kept beside the replica, the oracle, the statements
they run and the evidence text."""
