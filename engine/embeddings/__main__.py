"""python -m engine.embeddings [backend] text...: print the embedder and the first values of the texts' vectors."""

import sys

from engine.embeddings.loading import BACKENDS, load_embedder

args = sys.argv[1:]
be = args.pop(0) if args and args[0] in ("auto", *BACKENDS) else "auto"
e = load_embedder(backend=be)
print(e)
print(e.encode(args or ["hello world"])[:, :6])
