import sys, time
from engine._engine import Engine
from engine.changes.ops import *
from engine.embeddings import load_embedder
emb = load_embedder()
kg = "living_smoke"
eng = Engine(kg=kg, llm=False, embedder=emb)
try:
    eng.drop()
except Exception as e: print("drop:", e)
open("/tmp/smoke_kb.txt","w").write("A|directed_by|B\nA|starred|C\nD|starred|C\nD|year|1999\nE|genre|Drama\n")
eng.load("/tmp/smoke_kb.txt", progress=False)
print(eng.stats())
ops = [AddTriple("A","year","1999"), RemoveTriple("E","genre","Drama"), SetEntity("B", name="Bee", types=("person",)),
       MergeEntity("D","A"), RemoveEntity("C"), RemoveTriple("X","r","Y"), AddTriple("D","genre","Comedy")]
r = eng.apply(ops, progress=False)
print("\n".join(r.lines()))
print(eng.stats())
print(eng.graph.read("MATCH (h:IsoragEntity {isorag_kg:$kg})-[r]->(t) RETURN h.isorag_key AS h, type(r) AS r, t.isorag_key AS t, h.isorag_name AS hn", kg=kg))
r = eng.apply(ops, progress=False); print("again:", r.already_applied, r.version)
print(eng.graph.version())
eng.drop()
