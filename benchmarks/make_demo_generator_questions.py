"""The demo's generator training questions: MetaQA dev questions whose walk lies in the demo KG.

    python benchmarks/make_demo_generator_questions.py [--per-hop 400] [--seed 2018]

Writes ``engine/data/demo/generator_questions.jsonl``: per hop, up to ``--per-hop`` dev questions (seeded draw)
whose topic is an entity of the demo KG and whose qtype's relation path, followed over the demo KG, reaches at
least one of MetaQA's gold answers (``engine/datasets/metaqa.py``), none of the 60 demo questions among them.
Fields as ``questions.jsonl`` (``question`` with the topic in brackets, ``topic``, ``hops``, ``qtype``,
``answers`` reached on the demo KG (at most 10), ``pattern``, ``source``). ``isorag demo`` trains the demo's pattern generator
on both files. MetaQA is CC BY 3.0 (see engine/data/demo/ATTRIBUTION.md).
"""

from __future__ import annotations

import argparse
import json
import random
import re

import _common  # noqa: F401
from _common import ROOT
from engine.datasets.metaqa import follow_path, gold_pattern

DEMO = ROOT / "engine" / "data" / "demo"
DATA = ROOT.parent / "shared" / "data" / "metaqa"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-hop", type=int, default=400)
    ap.add_argument("--seed", type=int, default=2018)
    args = ap.parse_args()
    adj: dict[tuple[str, str], set[str]] = {}
    names: set[str] = set()
    for line in (DEMO / "kb.txt").read_text(encoding="utf-8").splitlines():
        h, r, t = line.split("|")
        adj.setdefault((h, r), set()).add(t)
        adj.setdefault((t, r), set()).add(h)
        names.update((h, t))
    taken = {json.loads(x)["source"] for x in (DEMO / "questions.jsonl").read_text(encoding="utf-8").splitlines()}
    rng = random.Random(args.seed)
    out = []
    for hop in (1, 2, 3):
        qa = (DATA / f"{hop}-hop" / "qa_dev.txt").read_text(encoding="utf-8").splitlines()
        qt = (DATA / f"{hop}-hop" / "qa_dev_qtype.txt").read_text(encoding="utf-8").splitlines()
        eligible = []
        for n, (line, qtype) in enumerate(zip(qa, qt), start=1):
            source = f"{hop}-hop/qa_dev.txt:{n}"
            q, ans = line.split("\t")
            m = re.search(r"\[([^\]]+)\]", q)
            if not m or m.group(1) not in names or source in taken:
                continue
            reached = follow_path(lambda e, r: adj.get((e, r), ()), m.group(1), qtype.strip())
            good = sorted(set(reached) & set(ans.split("|")))
            if good:
                eligible.append({"question": q, "topic": m.group(1), "hops": hop, "qtype": qtype.strip(),
                                 "answers": good[:10], "pattern": gold_pattern(qtype.strip(), m.group(1)),
                                 "source": source})
        rng.shuffle(eligible)
        out += sorted(eligible[:args.per_hop], key=lambda x: x["source"])
        print(f"{hop}-hop: {len(eligible)} eligible, kept {min(len(eligible), args.per_hop)}")
    path = DEMO / "generator_questions.jsonl"
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in out), encoding="utf-8")
    print(f"wrote {len(out)} questions to {path}")


if __name__ == "__main__":
    main()
