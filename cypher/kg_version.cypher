// The KG's version (engine.changes): the sequence number of its last change set, when it was applied, and a stamp
// that moves with every committed batch (what caches derived from the KG are keyed by). No row: version 0.
MATCH (v:IsoragKGVersion {kg: $kg})
RETURN v.seq AS seq, v.at AS at, v.stamp AS stamp
