// Fragment (one-statement path): a known node's distance in its tier (entity id as text -> distance).
${{tier}}.d_{{node}}[toString({{node}}.isorag_eid)]
