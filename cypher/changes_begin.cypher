// In the transaction of a change set's first batch that applies something ($begin: one row, or none for a later
// batch): a new version (sequence number + timestamp), the change set's identity, the batch size its batches are
// cut by (a rerun cuts them alike, whatever its own). A change set that applies nothing begins no version, and a
// first batch rolled back (strict) takes its version with it. A KG without an identity gets one.
CYPHER replan=skip
UNWIND $begin AS b
MERGE (v:IsoragKGVersion {kg: $kg})
SET v.seq = coalesce(v.seq, 0) + 1, v.at = b.at, v.cs_hash = b.hash, v.cs_batches = 0, v.cs_ops = 0,
    v.cs_done = false, v.cs_source = b.source, v.cs_batch_size = b.batch_size, v.kg_id = coalesce(v.kg_id, b.kg_id)
RETURN v.seq AS seq, v.at AS at
