// Fragment (one-statement path): a pattern node bound to one of its tier's candidates (the first k_<node> of
// $c_<node>, which lists them nearest first).
{{node}}.isorag_eid IN $c_{{node}}[0..${{tier}}.k_{{node}}]
