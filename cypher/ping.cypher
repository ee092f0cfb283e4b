// Whether a server answers a statement through the Python driver (engine.servers.neo4j).
RETURN 1 AS ok
