// Every KG of the DBMS that has a version (a load, an adoption or a change set made one), with it.
MATCH (v:IsoragKGVersion)
RETURN v.kg AS kg, v.seq AS seq, v.at AS at
ORDER BY kg
