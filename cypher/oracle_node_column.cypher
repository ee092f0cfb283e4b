// Fragment (oracle): a pattern node's entity, returned under its variable's name.
{{node}}.isorag_eid AS {{node}}
