// After the schema statements: wait (at most 300 s) until every index is online, so the first load or read uses it.
CALL db.awaitIndexes(300)
