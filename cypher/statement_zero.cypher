// Fragment (one-statement path): the GSD of a pattern with nothing known to compare (no named node, no relation).
0.0
