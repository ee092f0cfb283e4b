"""Names as people write them: Hits@1 with misspelled, re-cased and aliased topic names.

    python benchmarks/names.py [--limit N] [--seed 7] [--baseline DIR] [--kg names_metaqa] [--smoke]
                               [--kinds drop,lower,article] [--learned-only] [--misses FILE]

The topic names of MetaQA dev (the first ``--limit`` questions a hop) are perturbed with a fixed seed, one kind at
a time: a letter dropped, doubled, replaced by a neighbour on the keyboard, two letters swapped (one typo each, never
the first letter), the name in lower case, its leading article dropped, its diacritics dropped. A kind is applied to
the questions whose topic it changes (an article or diacritics only some names have); each kind's Hits@1 is given
beside the exact names' on the same questions (``exact_same``). A perturbed name that is another entity's name
exactly ("Outlaw" from "The Outlaw": MetaQA holds both) names that entity, and the question is then about it: such
names are left out of their kind and counted (``names_of_others``). Two ways of asking:

* ``gold``: the question's gold pattern with the perturbed name (``Engine.retrieve``);
* ``learned``: the question as plain text with the perturbed name, through the learned generator (``Engine.ask``,
  route ``learned``, no LLM), trained on the other 80% of the questions (their exact names).

Each retrieval starts with its name not yet embedded. ``p50_ms`` is the retrieval's total p50 per kind (gold
patterns), ``stages_p50_ms`` its stages, ``learned_p50_ms`` the learned path's. ``--baseline DIR``: the exact names'
gold retrieval is also run by the engine of another checkout (e.g. today's main: ``git worktree add /tmp/base main``)
in a child process on the same machine, in ``--rounds`` rounds alternating with this engine's (``baseline_runs``,
``own_runs_p50_ms``; ``p50_ratio_exact_vs_baseline`` compares their means), and its Hits@1 on the same questions
(``baseline_hits1``, beside ``kinds.exact.gold``).

Then a small KG with aliases (Turtle: ``rdfs:label`` and ``skos:altLabel``, aliases that share no word with the
name) is loaded, and each alias is looked up in a pattern: ``alias_resolved`` is the share that reach their
entity. Last, claims made from the 1-hop questions, written as sentences in several wordings (true; the answer
swapped for another entity of the same relation; about an entity the KG lacks), are verified from text without an
LLM (``claims_text_accuracy``) and with their patterns given (``claims_pattern_accuracy``).

``--kinds``: the kinds run (default all); ``--learned-only``: the learned path alone (no gold patterns, claims,
aliases or baseline: a run of a few kinds takes minutes); ``--misses FILE``: the learned path's misses, exact names
and each kind, as a JSON list (the question as asked, the perturbed name, the linked topics with their spans and how
they matched, the pattern chosen, the answers given and the gold ones). A run of a subset of the kinds or of the
learned path alone writes benchmarks/results/names.partial.json.

``--smoke``: the bundled demo KG's questions (a few per hop) on a KG of the triples around them; under a minute on a
fresh machine. The last line is one JSON object (also benchmarks/results/names.json).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import unicodedata
from pathlib import Path
from typing import Any

import _common  # noqa: F401 - sys.path and the environment, on import
from _common import DATA as _DATA
from _common import ROOT, emit, parse_args, start_servers
from _common import percentile as _percentile

DATA = _DATA / "metaqa"
DEMO = ROOT / "engine" / "data" / "demo"
KINDS = ("drop", "double", "neighbour", "swap", "lower", "article", "diacritics")
STAGES = ("embed", "vector", "names", "graph", "total")
LEARNED_STAGES = ("link", "generate", "embed", "vector", "names", "graph", "total")
_ROWS = ["qwertyuiop", "asdfghjkl", "zxcvbnm"]
ARTICLES = ("The ", "A ", "An ")


# ------------------------------------------------------------------------------------------------- perturbing
def percentile(values: list[float], q: float) -> float | None:  # type: ignore[misc]
    """The q-th percentile, None for no values (a kind that applies to no question)."""
    return _percentile(values, q) if values else None


def _round(x: float | None, digits: int = 2) -> float | None:
    return None if x is None else round(x, digits)


def _neighbours(c: str) -> str:
    low = c.lower()
    for r, row in enumerate(_ROWS):
        i = row.find(low)
        if i >= 0:
            near = [row[j] for j in (i - 1, i + 1) if 0 <= j < len(row)]
            near += [_ROWS[rr][i] for rr in (r - 1, r + 1) if 0 <= rr < 3 and i < len(_ROWS[rr])]
            return "".join(near)
    return ""


def perturb(name: str, kind: str, rng: random.Random) -> str | None:
    """``name`` with one perturbation of ``kind``, or None where the kind does not apply (no letter to change, no
    article, no diacritics)."""
    if kind == "lower":
        return name.lower() if name.lower() != name else None
    if kind == "article":
        for a in ARTICLES:
            if name.startswith(a) and len(name) > len(a):
                return name[len(a):]
        return None
    if kind == "diacritics":
        out = "".join(c for c in unicodedata.normalize("NFKD", name) if not unicodedata.combining(c))
        return out if out != name else None
    letters = [i for i in range(1, len(name)) if name[i].isalpha()]  # never the first letter
    if kind == "swap":
        letters = [i for i in letters if i + 1 < len(name) and name[i + 1].isalpha() and name[i] != name[i + 1]]
    if kind == "neighbour":
        letters = [i for i in letters if _neighbours(name[i])]
    if len([c for c in name if c.isalpha()]) < 4 or not letters:
        return None
    i = rng.choice(letters)
    if kind == "drop":
        return name[:i] + name[i + 1:]
    if kind == "double":
        return name[:i] + name[i] + name[i:]
    if kind == "swap":
        return name[:i] + name[i + 1] + name[i] + name[i + 2:]
    c = rng.choice(_neighbours(name[i]))
    return name[:i] + (c.upper() if name[i].isupper() else c) + name[i + 1:]


def drop_names_of_others(eng: Any, qs: list[dict[str, Any]], variants: dict[str, list[str | None]]) -> dict[str, int]:
    """Leave out (set to None) each perturbed name that is the name of an entity exactly and not its topic's name
    but for case and width (a lower-case "john ritter", a tag of MetaQA, is the actor's name in lower case; "Outlaw"
    is not "The Outlaw"): it names that other entity. Returns how many each kind lost."""
    from engine.linking.names import normalize_name
    from engine.linking.search import lookup_names

    texts = sorted({" ".join(v.split()) for vs in variants.values() for v in vs if v is not None})
    _, by_name, _ = lookup_names(eng.graph, [], texts)
    taken = {t for t, hits in zip(texts, by_name) if hits}
    out = {}
    for kind, vs in variants.items():
        # (as a question writes it: "Boy A" with its last letter dropped is "Boy ", the film "Boy")
        gone = [v is not None and " ".join(v.split()) in taken and normalize_name(v) != normalize_name(q["topic"])
                for q, v in zip(qs, vs)]
        out[kind] = sum(gone)
        variants[kind] = [None if g else v for g, v in zip(gone, vs)]
    return out


# ------------------------------------------------------------------------------------------------- questions
def metaqa_questions(limit: int | None, data: Path) -> list[dict[str, Any]]:
    from metaqa import read_questions

    from engine.datasets.metaqa import gold_pattern

    out = []
    for hop in (1, 2, 3):
        for q in read_questions(hop, "dev", limit, data):
            out.append({**q, "hop": hop, "pattern": gold_pattern(q["qtype"], q["topic"])})
    return out


def demo_questions(per_hop: int) -> list[dict[str, Any]]:
    rows = [json.loads(x) for x in (DEMO / "questions.jsonl").read_text(encoding="utf-8").splitlines() if x]
    out, seen = [], {1: 0, 2: 0, 3: 0}
    for r in rows:
        h = int(r["hops"])
        if seen.get(h, per_hop) < per_hop:
            seen[h] += 1
            out.append({**r, "hop": h})
    return out


def with_topic(pattern: dict[str, Any], topic: str, name: str) -> dict[str, Any]:
    return {"triples": [[name if x == topic else x for x in t] for t in pattern["triples"]]}


def plain(question: str, topic: str, name: str) -> str:
    return question.replace(f"[{topic}]", name).replace("[", "").replace("]", "")


def norm(s: str) -> str:
    return " ".join(s.lower().replace("_", " ").split())


def top1(names: list[str], answers: list[str]) -> bool:
    return bool(names) and norm(names[0]) in {norm(a) for a in answers}


# ------------------------------------------------------------------------------------------------- engine
def engine_for(kg: str, kb: Path, k: int) -> Any:
    from engine._config import EngineConfig, MatchSettings
    from engine._engine import Engine

    neo, mil = start_servers()
    from engine._config import MilvusSettings, Neo4jSettings

    eng = Engine(EngineConfig(kg=kg, neo4j=Neo4jSettings.from_env(uri=neo), milvus=MilvusSettings(uri=mil),
                              match=MatchSettings(k_node=16, k_rel=16, k=k, injective="edges")))
    if eng.graph.stats()["entities"] == 0:
        print(f"loading {kb} into KG {kg!r} ...", flush=True)
        eng.load(str(kb), progress=False)
    return eng


def forget(eng: Any, text: str) -> None:
    from _learned import forget as drop_cached

    drop_cached(eng, text)


def gold_pass(eng: Any, qs: list[dict[str, Any]], names: list[str],
              k: int) -> tuple[list[bool], dict[str, list[float]]]:
    """Hits@1 of each question's gold pattern with ``names[i]`` as its topic, and the retrieval's stage timings."""
    hits, times = [], {s: [] for s in STAGES}
    for q, name in zip(qs, names):
        forget(eng, name)
        res = eng.retrieve(with_topic(q["pattern"], q["topic"], name), k=k)
        hits.append(top1([a.entity.name for a in res.answers], q["answers"]))
        for s in STAGES:
            times[s].append(res.timings.get(s, 0.0))
    return hits, times


def miss_record(q: dict[str, Any], name: str, kind: str, ans: Any) -> dict[str, Any]:
    """What the learned path made of a question it missed: the linked topics (span, entity, how), the template
    chosen (the beam's best pattern), the answers, and the gold pattern's topic and answers."""
    prop = ans.proposal
    return {"kind": kind, "hop": q["hop"], "qtype": q.get("qtype"), "question": plain(q["question"], q["topic"], name),
            "topic": q["topic"], "name": name, "gold": q["pattern"], "answers": q["answers"][:5],
            "linked": [t.to_dict() for t in prop.linked] if prop is not None else [],
            "pattern": ans.pattern.to_json() if ans.pattern is not None else None,
            "probability": ans.pattern_probability, "why": prop.why if prop is not None else None,
            "got": [a.entity.name for a in ans.answers][:5], "error": ans.error}


def learned_pass(eng: Any, qs: list[dict[str, Any]], names: list[str], k: int, kind: str = "exact",
                 misses: list[dict[str, Any]] | None = None) -> tuple[list[bool], dict[str, list[float]]]:
    """Hits@1 of the learned path on each question with ``names[i]`` as its topic; each miss is appended to
    ``misses`` (:func:`miss_record`) when given."""
    hits, times = [], {s: [] for s in LEARNED_STAGES}
    for q, name in zip(qs, names):
        forget(eng, name)
        ans = eng.ask(plain(q["question"], q["topic"], name), k=k, route="learned", raise_errors=False)
        hits.append(top1([a.entity.name for a in ans.answers], q["answers"]))
        if misses is not None and not hits[-1]:
            misses.append(miss_record(q, name, kind, ans))
        for s in LEARNED_STAGES:
            times[s].append(ans.timings.get(s, 0.0))
    return hits, times


def by_hop(qs: list[dict[str, Any]], hits: list[bool]) -> dict[str, float]:
    out: dict[str, list[bool]] = {}
    for q, h in zip(qs, hits):
        out.setdefault(str(q["hop"]), []).append(h)
    return {hop: round(sum(v) / len(v), 4) for hop, v in sorted(out.items())}


def train_generator(eng: Any, train: list[dict[str, Any]], seed: int) -> None:
    from engine.learned.train import GeneratorSettings, make_record
    from engine.retrieval.pattern import Pattern

    out = Path(tempfile.mkdtemp(prefix="isorag-names-")) / "generator.pt"
    records = [make_record(q["question"], None, q["answers"], Pattern.from_json(q["pattern"])) for q in train]
    t0 = time.perf_counter()
    trained = eng.train_generator(records, out=out, settings=GeneratorSettings(seed=seed), progress=False)
    print(f"generator: {len(train)} questions, {trained.templates} templates, {time.perf_counter() - t0:.1f} s",
          flush=True)
    eng.config = eng.config.with_(generator=str(out))


# ------------------------------------------------------------------------------------------------- aliases
def alias_kb(kb_lines: list[tuple[str, str, str]], n: int, seed: int) -> tuple[str, list[tuple[str, str, str]]]:
    """A Turtle KG of the triples of ``n`` films, each film and person with an English label and an alias sharing
    no word with it (a code name), some with a French label too. Returns (text, [(alias, relation, entity name)])."""
    rng = random.Random(seed)
    films = sorted({h for h, _, _ in kb_lines})
    chosen = set(rng.sample(films, min(n, len(films))))
    triples = [t for t in kb_lines if t[0] in chosen and t[1] in ("directed_by", "starred_actors", "written_by")]
    ents = sorted({x for h, _, t in triples for x in (h, t)})
    words = ["amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "harbor", "indigo", "juniper", "kestrel",
             "lagoon", "mesa", "nebula", "onyx", "prairie", "quartz", "raven", "sierra", "tundra"]
    iri = {e: f"<http://example.org/e{i}>" for i, e in enumerate(ents)}
    alias = {e: f"{words[i % len(words)].capitalize()} {words[(i // len(words)) % len(words)]} {i}"
             for i, e in enumerate(ents)}
    lines = ["@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .",
             "@prefix skos: <http://www.w3.org/2004/02/skos/core#> .",
             "@prefix ex: <http://example.org/rel/> ."]

    def lit(s: str) -> str:
        return json.dumps(s, ensure_ascii=False)

    for e in ents:
        lines.append(f"{iri[e]} rdfs:label {lit(e)}@en ; skos:altLabel {lit(alias[e])} .")
    for h, r, t in triples:
        lines.append(f"{iri[h]} ex:{r} {iri[t]} .")
    lookups = []
    for h, r, t in triples:
        lookups.append((alias[h], r, h))
        lookups.append((alias[t], r, t))
    return "\n".join(lines) + "\n", list(dict.fromkeys(lookups))


def alias_share(kb_lines: list[tuple[str, str, str]], n: int, seed: int, tag: str) -> dict[str, Any]:
    from engine._config import EngineConfig, MatchSettings, MilvusSettings, Neo4jSettings
    from engine._engine import Engine

    neo, mil = start_servers()
    text, lookups = alias_kb(kb_lines, n, seed)
    kg = f"names_alias_{tag}"
    eng = Engine(EngineConfig(kg=kg, neo4j=Neo4jSettings.from_env(uri=neo), milvus=MilvusSettings(uri=mil),
                              match=MatchSettings(k_node=16, k_rel=16, k=1)))
    path = Path(tempfile.mkdtemp(prefix="isorag-names-")) / "aliases.ttl"
    path.write_text(text, encoding="utf-8")
    try:
        eng.load(str(path), progress=False)
        ok, ms = 0, []
        for a, r, want in lookups:
            res = eng.retrieve({"triples": [[a, r, "UNKNOWN 1"]] if r else [[a, "related", "UNKNOWN 1"]]}, k=1)
            m = res.names.get(a)
            ok += bool(m is not None and m.name == want)
            ms.append(res.timings.get("total", 0.0))
        return {"lookups": len(lookups), "resolved": round(ok / max(len(lookups), 1), 4),
                "p50_ms": _round(percentile(ms, 50), 2)}
    finally:
        eng.drop()
        eng.close()


# ------------------------------------------------------------------------------------------------- claims
WORDINGS = {
    "directed_by": ["{h} was directed by {t}", "{t} directed {h}", "the director of {h} is {t}"],
    "written_by": ["{h} was written by {t}", "{t} wrote {h}", "the writer of {h} is {t}"],
    "starred_actors": ["{t} starred in {h}", "{t} acted in {h}", "{h} stars {t}"],
    "release_year": ["{h} was released in {t}", "{h} came out in {t}", "the release year of {h} is {t}"],
    "in_language": ["{h} is in {t}", "the language of {h} is {t}"],
    "has_genre": ["{h} is a {t} film", "the genre of {h} is {t}"],
}
MADE_UP = ["Zorblax Quinmel", "Vextor Ulmgran", "Blaxith Yatdro", "Keshpue Olomel", "Tavquin Granith"]


def build_claims(qs: list[dict[str, Any]], kb: list[tuple[str, str, str]], seed: int,
                 n: int) -> list[dict[str, Any]]:
    """Claims in sentences from 1-hop questions of the relations above: true, the answer swapped, a made-up entity."""
    rng = random.Random(seed)
    tails: dict[str, list[str]] = {}
    facts = set()
    for h, r, t in kb:
        tails.setdefault(r, []).append(t)
        facts.add((h, r, t))
    out: list[dict[str, Any]] = []
    for q in qs:
        if q["hop"] != 1 or len(out) >= n:
            continue
        (a, r, b), = q["pattern"]["triples"]
        if r not in WORDINGS:
            continue
        movie, other = (a, b) if not a.startswith("UNKNOWN") else (None, b)
        if movie is None:  # the topic is the attribute; the answer a film
            h, t = q["answers"][0], b
        else:
            h, t = movie, q["answers"][0]
        if (h, r, t) not in facts:
            continue
        wording = rng.choice(WORDINGS[r])
        swapped = next((x for x in rng.sample(tails[r], min(50, len(tails[r]))) if (h, r, x) not in facts
                        and x != t), None)
        low = r in ("directed_by", "written_by", "starred_actors") and rng.random() < 0.3
        for label, tail in (("SUPPORTED", t), ("REFUTED", swapped), ("NOT_ENOUGH_INFO", rng.choice(MADE_UP))):
            if tail is None:
                continue
            text = wording.format(h=h, t=tail.lower() if low and label != "NOT_ENOUGH_INFO" else tail)
            out.append({"claim": text, "label": label, "pattern": [[h, r, tail]]})
    return out


def claims_accuracy(eng: Any, claims: list[dict[str, Any]]) -> tuple[float, float, dict[str, int]]:
    ok_text = ok_pattern = 0
    wrong: dict[str, int] = {}
    for c in claims:
        v = eng.verify(c["claim"], route="learned", raise_errors=False)
        if v.label == c["label"]:
            ok_text += 1
        else:
            key = f"{c['label']}->{v.label}"
            wrong[key] = wrong.get(key, 0) + 1
        p = eng.verify(c["claim"], pattern={"triples": c["pattern"]}, raise_errors=False)
        ok_pattern += p.label == c["label"]
    n = max(len(claims), 1)
    return round(ok_text / n, 4), round(ok_pattern / n, 4), wrong


# ------------------------------------------------------------------------------------------------- main
def read_kb(path: Path) -> list[tuple[str, str, str]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        p = line.split("|")
        if len(p) == 3 and all(p):
            out.append((p[0], p[1], p[2]))
    return out


def baseline_p50(base: str, args: argparse.Namespace, qs: list[dict[str, Any]], kb: Path) -> dict[str, float]:
    """The exact names' gold retrieval run by the engine of another checkout, in a child process (given the
    questions in a file: it imports nothing of this checkout's engine)."""
    env = {**os.environ, "PYTHONPATH": base}
    path = Path(tempfile.mkdtemp(prefix="isorag-names-")) / "questions.json"
    path.write_text(json.dumps({"questions": qs, "kb": str(kb)}), encoding="utf-8")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--baseline-only", base, "--questions", str(path),
           "--kg", args.kg, "--k", str(args.k)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=str(ROOT))
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_baseline(args: argparse.Namespace) -> None:
    import engine

    data = json.loads(Path(args.questions).read_text(encoding="utf-8"))
    qs = data["questions"]
    eng = engine_for(args.kg, Path(data["kb"]), args.k)
    eng.retrieve(with_topic(qs[0]["pattern"], qs[0]["topic"], qs[0]["topic"]), k=args.k)  # warm-up
    hits, times = gold_pass(eng, qs, [q["topic"] for q in qs], args.k)
    print(json.dumps({**{s: _round(percentile(v, 50), 2) for s, v in times.items()}, "hits1": by_hop(qs, hits),
                      "engine": str(Path(engine.__file__).resolve().parent.parent)}))
    eng.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=None, help="first N questions a hop")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--kg", default=None)
    ap.add_argument("--data", default=str(DATA), help="MetaQA folder (kb.txt, {1,2,3}-hop/qa_dev.txt and qtypes)")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--baseline", default=None, help="a checkout whose engine runs the exact names' p50 too")
    ap.add_argument("--rounds", type=int, default=3, help="with --baseline: rounds of each engine, alternating")
    ap.add_argument("--baseline-only", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--questions", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--claims", type=int, default=300, help="claims made (three per 1-hop question)")
    ap.add_argument("--aliases", type=int, default=100, help="films of the alias KG")
    ap.add_argument("--kinds", default=",".join(KINDS), help="the kinds of perturbation run, comma separated")
    ap.add_argument("--learned-only", action="store_true",
                    help="only the learned path (no gold patterns, claims, aliases or p50 baseline)")
    ap.add_argument("--misses", default=None, help="write the learned path's misses (every kind) to this JSON file")
    # --smoke: the demo KG, a few questions a hop (under a minute)
    args = parse_args(ap, {"limit": 4, "claims": 12, "aliases": 8, "kg": "names_smoke"})
    kinds_run = [k.strip() for k in args.kinds.split(",") if k.strip()]
    bad = [k for k in kinds_run if k not in KINDS]
    if bad:
        ap.error(f"--kinds: unknown kind(s) {', '.join(bad)} (known: {', '.join(KINDS)})")
    if args.baseline_only:  # the other checkout's engine, not this one's (_common put this checkout first)
        sys.path.insert(0, str(Path(args.baseline_only).resolve()))
        run_baseline(args)
        return
    kg = args.kg or "names_metaqa"
    args.kg = kg
    if args.smoke:
        qs = demo_questions(args.limit)
        full = read_kb(DEMO / "kb.txt")
        near = {q["topic"] for q in qs} | {a for q in qs for a in q["answers"]}
        kb_lines = [t for t in full if t[0] in near or t[2] in near]
        kb = Path(tempfile.mkdtemp(prefix="isorag-names-")) / "kb.txt"
        kb.write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in kb_lines), encoding="utf-8")
    else:
        qs = metaqa_questions(args.limit, Path(args.data))
        kb = Path(args.data) / "kb.txt"
        kb_lines = read_kb(kb)
    eng = engine_for(kg, kb, args.k)
    eng.retrieve(with_topic(qs[0]["pattern"], qs[0]["topic"], qs[0]["topic"]), k=args.k)  # warm-up
    load0 = os.getloadavg()
    rng = random.Random(args.seed)
    variants = {kind: [perturb(q["topic"], kind, rng) for q in qs] for kind in KINDS}  # all: the same names a run
    others = drop_names_of_others(eng, qs, variants)
    # the learned generator: trained on 80% of the questions (exact names), tested on the rest
    order = list(range(len(qs)))
    random.Random(args.seed).shuffle(order)
    cut = int(0.8 * len(qs))
    train, test_idx = [qs[i] for i in sorted(order[:cut])], sorted(order[cut:])
    train_generator(eng, train, args.seed)
    # the exact names' p50 of another checkout's engine, in rounds alternating with this one's (the machine's load
    # moves: each engine's p50 is the mean over its rounds)
    gold = not args.learned_only
    base_runs = [baseline_p50(args.baseline, args, qs, kb)] if args.baseline and gold else []
    exact_gold, exact_times = gold_pass(eng, qs, [q["topic"] for q in qs], args.k) if gold else ([], {})
    own_runs = [_round(percentile(exact_times["total"], 50), 2)] if gold else []
    for _ in range(args.rounds - 1 if base_runs else 0):
        base_runs.append(baseline_p50(args.baseline, args, qs, kb))
        own_runs.append(_round(percentile(gold_pass(eng, qs, [q["topic"] for q in qs], args.k)[1]["total"], 50), 2))
    if base_runs:
        base_runs.append(baseline_p50(args.baseline, args, qs, kb))
    test = [qs[i] for i in test_idx]
    misses: list[dict[str, Any]] | None = [] if args.misses else None
    exact_learned, learned_times = learned_pass(eng, test, [q["topic"] for q in test], args.k, "exact", misses)
    kinds: dict[str, Any] = {"exact": {"learned": by_hop(test, exact_learned), "questions": len(qs)}}
    if gold:
        kinds["exact"]["gold"] = by_hop(qs, exact_gold)
    print(f"{'exact':10s} {len(qs):5d} questions  gold {kinds['exact'].get('gold')}"
          f"  learned {kinds['exact']['learned']}", flush=True)
    p50 = {"exact": _round(percentile(exact_times["total"], 50), 2)} if gold else {}
    stages = {"exact": {s: _round(percentile(v, 50), 2) for s, v in exact_times.items()}} if gold else {}
    learned_p50 = {"exact": {s: _round(percentile(v, 50), 2) for s, v in learned_times.items()}}
    for kind in kinds_run:
        idx = [i for i, v in enumerate(variants[kind]) if v is not None]
        sub = [qs[i] for i in idx]
        tidx = [i for i in test_idx if variants[kind][i] is not None]
        lsub = [qs[i] for i in tidx]
        lhits, ltimes = learned_pass(eng, lsub, [variants[kind][i] or "" for i in tidx], args.k, kind, misses)
        kinds[kind] = {"learned": by_hop(lsub, lhits), "questions": len(sub), "names_of_others": others[kind],
                       "exact_same": {"learned": by_hop(lsub, [exact_learned[test_idx.index(i)] for i in tidx])}}
        learned_p50[kind] = {s: _round(percentile(v, 50), 2) for s, v in ltimes.items()}
        if gold:
            hits, times = gold_pass(eng, sub, [variants[kind][i] or "" for i in idx], args.k)
            kinds[kind]["gold"] = by_hop(sub, hits)
            kinds[kind]["exact_same"]["gold"] = by_hop(sub, [exact_gold[i] for i in idx])
            p50[kind] = _round(percentile(times["total"], 50), 2)
            stages[kind] = {s: _round(percentile(v, 50), 2) for s, v in times.items()}
        print(f"{kind:10s} {len(sub):5d} questions  gold {kinds[kind].get('gold')}"
              f" (exact {kinds[kind]['exact_same'].get('gold')})"
              f"  learned {kinds[kind]['learned']} (exact {kinds[kind]['exact_same']['learned']})"
              f"  left out as others' names {others[kind]}", flush=True)
    if misses is not None:
        Path(args.misses).write_text(json.dumps(misses, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"misses: {len(misses)} written to {args.misses}", flush=True)
    text_acc = pattern_acc = None
    claims: list[dict[str, Any]] = []
    wrong: dict[str, int] = {}
    if gold:
        claims = build_claims([q for i, q in enumerate(qs) if i in set(test_idx)] or qs, kb_lines, args.seed,
                              args.claims)
        text_acc, pattern_acc, wrong = claims_accuracy(eng, claims)
        print(f"claims: {len(claims)}  from text {text_acc}  with patterns {pattern_acc}  errors {wrong}", flush=True)
    if args.smoke:
        eng.drop()
    eng.close()
    aliases: dict[str, Any] = {"resolved": None}
    if gold:
        aliases = alias_share(kb_lines, args.aliases, args.seed, "smoke" if args.smoke else "bench")
        print(f"aliases: {aliases}", flush=True)
    result: dict[str, Any] = {
        "kinds": kinds, "p50_ms": p50, "alias_resolved": aliases["resolved"], "claims_text_accuracy": text_acc,
        "claims_pattern_accuracy": pattern_acc, "claims": len(claims), "claims_errors": wrong,
        "stages_p50_ms": stages, "learned_p50_ms": learned_p50, "aliases": aliases, "limit": args.limit,
        "seed": args.seed, "kinds_run": kinds_run, "learned_only": args.learned_only,
        "loadavg": [round(x, 2) for x in load0],
    }
    if base_runs:
        base = {s: round(sum(b.get(s) or 0.0 for b in base_runs) / len(base_runs), 2) for s in STAGES}
        result["baseline_p50_ms"] = base
        result["baseline_runs"] = base_runs
        result["own_runs_p50_ms"] = own_runs
        mean_own = sum(x or 0.0 for x in own_runs) / len(own_runs)
        result["p50_ratio_exact_vs_baseline"] = round(mean_own / max(base["total"], 1e-9), 3)
        # the exact names' gold Hits@1 of the other engine, on the same questions and KG
        result["baseline_hits1"] = base_runs[0].get("hits1")
        print(f"exact names, gold patterns, Hits@1: this engine {kinds['exact'].get('gold')}, the other "
              f"{result['baseline_hits1']}", flush=True)
        print(f"baseline (exact names, gold patterns, mean of the runs before and after): {base}; this engine "
              f"{stages['exact']}", flush=True)
    result["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    emit("names" if gold and len(kinds_run) == len(KINDS) else "names.partial", result)


if __name__ == "__main__":
    main()
