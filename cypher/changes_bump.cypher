// A write outside change sets (a load, an adoption) changed the KG and both stores hold it: a new version, so that
// caches keyed by it (in this process and others) are rebuilt, with the Milvus timestamp of the write's last vector
// ($vectors_ts, 0: none) that readers wait for. A KG without an identity gets one ($kg_id).
MERGE (v:IsoragKGVersion {kg: $kg})
SET v.seq = coalesce(v.seq, 0) + 1, v.at = $at, v.stamp = coalesce(v.stamp, 0) + 1, v.cs_hash = $hash,
    v.cs_done = true, v.kg_id = coalesce(v.kg_id, $kg_id),
    v.vectors_ts = CASE WHEN $vectors_ts > coalesce(v.vectors_ts, 0) THEN $vectors_ts ELSE v.vectors_ts END
RETURN v.seq AS seq, v.at AS at
