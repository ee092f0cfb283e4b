// Give a KG's writer lease back (only the holder can).
MATCH (l:IsoragLock {kg: $kg, holder: $holder})
DELETE l
