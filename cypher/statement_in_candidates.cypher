// Fragment (one-statement path): a pattern node bound to one of its tier's candidates.
{{node}}.isorag_eid IN ${{tier}}.c_{{node}}
