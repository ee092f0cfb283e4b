from engine._engine import Engine
from engine.changes.ops import *
from engine.changes.check import check_stores
from engine.embeddings import load_embedder
emb = load_embedder()
kg = "living_smoke3"
eng = Engine(kg=kg, llm=False, embedder=emb)
open("/tmp/smoke_kb.txt","w").write("A|directed_by|B\nA|starred|C\nD|starred|C\nD|year|1999\nE|genre|Drama\n")
eng.load("/tmp/smoke_kb.txt", progress=False)
ops = [AddTriple("A","year","1999"), RemoveTriple("E","genre","Drama"), SetEntity("B", name="Bee", types=("person",)),
       MergeEntity("D","A"), RemoveEntity("C"), RemoveTriple("X","r","Y"), AddTriple("D","genre","Comedy")]
r = eng.apply(ops, progress=False)
print("\n".join(r.lines()))
c = check_stores(eng.graph, eng.vectors, emb, deep=True, progress=False); print("\n".join(c.lines()))
# damage: delete a vector, upsert a wrong vector
eng.vectors.delete("entities", [eng.graph.entities_by_key(["A"])[0]["eid"]])
import numpy as np
b = eng.graph.entities_by_key(["B"])[0]["eid"]
eng.vectors.upsert("entities", [b], emb.encode(["nonsense"]))
c = check_stores(eng.graph, eng.vectors, emb, deep=True, progress=False); print("\n".join(c.lines()))
c = check_stores(eng.graph, eng.vectors, emb, deep=True, repair=True, progress=False); print("\n".join(c.lines()))
c = check_stores(eng.graph, eng.vectors, emb, deep=True, progress=False); print("\n".join(c.lines()))
print(eng.retrieve({"triples": [["Bee", "directed_by", "UNKNOWN x 1"]]}, k=2).kg_version)
eng.drop()
