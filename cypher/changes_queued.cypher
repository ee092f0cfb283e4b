// How many ids a change set queued for the vector side and that are not done yet.
MATCH (v:IsoragKGVersion {kg: $kg})
RETURN size(coalesce(v.pending_entities, [])) + size(coalesce(v.pending_relations, []))
       + size(coalesce(v.pending_types, [])) AS queued
