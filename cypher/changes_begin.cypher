// Start a change set: a new version (sequence number + timestamp), the change set's identity, no batch (and no
// operation) committed, and the batch size its batches are cut by (a rerun cuts them alike, whatever its own).
MERGE (v:IsoragKGVersion {kg: $kg})
SET v.seq = coalesce(v.seq, 0) + 1, v.at = $at, v.stamp = coalesce(v.stamp, 0) + 1, v.cs_hash = $hash,
    v.cs_batches = 0, v.cs_ops = 0, v.cs_done = false, v.cs_source = $source, v.cs_batch_size = $batch_size
RETURN v.seq AS seq, v.at AS at
