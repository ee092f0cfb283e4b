// Whether a server answers a statement through the Python driver (engine.local_neo4j).
RETURN 1 AS ok
