"""Integration tests: the real Neo4j and Milvus, CLI runs against them, the wheel; each is marked `integration` by
tests/conftest.py."""
