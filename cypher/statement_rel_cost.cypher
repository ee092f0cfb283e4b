// Fragment (one-statement path): an edge's distance in its tier (relationship type -> distance).
${{tier}}.d_{{rel}}[type({{rel}})]
