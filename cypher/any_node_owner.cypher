// The offline import replaces the whole database: the KG (or else the label) of some node, if any node exists.
MATCH (n)
RETURN coalesce(n.isorag_kg, n.kg, labels(n)[0], '?') AS kg
LIMIT 1
