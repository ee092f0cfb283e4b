// A pseudo-random sample of a KG's entities (one scan): seeds and start nodes for synth sampling. Entity ids are
// hashes, so their residues modulo a prime are uniform; the window [$salt, $salt + $cut) of residues (wrapping) keeps
// a share $cut / $mod of the entities, the same ones for the same salt: a given --seed samples the same records.
MATCH (n:IsoragEntity {isorag_kg: $kg})
WHERE (n.isorag_eid % $mod + $mod - $salt) % $mod < $cut
RETURN n.isorag_eid AS eid
LIMIT $limit
