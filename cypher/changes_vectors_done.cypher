// The vector side has caught up with the committed batches: clear their queue (only this KG's writer runs this).
MATCH (v:IsoragKGVersion {kg: $kg})
SET v.pending_entities = [], v.pending_relations = [], v.pending_types = [], v.cs_done = $done
