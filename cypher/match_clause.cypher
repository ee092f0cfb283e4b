// Fragment: a MATCH clause over generated pattern edges ({{patterns}}: pattern_edge fragments, comma-joined).
MATCH {{patterns}}
