// The relation catalog entries a change set's added triples need (MERGEd as a load does); returns the ids of
// those created here, the only ones whose vectors must be written (the others have theirs already).
CYPHER replan=skip
UNWIND $rows AS row
OPTIONAL MATCH (old:IsoragRelationType {rid: row.rid})
WITH row, old IS NULL AS new
MERGE (rt:IsoragRelationType {rid: row.rid})
  ON CREATE SET rt.kg = $kg, rt.name = row.name, rt.type = row.type
WITH row, new
WHERE new
RETURN row.rid AS rid
