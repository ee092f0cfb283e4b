// Vectors were written outside a change set's batches (check --repair): the stamp moves, with the Milvus timestamp
// of the last write, so that readers in any process drop what they cached and read the new vectors
// (engine.stores.version).
MATCH (v:IsoragKGVersion {kg: $kg})
SET v.stamp = coalesce(v.stamp, 0) + 1,
    v.vectors_ts = CASE WHEN $vectors_ts > coalesce(v.vectors_ts, 0) THEN $vectors_ts ELSE v.vectors_ts END
