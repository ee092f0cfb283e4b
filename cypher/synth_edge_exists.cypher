// Whether the KG holds head -[{rel_type}]-> tail ({rel_type} validated and escaped by the caller).
MATCH (h:Entity {eid: $h})
RETURN EXISTS { (h)-[{rel_type}]->(:Entity {eid: $t}) } AS found
