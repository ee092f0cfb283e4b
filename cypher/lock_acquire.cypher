// Take (or renew) the writer's lease of a KG: one loader per KG (engine.stores.graph.KGLock). The SET before the read
// takes the node's write lock, so two writers can never both see the lease free; the lease is free when no one
// holds it, when $holder already does, or when its holder stopped renewing it (expires: the server's clock, ms).
MERGE (l:IsoragLock {kg: $kg})
SET l.claim = $holder
WITH l, (l.holder IS NULL OR l.holder = $holder OR l.expires < timestamp()) AS free, l.holder = $holder AS mine
SET l += CASE WHEN free
              THEN {holder: $holder, info: $info, expires: timestamp() + $ttl_ms,
                    since: CASE WHEN mine THEN l.since ELSE timestamp() END}
              ELSE {} END
REMOVE l.claim
RETURN free, l.holder AS holder, l.info AS info, l.since AS since, l.expires - timestamp() AS expires_in_ms
