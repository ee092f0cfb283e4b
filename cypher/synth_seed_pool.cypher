// A uniform random sample of a KG's entities (one scan): seeds and start nodes for synth sampling.
MATCH (n:Entity {kg: $kg})
WHERE rand() < $p
RETURN n.eid AS eid
LIMIT $limit
