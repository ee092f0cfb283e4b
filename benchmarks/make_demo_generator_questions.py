"""The demo's generator training questions: MetaQA dev questions whose walk lies in the demo KG.

    python benchmarks/make_demo_generator_questions.py [--per-hop 400] [--seed 2018] [--data DIR] [--out FILE]
    python benchmarks/make_demo_generator_questions.py --smoke   # a tiny MetaQA folder, into a temporary file

Writes ``engine/data/demo/generator_questions.jsonl``: per hop, up to ``--per-hop`` dev questions (seeded draw)
whose topic is an entity of the demo KG and whose qtype's relation path, followed over the demo KG, reaches at
least one of MetaQA's gold answers (``engine/datasets/metaqa.py``), none of the 60 demo questions among them.
Fields as ``questions.jsonl`` (``question`` with the topic in brackets, ``topic``, ``hops``, ``qtype``,
``answers`` reached on the demo KG (at most 10), ``pattern``, ``source``). ``isorag demo`` trains the demo's pattern
generator on both files. MetaQA is CC BY 3.0 (see engine/data/demo/ATTRIBUTION.md).
"""

from __future__ import annotations

import argparse
import json
import random

from pathlib import Path

import _common  # noqa: F401 - sys.path and the environment, on import
from _common import DATA, DEMO, emit, parse_args, smoke_dir, smoke_metaqa
from engine.datasets.metaqa import follow_path, gold_pattern
from engine.datasets.metaqa import read_questions as read_metaqa


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-hop", type=int, default=400)
    ap.add_argument("--seed", type=int, default=2018)
    ap.add_argument("--data", type=Path, default=DATA / "metaqa", help="MetaQA folder ({1,2,3}-hop/qa_dev.txt, qtypes)")
    ap.add_argument("--out", type=Path, default=DEMO / "generator_questions.jsonl")
    args = parse_args(ap, {"data": lambda a: smoke_metaqa(per_hop=10), "per_hop": 5,
                           "out": lambda a: smoke_dir() / "generator_questions.jsonl"})
    adj: dict[tuple[str, str], set[str]] = {}
    names: set[str] = set()
    for line in (DEMO / "kb.txt").read_text(encoding="utf-8").splitlines():
        h, r, t = line.split("|")
        adj.setdefault((h, r), set()).add(t)
        adj.setdefault((t, r), set()).add(h)
        names.update((h, t))
    taken = {json.loads(x)["source"] for x in (DEMO / "questions.jsonl").read_text(encoding="utf-8").splitlines()}
    rng = random.Random(args.seed)
    out: list[dict[str, object]] = []
    eligible_by_hop = {}
    for hop in (1, 2, 3):
        folder = args.data / f"{hop}-hop"
        eligible = []
        for q in read_metaqa(folder / "qa_dev.txt", qtypes=folder / "qa_dev_qtype.txt", hops=hop):
            source = f"{hop}-hop/qa_dev.txt:{q['line']}"
            if q["topic"] not in names or source in taken:
                continue
            reached = follow_path(lambda e, r: adj.get((e, r), ()), q["topic"], q["qtype"])
            good = sorted(set(reached) & set(q["answers"]))
            if good:
                eligible.append({"question": q["question"], "topic": q["topic"], "hops": hop, "qtype": q["qtype"],
                                 "answers": good[:10], "pattern": gold_pattern(q["qtype"], q["topic"]),
                                 "source": source})
        rng.shuffle(eligible)
        out += sorted(eligible[:args.per_hop], key=lambda x: x["source"])
        eligible_by_hop[hop] = len(eligible)
        print(f"{hop}-hop: {len(eligible)} eligible, kept {min(len(eligible), args.per_hop)}")
    path = args.out
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in out), encoding="utf-8")
    print(f"wrote {len(out)} questions to {path}")
    emit("make_demo_generator_questions", {"out": str(path), "questions": len(out), "eligible": eligible_by_hop,
                                           "per_hop": args.per_hop, "seed": args.seed})


if __name__ == "__main__":
    main()
