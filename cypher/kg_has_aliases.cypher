// Whether the KG has any alias (a key merged into another entity by a change set): a row, or none.
MATCH (a:IsoragAlias {kg: $kg})
RETURN 1 AS found
LIMIT 1
