"""From a pattern to the top-k subgraphs: the pattern model and its LLM-text reader, the retriever and its results,
the exact matcher, the oracle, the statements they run and the evidence text."""
