// Fragment (synth): a seed node of a sample bound to its entity (the parameter named like the variable).
{{node}}.isorag_eid = ${{node}}
