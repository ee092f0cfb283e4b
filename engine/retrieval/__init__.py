"""From a pattern to the top-k subgraphs: the pattern model and its LLM-text reader, the retriever, the exact matcher, the oracle and the statements they run."""
