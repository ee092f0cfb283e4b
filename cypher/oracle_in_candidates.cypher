// Fragment (oracle): a known pattern node bound to one of its candidates ($c_<node>).
{{node}}.isorag_eid IN $c_{{node}}
