// Fragment (one-statement path): a pattern edge's relationship of one of its tier's candidate types.
type({{rel}}) IN ${{tier}}.t_{{rel}}
