import cProfile, pstats
from engine._engine import Engine
from engine.changes.ops import *
from engine.embeddings import load_embedder
emb = load_embedder()
kg = "living_smoke2"
eng = Engine(kg=kg, llm=False, embedder=emb)
open("/tmp/smoke_kb.txt","w").write("A|directed_by|B\nA|starred|C\nD|starred|C\nD|year|1999\nE|genre|Drama\n")
eng.load("/tmp/smoke_kb.txt", progress=False)
ops = [AddTriple("A","year","1999"), RemoveTriple("E","genre","Drama"), SetEntity("B", name="Bee", types=("person",)),
       MergeEntity("D","A"), RemoveEntity("C"), RemoveTriple("X","r","Y"), AddTriple("D","genre","Comedy")]
cProfile.run("eng.apply(ops, progress=False)", "/tmp/prof")
eng.drop()
pstats.Stats("/tmp/prof").sort_stats("cumulative").print_stats(25)
