// The oracle of a pattern with an edge that has no candidate type: no row.
RETURN 1 AS nothing LIMIT 0
