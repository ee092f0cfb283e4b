// Fragment (one-statement path): a pattern edge's relationship of one of its tier's candidate types (the first
// k_<rel> of $t_<rel>, which lists them nearest first).
type({{rel}}) IN $t_{{rel}}[0..${{tier}}.k_{{rel}}]
