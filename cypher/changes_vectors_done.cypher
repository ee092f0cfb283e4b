// The vector side has caught up with the committed batches: clear their queue (only this KG's writer runs this).
// When it wrote vectors ($moved), the stamp moves again and records the Milvus timestamp of the last write: a
// reader drops what it cached in between and waits for these vectors (engine.stores.version).
CYPHER replan=skip
MATCH (v:IsoragKGVersion {kg: $kg})
SET v.pending_entities = [], v.pending_relations = [], v.pending_types = [], v.cs_done = $done,
    v.stamp = CASE WHEN $moved THEN coalesce(v.stamp, 0) + 1 ELSE v.stamp END,
    v.vectors_ts = CASE WHEN $moved AND $vectors_ts > coalesce(v.vectors_ts, 0) THEN $vectors_ts
                        ELSE v.vectors_ts END
