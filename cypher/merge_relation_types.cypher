// The KG's relation catalog: original name, relationship type, id shared with Milvus.
UNWIND $rows AS row
MERGE (rt:IsoragRelationType {rid: row.rid})
  ON CREATE SET rt.kg = $kg, rt.name = row.name, rt.type = row.type
