"""The learned-pattern benchmark shared by metaqa.py and pathquestion.py (``--pattern learned``).

Train the KG's pattern generator on the training questions, ``--train-from``: ``gold`` (their gold patterns as
templates), ``qa`` (question-answer pairs alone: the relation paths are found in the KG and chosen across the
training set) or ``synth`` (no question of the data set at all: ``isorag synth``'s questions about the KG, several
wordings each), then answer each test
question in plain text through ``Engine.ask(route="learned")`` with no LLM, and the same question with its gold
pattern through ``Engine.ask(pattern=...)`` (the same pipeline: what the learned path adds, ``learned_added_p50_ms``)
and ``Engine.retrieve``. Per hop: linking accuracy, pattern accuracy (the top pattern's template equals
the gold one), Hits@1 / Hits@3 of both; p50 / p95 per stage (link, generate, embed, vector, graph, total). Then
the router with the scripted test LLM (tests/helpers/llm_server.py, answering each pattern prompt with the gold
pattern): the share of questions it sends to the LLM at the generator's calibrated threshold and the Hits@1 of the
learned answers it keeps. With ``unanswerable`` (questions the KG cannot answer, written for the benchmark):
the share of them that get an entity as the answer without an LLM (``route="auto"``), and the share the router
sends to the scripted LLM, beside the share of answerable questions it sends.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from _common import ROOT, RESULTS, percentile

STAGES = ("link", "generate", "embed", "vector", "graph", "total")


def norm(s: str) -> str:
    return " ".join(s.lower().replace("_", " ").split())


def _hits(names: list[str], gold: set[str]) -> tuple[bool, bool]:
    names = [norm(n) for n in names]
    return bool(names) and names[0] in gold, any(n in gold for n in names[:3])


def forget(eng: Any, text: str) -> None:
    """Drop one text from the retriever's embedding cache (benchmark only: a topic seen for the first time)."""
    eng.retriever.forget_text(text)


def add_synth_arguments(ap: Any, n: int) -> None:
    """The options of ``--train-from synth`` (``n``: the default number of samples), the same in every benchmark
    that trains on ``isorag synth``'s questions; :func:`synth_options` reads them."""
    ap.add_argument("--synth-n", type=int, default=n, help="--train-from synth: samples of isorag synth")
    ap.add_argument("--synth-walk", choices=["forward", "random"], default="forward",
                    help="--train-from synth: how path samples walk (SynthSettings.walk)")
    ap.add_argument("--synth-path-share", type=float, default=1.0,
                    help="--train-from synth: the most of a shape's samples one relation path takes")
    ap.add_argument("--synth-wordings", type=int, default=None, help="--train-from synth: wordings per sample")
    ap.add_argument("--synth-template-question", action="store_true",
                    help="--train-from synth: the template's wording among each sample's (SynthSettings)")


def synth_options(args: Any) -> dict[str, Any]:
    """The sampler's settings given by :func:`add_synth_arguments`' options (keywords of :func:`synth_records`, and
    what a benchmark's JSON records of them)."""
    return {"walk": args.synth_walk, "path_share": args.synth_path_share, "wordings": args.synth_wordings,
            "template_question": args.synth_template_question}


def synth_records(eng: Any, n: int, shapes: list[str], seed: int, name: str, *, walk: str = "forward",
                  path_share: float = 1.0, wordings: int | None = None,
                  template_question: bool = False) -> list[Any]:
    """``isorag synth``'s questions about the KG (no LLM), every wording a training record, as a user sets up a KG
    with no questions of its own: ``isorag synth --out F`` then ``isorag train-generator --qa F``. ``walk``,
    ``path_share``, ``wordings``, ``template_question``: the sampler's settings
    (:class:`engine.evaluation.synth.SynthSettings`)."""
    from engine.evaluation.synth import SynthSettings, Synthesizer, write_jsonl
    from engine.learned.train import read_records

    t0 = time.perf_counter()
    settings = replace(SynthSettings(), walk=walk, path_share=path_share, template_question=template_question)
    if wordings is not None:
        settings = replace(settings, wordings=wordings)
    syn = Synthesizer(eng.graph, seed=seed, settings=settings)
    recs = list(syn.generate(n, shapes))
    path = RESULTS / f"synth_{name}.jsonl"
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_jsonl(recs, path)
    records = read_records(path)
    print(f"synth: {len(recs):,} samples ({', '.join(shapes)}), {len(records):,} wordings in "
          f"{time.perf_counter() - t0:.1f} s; dropped {syn.dropped}", flush=True)
    return records


def training_records(train: list[dict[str, Any]], train_from: str) -> list[Any]:
    """The training records of ``train`` items: with their gold patterns (``gold``) or without (``qa``)."""
    from engine.learned.train import make_record

    return [make_record(q["question"], None if "[" in q["question"] else [q["topic"]], q["answers"],
                        q["gold"] if train_from == "gold" else None) for q in train]


def run_learned(eng: Any, train: list[dict[str, Any]], test: list[dict[str, Any]], *, name: str, k: int,
                seed: int, router: bool = True, progress: bool = True, train_from: str = "gold",
                records: list[Any] | None = None, unanswerable: list[dict[str, Any]] | None = None,
                misses: Path | None = None) -> dict[str, Any]:
    """``train`` / ``test`` items: ``{"question" (with [brackets] around the topic where the data has them),
    "text" (plain), "topic", "answers", "gold" (Pattern), "hop"}``; ``records``: the training records when they
    do not come from ``train`` (``--train-from synth``); ``misses``: a JSON Lines file for every Hits@1 miss of
    the learned route (:func:`miss_record`)."""
    from tqdm import tqdm

    from engine.learned.templates import Template
    from engine.learned.train import GeneratorSettings
    from engine.retrieval.retriever import normalize_name

    out = RESULTS / f"generator_{name}.pt"
    records = records if records is not None else training_records(train, train_from)
    t0 = time.perf_counter()
    trained = eng.train_generator(records, out=out, settings=GeneratorSettings(seed=seed), progress=progress)
    train_s = time.perf_counter() - t0
    print(f"generator: {json.dumps(trained.to_dict())}", flush=True)
    eng.config = eng.config.with_(generator=str(out))
    gen = eng.generator
    threshold = gen.threshold
    # warm-up: the model, connections, caches
    eng.ask(test[0]["text"], route="learned", raise_errors=False)

    per_hop: dict[str, dict[str, Any]] = {}
    stages: dict[str, list[float]] = {s: [] for s in STAGES}
    gold_stages: dict[str, list[float]] = {s: [] for s in ("embed", "vector", "graph", "total")}
    kept: list[tuple[float, bool]] = []
    missed = open(misses, "w", encoding="utf-8") if misses is not None else None
    given_total: list[float] = []  # Engine.ask with the gold pattern given, ms
    added: list[float] = []  # learned minus given, per question, ms
    for q in tqdm(test, desc="learned vs gold", unit="q", disable=not progress):
        h = per_hop.setdefault(str(q["hop"]), {"n": 0, "link": 0, "pattern": 0, "h1": 0, "h3": 0, "g1": 0, "g3": 0})
        gold = {norm(a) for a in q["answers"]}
        # the same question through the same pipeline with its gold pattern given: what the learned path adds is
        # the difference. Both start with the topic's name not yet embedded (as for a question about an entity
        # not asked about before; relation names stay cached in both, as they are in service)
        forget(eng, q["topic"])
        given = eng.ask(q["text"], k=k, pattern=q["gold"], raise_errors=False)
        given_total.append(given.timings.get("total", 0.0))
        forget(eng, q["topic"])
        t1 = time.perf_counter()
        ans = eng.ask(q["text"], k=k, route="learned", raise_errors=False)
        wall = (time.perf_counter() - t1) * 1000
        for s in STAGES:
            stages[s].append(ans.timings.get(s, 0.0) if s != "total" else ans.timings.get("total", wall))
        added.append(stages["total"][-1] - given_total[-1])
        prop = ans.proposal
        linked = [normalize_name(t.name) for t in prop.linked] if prop is not None else []
        h["link"] += linked == [normalize_name(q["topic"])]
        want = Template.from_pattern(q["gold"], [q["topic"]])
        h["pattern"] += bool(prop is not None and prop.templates and linked == [normalize_name(q["topic"])]
                             and prop.templates[0] == want)
        h1, h3 = _hits([a.entity.name for a in ans.answers], gold)
        h["h1"] += h1
        h["h3"] += h3
        res = eng.retrieve(q["gold"], k=k)
        for s in gold_stages:
            gold_stages[s].append(res.timings.get(s, 0.0))
        g1, g3 = _hits([a.entity.name for a in res.answers], gold)
        h["g1"] += g1
        h["g3"] += g3
        h["n"] += 1
        kept.append((ans.pattern_probability or 0.0, h1))
        if missed is not None and not h1:
            missed.write(json.dumps(miss_record(q, ans, want, g1)) + "\n")
    if missed is not None:
        missed.close()

    def share(key: str) -> dict[str, float]:
        return {hop: round(v[key] / max(v["n"], 1), 4) for hop, v in sorted(per_hop.items())}

    result: dict[str, Any] = {
        "questions": {hop: v["n"] for hop, v in sorted(per_hop.items())},
        "train_questions": len(train), "hits1": share("h1"), "hits3": share("h3"),
        "hits1_gold": share("g1"), "hits3_gold": share("g3"), "linking_acc": share("link"),
        "pattern_acc": share("pattern"),
        "hits1_gap": {hop: round((v["g1"] - v["h1"]) / max(v["n"], 1), 4) for hop, v in sorted(per_hop.items())},
        "p50_ms": {s: round(percentile(v, 50), 2) for s, v in stages.items()},
        "p95_ms": {s: round(percentile(v, 95), 2) for s, v in stages.items()},
        "gold_p50_ms": {s: round(percentile(v, 50), 2) for s, v in gold_stages.items()},
        "gold_ask_p50_ms": round(percentile(given_total, 50), 2),
        "learned_added_p50_ms": round(percentile(added, 50), 2),
        "generator": {"train_from": train_from, "train_records": len(records), "train_s": round(train_s, 1),
                      "templates": trained.templates, "threshold": round(threshold, 4),
                      "calibration": trained.calibration, "paths_chosen": trained.paths_chosen,
                      "seed": seed, "heldout_linking_acc": trained.linking_acc,
                      "heldout_pattern_acc": trained.pattern_acc},
    }
    keep = [h for p, h in kept if p >= threshold]
    result["router_offline"] = {"threshold": round(threshold, 4),
                                "share_to_llm": round(1 - len(keep) / max(len(kept), 1), 4),
                                "hits1_kept": round(sum(keep) / max(len(keep), 1), 4),
                                # no LLM: a question under the threshold is not answered (a miss here)
                                "hits1_no_llm": round(sum(keep) / max(len(kept), 1), 4)}
    if unanswerable:
        result["unanswerable"] = run_unanswerable(eng, unanswerable, k=k, progress=progress)
    if router:
        result["router"] = run_router(eng, test, k=k, progress=progress, unanswerable=unanswerable)
        if unanswerable:
            result["unanswerable"]["to_llm_share"] = result["router"]["unanswerable_to_llm_share"]
            result["unanswerable"]["answerable_to_llm_share"] = result["router"]["share_to_llm"]
    return result


def miss_record(q: dict[str, Any], ans: Any, want: Any, gold_hit: bool) -> dict[str, Any]:
    """One Hits@1 miss of the learned route: the question, its gold template, what was linked, the beam's
    templates with their probabilities, the first answers, and whether the gold pattern hit."""
    prop = ans.proposal
    beam = list(zip(prop.templates, prop.template_probabilities)) if prop is not None else []
    return {"hop": str(q["hop"]), "question": q["text"], "topic": q["topic"], "gold": want.key(),
            "gold_hit": bool(gold_hit), "linked": [t.name for t in prop.linked] if prop is not None else [],
            "beam": [[t.key(), round(float(p), 4)] for t, p in beam],
            "answers": [a.entity.name for a in ans.answers[:3]], "why": prop.why if prop is not None else None}


def run_unanswerable(eng: Any, items: list[dict[str, Any]], *, k: int, progress: bool) -> dict[str, Any]:
    """Questions the KG cannot answer, asked with no LLM (``route="auto"``): how many get an entity as the
    answer, and why the others were not answered."""
    from collections import Counter

    from tqdm import tqdm

    answered, why = 0, Counter()
    examples = []
    for q in tqdm(items, desc="unanswerable (no LLM)", unit="q", disable=not progress):
        ans = eng.ask(q["question"], k=k, route="auto", raise_errors=False)
        if ans.answers and ans.answer_source != "none":
            answered += 1
            if len(examples) < 10:
                examples.append([q["question"], ans.answers[0].entity.name, round(ans.pattern_probability or 0, 3)])
        else:
            reason = (ans.proposal.why if ans.proposal is not None and ans.proposal.why else
                      "under the threshold" if ans.proposal is not None and ans.proposal.beam else "other")
            why[reason.split(" of ")[0] if reason.startswith("no learned pattern fits") else reason] += 1
    n = max(len(items), 1)
    return {"questions": len(items), "answered_wrong_share": round(answered / n, 4), "not_answered": dict(why),
            "answered_examples": examples}


def run_router(eng: Any, test: list[dict[str, Any]], *, k: int, progress: bool,
               unanswerable: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``route="auto"`` with the scripted test LLM, which writes each pattern it is asked for as the gold one (for
    a question the KG cannot answer, a pattern with the relation it asks about)."""
    from tqdm import tqdm

    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.llm_server import Reply, ScriptedLLMServer

    from engine.llm import LLMConfig, make_llm

    state: dict[str, Any] = {"gold": None}

    def respond(body: dict[str, Any]) -> Reply:
        gold, state["gold"] = state["gold"], None  # the first request of a question is its pattern prompt
        return Reply(json.dumps(gold) if gold is not None else "ok")

    server = ScriptedLLMServer().start()
    server.responder = respond
    eng.llm = make_llm(LLMConfig(base_url=server.base_url, model="scripted", api_key="test"))
    try:
        sent = learned = learned_hits = llm_hits = 0
        for q in tqdm(test, desc="router (scripted LLM)", unit="q", disable=not progress):
            state["gold"] = q["gold"].to_json()
            before = len(server.requests)
            ans = eng.ask(q["text"], k=k, route="auto", raise_errors=False)
            asked = len(server.requests) > before
            gold = {norm(a) for a in q["answers"]}
            h1, _ = _hits([a.entity.name for a in ans.answers], gold)
            if asked:
                sent += 1
                llm_hits += h1
            else:
                learned += 1
                learned_hits += h1
        n = max(len(test), 1)
        out = {"questions": len(test), "share_to_llm": round(sent / n, 4),
               "hits1_learned_kept": round(learned_hits / max(learned, 1), 4),
               "hits1_llm_gold_patterns": round(llm_hits / max(sent, 1), 4),
               "hits1_overall": round((learned_hits + llm_hits) / n, 4)}
        if unanswerable:
            to_llm = 0
            for q in tqdm(unanswerable, desc="router, unanswerable", unit="q", disable=not progress):
                state["gold"] = {"triples": [[q["topic"], q.get("asks", "unknown"), "UNKNOWN 1"]]}
                before = len(server.requests)
                eng.ask(q["question"], k=k, route="auto", raise_errors=False)
                to_llm += len(server.requests) > before
            out["unanswerable_to_llm_share"] = round(to_llm / max(len(unanswerable), 1), 4)
        return out
    finally:
        eng.llm = False
        server.stop()


def split(items: list[dict[str, Any]], share: float, seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A seeded split of ``items``: (training ``share``, the rest)."""
    import random

    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    cut = int(len(items) * share)
    return [items[i] for i in sorted(order[:cut])], [items[i] for i in sorted(order[cut:])]


def print_summary(result: dict[str, Any]) -> None:
    for hop in result["questions"]:
        print(f"{hop}: {result['questions'][hop]} questions  linking {result['linking_acc'][hop]:.4f}  pattern "
              f"{result['pattern_acc'][hop]:.4f}  Hits@1 {result['hits1'][hop]:.4f} "
              f"(gold {result['hits1_gold'][hop]:.4f})"
              f"  Hits@3 {result['hits3'][hop]:.4f} (gold {result['hits3_gold'][hop]:.4f})", flush=True)
    print(f"latency p50 (ms): {result['p50_ms']}\nlatency p95 (ms): {result['p95_ms']}")
    print(f"the same questions with their gold patterns given, through the same Engine.ask: p50 "
          f"{result['gold_ask_p50_ms']} ms; the learned path adds {result['learned_added_p50_ms']} ms (p50 of the "
          f"per-question difference)")
    print(f"generator: {result['generator']}")
    print(f"router without an LLM: {result['router_offline']}")
    if "unanswerable" in result:
        print(f"unanswerable: {result['unanswerable']}")
    if "router" in result:
        print(f"router: {result['router']}")


def read_unanswerable(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


__all__ = ["miss_record", "run_learned", "run_router", "run_unanswerable", "read_unanswerable", "split",
           "print_summary", "synth_records", "training_records", "replace", "Path"]
