// A write outside change sets (a load, an adoption) changed the KG: a new version, so that caches keyed by it
// (in this process and others) are rebuilt.
MERGE (v:IsoragKGVersion {kg: $kg})
SET v.seq = coalesce(v.seq, 0) + 1, v.at = $at, v.stamp = coalesce(v.stamp, 0) + 1, v.cs_hash = $hash,
    v.cs_done = true
RETURN v.seq AS seq, v.at AS at
