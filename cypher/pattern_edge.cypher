// Fragment: one edge of a generated pattern (engine.retrieval.statements): variables named by code ({{head}}, {{rel}},
// {{tail}}), {{rel_types}} checked against the KG's catalog and escaped, {{arrow_in}}/{{arrow_out}} a fixed direction.
({{head}}:IsoragEntity){{arrow_in}}-[{{rel}}{{rel_types}}]-{{arrow_out}}({{tail}}:IsoragEntity)
