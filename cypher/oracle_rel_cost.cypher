// Fragment (oracle): a relationship's distance, from the map $d_<rel> (relationship type -> distance).
$d_{{rel}}[type({{rel}})]
