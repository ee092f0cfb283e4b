"""Build the bundled demo KG: a connected MetaQA subset with 1-, 2- and 3-hop questions that have answers in it.

    python benchmarks/make_demo_kg.py [--data ../shared/data/metaqa] [--out engine/data/demo]
                                      [--per-hop 20] [--target-bytes 1500000] [--seed 2018]
    python benchmarks/make_demo_kg.py --smoke   # from a tiny MetaQA folder made of the demo, into a temporary one

Deterministic for given inputs and options (fixed seed, no set-order dependence).  Steps:

1. Questions.  Over ``kb.txt``, the answers of every dev question are recomputed by following its qtype's
   relation path (``engine.datasets.metaqa.follow_path``).  A question is eligible when the recomputed answers equal
   MetaQA's gold answers exactly, number 1 to ``--max-answers``, and the walk touches at most
   ``--max-walk-movies`` movies.  Per hop, ``--per-hop`` questions are drawn round-robin over the qtypes
   (so every qtype appears when it can), in an order shuffled with the seed.
2. Core.  Every movie touched by a chosen question's walk is kept with ALL its triples (a movie's triples are
   those whose head it is: every MetaQA relation goes movie -> attribute).  So each chosen question's walk is
   complete in the subset, and its answers over the subset equal those over the full KB (= MetaQA's gold).
3. Growth.  Breadth-first through shared people (directors, writers, actors) of the kept movies, adding each
   person's other movies (again with all their triples) in a seeded order, until the subset file would exceed
   ``--target-bytes``.
4. Output: ``kb.txt`` (the kept lines of ``kb.txt``, in their original order, unchanged), ``questions.jsonl``
   (answers recomputed over the subset and checked equal to step 1), ``ATTRIBUTION.md``.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import DATA, ROOT, emit, parse_args, smoke_dir, smoke_metaqa
from engine.datasets.metaqa import MOVIE, follow_path, gold_pattern, hops, parse_qtype
from engine.datasets.metaqa import read_questions as read_metaqa
from loaders import open_source

PEOPLE = ("directed_by", "written_by", "starred_actors")


class KB:
    """The triples of a MetaQA KB with a direction-agnostic (entity, relation) -> neighbours index."""

    def __init__(self, lines: list[str], triples: list[tuple[str, str, str]]) -> None:
        self.lines = lines
        self.triples = triples
        self.adj: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
        self.movie_rows: dict[str, list[int]] = collections.defaultdict(list)
        for i, (h, r, t) in enumerate(triples):
            self.adj[(h, r)].add(t)
            self.adj[(t, r)].add(h)
            self.movie_rows[h].append(i)

    @classmethod
    def read(cls, path: Path) -> KB:
        lines = path.read_text(encoding="utf-8").splitlines()
        triples = [(rec.head, rec.relation, rec.tail) for rec in open_source(path, "hrt", strict=True)]
        if len(triples) != len(lines):
            raise SystemExit(f"{path}: {len(lines)} lines but {len(triples)} triples; expected one a line")
        return cls(lines, triples)

    def neighbours(self, entity: str, relation: str) -> set[str]:
        return self.adj.get((entity, relation), set())

    def subset(self, movies: set[str]) -> KB:
        rows = sorted(i for m in movies for i in self.movie_rows.get(m, ()))
        return KB([self.lines[i] for i in rows], [self.triples[i] for i in rows])

    def size_of(self, movies: set[str]) -> int:
        return sum(len(self.lines[i].encode("utf-8")) + 1 for m in movies for i in self.movie_rows.get(m, ()))


def read_questions(data: Path, hop: int, split: str = "dev") -> list[dict[str, Any]]:
    folder = data / f"{hop}-hop"
    qs = read_metaqa(folder / f"qa_{split}.txt", qtypes=folder / f"qa_{split}_qtype.txt", hops=hop)
    if any(q["qtype"] is None for q in qs):
        raise SystemExit(f"{hop}-hop: fewer qtypes than questions")
    return [{"question": q["question"], "topic": q["topic"], "hops": hop, "qtype": q["qtype"],
             "gold": sorted(set(q["answers"])), "source": f"{hop}-hop/qa_{split}.txt:{q['line']}"} for q in qs]


def walk_movies(kb: KB, q: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(answers over kb, movies the walk touches: the topic if a movie, and every movie-typed step)."""
    trace: list[set[str]] = []
    answers = follow_path(kb.neighbours, q["topic"], q["qtype"], trace=trace)
    words = parse_qtype(q["qtype"])
    movies = {q["topic"]} if words[0] == MOVIE else set()
    for word, reached in zip(words[1:], trace):
        if word == MOVIE:
            movies |= reached
    return answers, movies


def choose_questions(kb: KB, data: Path, args: argparse.Namespace, rng: random.Random) -> list[dict[str, Any]]:
    chosen: list[dict[str, Any]] = []
    for hop in (1, 2, 3):
        by_qtype: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
        agree = 0
        questions = read_questions(data, hop)
        for q in questions:
            if "UNKNOWN" in q["topic"] or hops(q["qtype"]) != hop:
                continue
            answers, movies = walk_movies(kb, q)
            agree += sorted(answers) == q["gold"]
            if sorted(answers) != q["gold"] or not 1 <= len(answers) <= args.max_answers:
                continue
            if len(movies) > args.max_walk_movies:
                continue
            q["walk_movies"] = movies
            by_qtype[q["qtype"]].append(q)
        print(f"{hop}-hop: {len(questions)} dev questions, recomputed answers equal MetaQA's for {agree} "
              f"({agree / len(questions):.1%}); eligible {sum(map(len, by_qtype.values()))} "
              f"in {len(by_qtype)} qtypes", flush=True)
        queues = {qt: rng.sample(qs, len(qs)) for qt, qs in sorted(by_qtype.items())}
        order = rng.sample(sorted(queues), len(queues))
        picked: list[dict[str, Any]] = []
        seen_topics: set[str] = set()
        while len(picked) < args.per_hop and any(queues.values()):
            for qt in order:
                while queues[qt] and queues[qt][-1]["topic"] in seen_topics:
                    queues[qt].pop()
                if queues[qt] and len(picked) < args.per_hop:
                    q = queues[qt].pop()
                    seen_topics.add(q["topic"])
                    picked.append(q)
        chosen.extend(sorted(picked, key=lambda q: (q["qtype"], q["source"])))
    return chosen


def grow(kb: KB, core: set[str], target: int, rng: random.Random) -> set[str]:
    """Add movies breadth-first through shared people until the subset would exceed ``target`` bytes."""
    movies = set(core)
    size = kb.size_of(movies)
    seen_people: set[str] = set()
    frontier = sorted(movies)
    while frontier and size < target:
        people = sorted({p for m in frontier for r in PEOPLE for p in kb.neighbours(m, r)} - seen_people)
        rng.shuffle(people)
        next_frontier: list[str] = []
        for person in people:
            seen_people.add(person)
            for r in PEOPLE:
                for m in sorted(kb.neighbours(person, r) - movies):
                    if not kb.movie_rows.get(m):
                        continue  # a name that is not a movie (no triples of its own)
                    extra = kb.size_of({m})
                    if size + extra > target:
                        continue
                    movies.add(m)
                    size += extra
                    next_frontier.append(m)
            if size >= target:
                break
        frontier = next_frontier
    return movies


ATTRIBUTION = """\
# Demo KG: attribution and provenance

`kb.txt` and `questions.jsonl` in this directory are a small subset of **MetaQA** (MoviE Text Audio QA):

> Yuyu Zhang, Hanjun Dai, Zornitsa Kozareva, Alexander J. Smola, Le Song.
> *Variational Reasoning for Question Answering with Knowledge Graph.* AAAI 2018.
> https://github.com/yuyuz/MetaQA

MetaQA is distributed under the **Creative Commons Attribution 3.0** licence (CC BY 3.0,
https://creativecommons.org/licenses/by/3.0/); its KB derives from WikiMovies (Miller et al., 2016).
This subset is redistributed under the same licence. Changes: only selection (lines are copied unchanged) and
the fields added to the questions, as described below.

## What the subset is

- `kb.txt`: {triples:,} triples ({bytes:,} bytes), {entities:,} entities, {movies:,} movies, {relations} relations,
  in MetaQA's `head|relation|tail` format: every triple of each selected movie (all MetaQA relations go from a
  movie to an attribute), lines in the order of the source `kb.txt`. {connectivity}
- `questions.jsonl`: {nq} questions of MetaQA's dev split ({per_hop}), one JSON object a line:
  `question` (MetaQA's text, topic entity in brackets), `topic`, `hops`, `qtype` (from `qa_dev_qtype.txt`),
  `answers` (recomputed over this subset), `pattern` (the gold SimGRAG pattern
  `{{"triples": [[h, r, t], ...]}}` built from the qtype: known topic text, KB relation names, `UNKNOWN <type> <n>`
  unknown nodes, the answer being the last unknown) and `source` (file and line in MetaQA's dev split).

## How it was built

By `benchmarks/make_demo_kg.py` (seed {seed}, target {target:,} bytes), deterministic: run it again to
regenerate. The source was a reconstruction of MetaQA's `kb.txt` (130,471 of the official 134,741 triples).

1. Each dev question's answers were recomputed over the full KB by following its qtype's relation path
   (`engine/datasets/metaqa.py`: set-wise walk, relations in either direction, the topic entity removed at
   every step, which is MetaQA's own convention). Eligible questions: recomputed answers identical to
   MetaQA's gold answers, 1 to {max_answers} answers, a walk touching at most {max_walk} movies.
2. {per_hop_n} questions per hop were drawn round-robin over the qtypes (distinct topics), and every movie their
   walks touch was kept with all its triples, so each question's walk is complete in the subset.
3. The subset was grown breadth-first through the people of the kept movies, adding their other movies, up to
   the target size.
4. The answers of every chosen question were recomputed over the subset and checked equal to MetaQA's gold
   answers.
"""


def components(triples: list[tuple[str, str, str]]) -> list[int]:
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for h, _, t in triples:
        a, b = find(h), find(t)
        if a != b:
            parent[a] = b
    sizes = collections.Counter(find(x) for x in list(parent))
    return sorted(sizes.values(), reverse=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA / "metaqa")
    ap.add_argument("--out", type=Path, default=ROOT / "engine" / "data" / "demo")
    ap.add_argument("--per-hop", type=int, default=20)
    ap.add_argument("--target-bytes", type=int, default=1_500_000)
    ap.add_argument("--max-answers", type=int, default=10)
    ap.add_argument("--max-walk-movies", type=int, default=25)
    ap.add_argument("--seed", type=int, default=2018)
    args = parse_args(ap, {"data": lambda a: smoke_metaqa(per_hop=10), "out": lambda a: smoke_dir() / "demo",
                           "per_hop": 2, "target_bytes": 20_000})
    if args.target_bytes > 2_000_000:
        raise SystemExit("--target-bytes: the demo KG must stay within 2 MB")

    rng = random.Random(args.seed)
    kb = KB.read(args.data / "kb.txt")
    print(f"full KB: {len(kb.triples):,} triples", flush=True)
    questions = choose_questions(kb, args.data, args, rng)
    core = set().union(*(q["walk_movies"] for q in questions))
    print(f"core: {len(core)} movies, {kb.size_of(core):,} bytes", flush=True)
    movies = grow(kb, core, args.target_bytes, rng)
    sub = kb.subset(movies)

    out_questions = []
    for q in questions:
        answers, _ = walk_movies(sub, q)
        if sorted(answers) != q["gold"]:
            raise SystemExit(f"{q['source']}: answers over the subset {sorted(answers)} != {q['gold']}")
        out_questions.append({"question": q["question"], "topic": q["topic"], "hops": q["hops"],
                              "qtype": q["qtype"], "answers": sorted(answers),
                              "pattern": gold_pattern(q["qtype"], q["topic"]), "source": q["source"]})

    args.out.mkdir(parents=True, exist_ok=True)
    kb_text = "".join(line + "\n" for line in sub.lines)
    (args.out / "kb.txt").write_text(kb_text, encoding="utf-8")
    with open(args.out / "questions.jsonl", "w", encoding="utf-8") as f:
        for q in out_questions:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")

    entities = {h for h, _, _ in sub.triples} | {t for _, _, t in sub.triples}
    comps = components(sub.triples)
    per_hop = collections.Counter(q["hops"] for q in out_questions)
    qtypes = {h: len({q["qtype"] for q in out_questions if q["hops"] == h}) for h in (1, 2, 3)}
    stats = {
        "triples": len(sub.triples), "bytes": len(kb_text.encode("utf-8")), "entities": len(entities),
        "movies": len({h for h, _, _ in sub.triples}), "relations": len({r for _, r, _ in sub.triples}),
        "components": len(comps), "largest": comps[0] / len(entities),
    }
    (args.out / "ATTRIBUTION.md").write_text(ATTRIBUTION.format(
        **stats, nq=len(out_questions), connectivity=(
            "One connected graph, linked through shared directors, writers and actors." if len(comps) == 1 else
            f"{len(comps)} connected components; the largest holds {comps[0] / len(entities):.1%} of the entities."),
        per_hop=", ".join(f"{per_hop[h]} {h}-hop in {qtypes[h]} qtypes" for h in (1, 2, 3)),
        seed=args.seed, target=args.target_bytes, max_answers=args.max_answers,
        max_walk=args.max_walk_movies, per_hop_n=args.per_hop), encoding="utf-8")
    emit("make_demo_kg", {**stats, "out": str(args.out), "questions": dict(sorted(per_hop.items())), "qtypes": qtypes})


if __name__ == "__main__":
    main()
