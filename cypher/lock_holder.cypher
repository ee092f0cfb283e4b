// Who holds the KG's writer lease now (a read: never takes or waits for it); no row when the lease is free.
MATCH (l:IsoragLock {kg: $kg}) WHERE l.expires >= timestamp()
RETURN l.info AS info, (l.expires - timestamp()) / 1000.0 AS expires_in_s
