// Fragment (oracle): a known node's distance, from the map $d_<node> (eid as text -> distance).
$d_{{node}}[toString({{node}}.isorag_eid)]
