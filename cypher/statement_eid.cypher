// Fragment (one-statement path): a pattern node's entity id.
{{node}}.isorag_eid
