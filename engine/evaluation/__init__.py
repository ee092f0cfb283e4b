"""Ground truth sampled from a KG (synth) and the metrics that score retrieval, answers and verdicts against it."""
