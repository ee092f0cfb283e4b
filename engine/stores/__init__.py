"""The KG's two stores: the graph in Neo4j and its vectors in Milvus."""
