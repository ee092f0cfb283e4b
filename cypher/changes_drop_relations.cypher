// Delete the relation catalog nodes of relationship types nothing in the KG uses any more; returns their ids.
MATCH (rt:IsoragRelationType)
WHERE rt.kg = $kg AND rt.type IN $types
WITH rt, rt.rid AS rid
DELETE rt
RETURN rid
