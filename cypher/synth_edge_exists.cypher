// Whether the KG holds head -[{{rel_type}}]-> tail ({{rel_type}} validated and escaped by the caller).
MATCH (h:IsoragEntity {isorag_eid: $h})
RETURN EXISTS { (h)-[{{rel_type}}]->(:IsoragEntity {isorag_eid: $t}) } AS found
