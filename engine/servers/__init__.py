"""The local Neo4j and Milvus servers the engine starts on loopback, and their shared process helpers."""
