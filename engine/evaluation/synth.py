"""Ground-truth questions and claims sampled from a loaded KG, after SynthKGQA (Cattaneo, Luschi, Justus,
"Ground-Truth Subgraphs for Better Training and Evaluation of Knowledge Graph Augmented LLMs").

For each requested shape a small tree of KG triples is sampled through Cypher, preferring low-degree
neighbours (the paper's Algorithm 1: ``choice(M, p=Softmax([d(x)^-1 for x in M]))``):

==========  =================  ========================================================
shape       isomorphism type   sampled as
==========  =================  ========================================================
``path1``   ``(1)``            seed -> answer
``path2``   ``(2)``            seed -> intermediate -> answer
``path3``   ``(3)``            seed -> two intermediates -> answer
``star``    ``((1)(1))``       two seeds meet at a hub, the hub's third neighbour is the answer
``conj2``   ``(1)(1)``         two seeds each joined to the answer (an intersection)
``conj3``   ``(1)(1)(1)``      three seeds each joined to the answer
==========  =================  ========================================================

Each sample becomes one record: a question and a claim from relation-name templates (paraphrased by the
LLM when one is configured), the seeds, the ground-truth triples, the gold pattern ``{"triples": [...]}`` (seeds
known, other nodes ``UNKNOWN <n>``, the answer the highest number), **every** answer and the full answer
subgraph (found by running the sample's own Cypher query, written from the pattern with validated,
backtick-escaped relationship types and every value a parameter, so the answer set is complete), the
isomorphism type, the number of hops and corrupted claims labelled REFUTED (one entity of one triple swapped
for another entity at the same end of the same relation, checked to be absent from the KG).

Classification as in the paper: a sample whose answer set exceeds ``max_answers`` or that answers itself
(a seed among the answers) is dropped; a multi-seed sample is *redundant* when a proper subset of its seeds
(the sub-query over the paths from those seeds to the answer) already gives the same answer set, and the
smallest such subset and its isomorphism type are recorded (dropped with ``drop_redundant``).

Semantics of the answer query: directed as in the source (the question's reading), injective (distinct KG
nodes for distinct pattern nodes, the matcher's default); evaluate with ``directed=True`` to match it.
"""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from engine._cypher import cypher, rel_type as rel_type_slot, render
from engine.retrieval.statements import answer_statement
from engine._errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import GraphReader
    from engine.llm import LLM

SHAPES = ("path1", "path2", "path3", "star", "conj2", "conj3")
#: walks of the path shapes: ``forward`` takes a relationship that leaves the current entity where it has one, and
#: at an entity with none (an actor of a film KG, a year) turns back along a relationship that enters it, of the
#: relation it came by where it can ("the films that share an actor with X"); ``random`` takes either direction
WALKS = ("forward", "random")
SEED, INTERMEDIATE, ANSWER = "seed", "intermediate", "answer"


@dataclass(frozen=True)
class SynthSettings:
    """Bounds and filters of the sampler (named defaults; override with ``dataclasses.replace``)."""

    #: a sample with more answers than this is dropped (SynthKGQA keeps mostly unique answers: 1.3-1.5 on average)
    max_answers: int = 10
    #: neighbours fetched per sampling step (a hub's first ``neighbour_cap`` relationships)
    neighbour_cap: int = 200
    #: rows of the answer query; more means the answer set is too large to be a question
    max_rows: int = 5_000
    #: corrupted claims per record
    corruptions: int = 1
    #: sampling attempts per kept record before the shape is given up
    attempts: int = 30
    drop_redundant: bool = False
    #: seed pool drawn in one scan, as a multiple of the records asked for
    pool_factor: int = 40
    #: wordings of each question (``questions``: the template's, then others, see :mod:`engine.evaluation.wording`)
    wordings: int = 4
    #: how a path shape walks from its seed (see :data:`WALKS`): ``forward`` along the relationships' direction,
    #: as multi-hop questions read, or ``random`` (either direction at every step)
    walk: str = "forward"
    #: at most this share of a shape's records follow one relation path (its relations and directions), so that
    #: rarer paths get records too; 1.0: no bound. A shape whose paths cannot fill its share stops early
    path_share: float = 1.0
    #: keep the template's wording ("What is the entity that ...", SynthKGQA's) among ``questions``; without it
    #: the record's ``question`` is its first worded one and the template's is kept as ``template_question``
    template_question: bool = False

    def __post_init__(self) -> None:
        if self.walk not in WALKS:
            raise ConfigError(f"SynthSettings.walk must be one of {', '.join(WALKS)}, got {self.walk!r}")
        if not 0.0 < self.path_share <= 1.0:
            raise ConfigError(f"SynthSettings.path_share must be in (0, 1], got {self.path_share!r}")


@dataclass
class GTSample:
    """A sampled tree: node eids with their roles, edges ``(head index, rel type, rel name, tail index)``."""

    shape: str
    eids: list[int]
    roles: list[str]
    edges: list[tuple[int, str, str, int]]
    names: list[str] = field(default_factory=list)

    @property
    def seeds(self) -> list[int]:
        return [i for i, r in enumerate(self.roles) if r == SEED]

    @property
    def answer(self) -> int:
        return self.roles.index(ANSWER)


# -- tree helpers (pure: unit-tested without a KG) ---------------------------------------------------------
def _adjacency(n: int, edges: Sequence[tuple[int, Any, Any, int]]) -> list[list[int]]:
    adj: list[list[int]] = [[] for _ in range(n)]
    for h, _, _, t in edges:
        adj[h].append(t)
        adj[t].append(h)
    return adj


def isomorphism_type(n: int, edges: Sequence[tuple[int, Any, Any, int]], answer: int) -> str:
    """SynthKGQA's tree notation rooted at the answer: ``(n)`` a projection of length n from a seed to the
    nearest branching point, juxtaposition an intersection, ``(k(n)(m))`` a further projection of length k
    after an intersection (k omitted when 1). Branches are written longest first."""
    adj = _adjacency(n, edges)

    def branch(node: int, parent: int, length: int) -> str:
        kids = [c for c in adj[node] if c != parent]
        if not kids:
            return f"({length})"
        if len(kids) == 1:
            return branch(kids[0], node, length + 1)
        inner = "".join(sorted((branch(c, node, 1) for c in kids), reverse=True))
        return f"({'' if length == 1 else length}{inner})"

    return "".join(sorted((branch(c, answer, 1) for c in adj[answer]), reverse=True))


def hops(n: int, edges: Sequence[tuple[int, Any, Any, int]], answer: int, seeds: Sequence[int]) -> int:
    """The largest seed -> answer distance in the (undirected) tree."""
    dist = _distances(n, edges, answer)
    return max((dist[s] for s in seeds), default=0)


def _distances(n: int, edges: Sequence[tuple[int, Any, Any, int]], root: int) -> list[int]:
    adj = _adjacency(n, edges)
    dist = [-1] * n
    dist[root] = 0
    todo = [root]
    while todo:
        v = todo.pop()
        for w in adj[v]:
            if dist[w] < 0:
                dist[w] = dist[v] + 1
                todo.append(w)
    return dist


def subtree_edges(n: int, edges: Sequence[tuple[int, Any, Any, int]], answer: int,
                  seeds: Sequence[int]) -> list[int]:
    """Indices of the edges on the paths from ``seeds`` to ``answer`` (SynthKGQA's sub-query graph, its appendix
    A.3)."""
    adj_e: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for i, (h, _, _, t) in enumerate(edges):
        adj_e[h].append((t, i))
        adj_e[t].append((h, i))
    parent: dict[int, tuple[int, int] | None] = {answer: None}
    todo = [answer]
    while todo:
        v = todo.pop()
        for w, i in adj_e[v]:
            if w not in parent:
                parent[w] = (v, i)
                todo.append(w)
    keep: set[int] = set()
    for s in seeds:
        cur = parent.get(s)
        while cur is not None:
            v, i = cur
            keep.add(i)
            cur = parent[v]
    return sorted(keep)


def inverse_degree_weights(degrees: Sequence[int]) -> list[float]:
    """Softmax of 1/d (SynthKGQA's Algorithm 1)."""
    xs = [1.0 / max(int(d), 1) for d in degrees]
    m = max(xs) if xs else 0.0
    ws = [math.exp(x - m) for x in xs]
    s = sum(ws)
    return [w / s for w in ws]


def _phrase(rel: str) -> str:
    return " ".join(rel.replace("_", " ").split())


def describe(n: int, edges: Sequence[tuple[int, str, str, int]], names: Sequence[str], roles: Sequence[str],
             node: int, parent: int | None = None) -> str:
    """A template description of ``node`` through the tree hanging from it (seeds are named)."""
    if roles[node] == SEED and parent is not None:
        return names[node]
    clauses = []
    for h, _, rel, t in edges:
        if h == node and t != parent:
            clauses.append(f"{_phrase(rel)} {describe(n, edges, names, roles, t, node)}")
        elif t == node and h != parent:
            clauses.append(f"{describe(n, edges, names, roles, h, node)} {_phrase(rel)}")
    return "the entity that " + " and that ".join(clauses)


def question_text(sample: GTSample) -> str:
    d = describe(len(sample.eids), sample.edges, sample.names, sample.roles, sample.answer)
    return f"What is {d}?"


def claim_text(triples: Sequence[Sequence[str]]) -> str:
    return " and ".join(f"{h} {_phrase(r)} {t}" for h, r, t in triples) + "."


# -- Cypher written from a sample ---------------------------------------------------------------------------
def answer_query(sample: GTSample, edge_ids: Sequence[int] | None = None, seeds: Sequence[int] | None = None,
                 allowed_types: frozenset[str] | set[str] | None = None, *, directed: bool = True) -> str:
    """The sample's own query: every binding of its pattern with the seeds fixed (values as parameters
    ``$n<i>``, types validated against ``allowed_types`` and backtick-escaped); returns the answer's eid and
    the matched triples ``[head eid, type, tail eid]`` per row."""
    idx = list(range(len(sample.edges))) if edge_ids is None else list(edge_ids)
    seeds = sample.seeds if seeds is None else list(seeds)
    edges = [(i, sample.edges[i][0], sample.edges[i][1], sample.edges[i][3]) for i in idx]
    return answer_statement(edges, sample.answer, seeds, allowed_types, directed=directed)


def answer_params(sample: GTSample, seeds: Sequence[int] | None = None) -> dict[str, Any]:
    return {f"n{s}": sample.eids[s] for s in (sample.seeds if seeds is None else seeds)}


# -- the sampler --------------------------------------------------------------------------------------------
class Synthesizer:
    """Samples ground-truth records from the KG of ``graph`` (a :class:`engine.stores.graph.GraphStore`)."""

    def __init__(self, graph: GraphReader, *, seed: int = 0, settings: SynthSettings | None = None,
                 llm: LLM | None = None) -> None:
        self.graph = graph
        self.rng = random.Random(seed)
        self.seed = seed
        self.settings = settings or SynthSettings()
        self.llm = llm
        self._pool: list[int] = []
        self._pool_size = 0
        self._relation_names: dict[str, str] | None = None  # relationship type -> relation name (the catalog)
        self.dropped: dict[str, int] = {}

    # -- Cypher reads ------------------------------------------------------------------------------
    def _fill_pool(self, want: int) -> None:
        n = int(self.graph.stats()["entities"])
        if n == 0:
            from engine._errors import PatternError

            raise PatternError(f"KG {self.graph.kg!r} is empty: load a KG first")
        p = min(1.0, 1.5 * want / n)
        # a window of eid residues chosen by the seeded generator (Cypher's rand() would ignore --seed)
        mod = 1_000_003
        rows = self.graph.read(cypher("synth_seed_pool"), kg=self.graph.kg, mod=mod, salt=self.rng.randrange(mod),
                               cut=max(1, int(round(p * mod))), limit=want)
        self._pool = [r["eid"] for r in rows]
        self.rng.shuffle(self._pool)

    def _start(self) -> int:
        if not self._pool:
            self._fill_pool(max(self._pool_size, 100))
        return self._pool.pop()

    def _neighbours(self, eid: int, exclude: Sequence[int], out: bool | None = None) -> list[dict[str, Any]]:
        """Up to ``neighbour_cap`` neighbours of ``eid`` not in ``exclude``: through relationships that leave it
        (``out=True``), enter it (``False``) or either (``None``)."""
        if self._relation_names is None:
            self._relation_names = {ri.type: ri.name for ri in self.graph.relation_catalog().values()}
        rows = self.graph.read(cypher("synth_neighbours"), eid=eid, exclude=list(exclude), out=out,
                               types=sorted(self._relation_names), cap=self.settings.neighbour_cap)
        for r in rows:
            r["rel"] = self._relation_names[r["type"]]
        return rows

    def _pick(self, rows: list[dict[str, Any]], k: int = 1) -> list[dict[str, Any]]:
        """``k`` rows with distinct entities, inverse-degree weighted, without replacement."""
        rows = list(rows)
        out: list[dict[str, Any]] = []
        while rows and len(out) < k:
            (row,) = self.rng.choices(rows, weights=inverse_degree_weights([r["degree"] for r in rows]))
            out.append(row)
            rows = [r for r in rows if r["eid"] != row["eid"]]
        return out

    # -- shapes ------------------------------------------------------------------------------------
    def _edge(self, a: int, b: int, row: dict[str, Any]) -> tuple[int, str, str, int]:
        """Edge between node indices a (the expanded node) and b (the neighbour in ``row``), source direction."""
        return (a, row["type"], row["rel"], b) if row["out"] else (b, row["type"], row["rel"], a)

    def _step_rows(self, eids: Sequence[int], came_by: tuple[str, bool] | None) -> list[dict[str, Any]]:
        """The neighbours the walk may take next from ``eids[-1]`` (see :data:`WALKS`); ``came_by``: the type of
        the relationship it arrived by and whether that left the entity before."""
        if self.settings.walk == "random":
            return self._neighbours(eids[-1], eids)
        rows = self._neighbours(eids[-1], eids, out=True)
        if rows:
            return rows
        rows = self._neighbours(eids[-1], eids, out=False)
        if came_by is not None and came_by[1]:  # arrived forward at a dead end: back along the same relation
            same = [r for r in rows if r["type"] == came_by[0]]
            rows = same or rows
        return rows

    def sample_shape(self, shape: str) -> GTSample | None:
        if shape.startswith("path"):
            length = int(shape[4:])
            eids = [self._start()]
            edges: list[tuple[int, str, str, int]] = []
            for step in range(length):
                came_by = (edges[-1][1], edges[-1][0] == step - 1) if edges else None
                rows = self._step_rows(eids, came_by)
                if not rows:
                    return None
                (row,) = self._pick(rows)
                eids.append(row["eid"])
                edges.append(self._edge(step, step + 1, row))
            roles = [SEED] + [INTERMEDIATE] * (length - 1) + [ANSWER]
            return GTSample(shape, eids, roles, edges)
        if shape in ("conj2", "conj3", "star"):
            centre = self._start()
            m = 3 if shape != "conj2" else 2
            rows = self._pick(self._neighbours(centre, [centre]), m)
            if len(rows) < m:
                return None
            eids = [centre] + [r["eid"] for r in rows]
            edges = [self._edge(0, i + 1, r) for i, r in enumerate(rows)]
            if shape == "star":
                roles = [INTERMEDIATE, SEED, SEED, ANSWER]
            else:
                roles = [ANSWER] + [SEED] * m
            return GTSample(shape, eids, roles, edges)
        raise ConfigError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")

    # -- validation and classification --------------------------------------------------------------
    def _answers(self, sample: GTSample, edge_ids: Sequence[int] | None = None,
                 seeds: Sequence[int] | None = None) -> tuple[set[int], set[tuple[int, str, int]]] | None:
        q = answer_query(sample, edge_ids, seeds, self.graph.relation_types())
        rows = self.graph.read(q, limit=self.settings.max_rows + 1, **answer_params(sample, seeds))
        if len(rows) > self.settings.max_rows:
            return None
        answers = {r["answer"] for r in rows}
        triples = {(h, t_, t) for r in rows for h, t_, t in r["triples"]}
        return answers, triples

    def _drop(self, why: str) -> None:
        self.dropped[why] = self.dropped.get(why, 0) + 1

    def build_record(self, sample: GTSample, rid: str) -> dict[str, Any] | None:
        """The record of ``sample`` under id ``rid``, or None when it is dropped (the reason counted in ``dropped``).

        Kept whole: the checks run cheapest first, each dropping the sample under its reason, and the record is
        written from what they computed (``answers``, ``full``, ``name``, the redundancy search's minimal seeds);
        split, each check would have to hand all of it back.
        """
        st = self.settings
        got = self._answers(sample)
        if got is None:
            self._drop("too_many_rows")
            return None
        answers, full = got
        if sample.eids[sample.answer] not in answers:
            self._drop("answer_not_found")
            return None
        if len(answers) > st.max_answers:
            self._drop("too_many_answers")
            return None
        if answers & {sample.eids[s] for s in sample.seeds}:
            self._drop("self_answering")
            return None
        catalog = {ri.type: ri.name for ri in self.graph.relation_catalog().values()}
        ents = self.graph.entities(sorted(set(sample.eids) | answers | {x for h, _, t in full for x in (h, t)}))
        name = {eid: (r.get("name") or r.get("key") or str(eid)) for eid, r in ents.items()}
        sample.names = [name.get(e, str(e)) for e in sample.eids]
        seed_names = [sample.names[s] for s in sample.seeds]
        if len(set(sample.names)) != len(sample.names) or any("UNKNOWN" in x for x in sample.names):
            self._drop("ambiguous_names")
            return None
        n = len(sample.eids)
        # redundancy (SynthKGQA, appendix A.3): a proper subset of the seeds with the same answers
        redundant, minimal_seeds, minimal_iso = False, seed_names, None
        seeds = sample.seeds
        for size in range(1, len(seeds)):
            for sub in combinations(seeds, size):
                eids_sub = subtree_edges(n, sample.edges, sample.answer, sub)
                got_sub = self._answers(sample, eids_sub, sub)
                if got_sub is not None and got_sub[0] == answers:
                    redundant = True
                    minimal_seeds = [sample.names[s] for s in sub]
                    minimal_iso = isomorphism_type(n, [sample.edges[i] for i in eids_sub], sample.answer)
                    break
            if redundant:
                break
        if redundant and st.drop_redundant:
            self._drop("redundant")
            return None
        # gold pattern: seeds known, the answer the highest UNKNOWN number
        others = [i for i in range(n) if sample.roles[i] == INTERMEDIATE]
        label = {s: sample.names[s] for s in seeds}
        for j, i in enumerate(others, start=1):
            label[i] = f"UNKNOWN {j}"
        label[sample.answer] = f"UNKNOWN {len(others) + 1}"
        gt = [[sample.names[h], rel, sample.names[t]] for h, _, rel, t in sample.edges]
        pattern = [[label[h], rel, label[t]] for h, _, rel, t in sample.edges]
        question = question_text(sample)
        claim = claim_text(gt)
        rec: dict[str, Any] = {
            "id": rid,
            "shape": sample.shape,
            "isomorphism": isomorphism_type(n, sample.edges, sample.answer),
            "hops": hops(n, sample.edges, sample.answer, seeds),
            "question": question,
            "claim": claim,
            "label": "SUPPORTED",
            "seeds": seed_names,
            "seed_eids": [sample.eids[s] for s in seeds],
            "answer": sample.names[sample.answer],
            "answers": sorted(name.get(a, str(a)) for a in answers),
            "answer_eids": sorted(answers),
            "unique": len(answers) == 1,
            "triples": gt,
            "full_triples": sorted([name.get(h, str(h)), catalog.get(t_, t_), name.get(t, str(t))]
                                   for h, t_, t in full),
            "pattern": {"triples": pattern},
            "claim_pattern": {"triples": gt},
            "corrupted": self.corrupt(sample, gt),
            "redundant": redundant,
            "minimal_seeds": minimal_seeds,
            "minimal_isomorphism": minimal_iso,
            "cypher": answer_query(sample),
        }
        rec["questions"] = self.wordings(sample, question, rid)
        rec["template_question"] = question
        rec["question"] = rec["questions"][0] if rec["questions"] else question
        if self.llm is not None:
            rec["paraphrased_question"] = next((q for q in rec["questions"] if q != question), None)
            rec["paraphrased_claim"] = self._paraphrase(claim, "statement")
        return rec

    def wordings(self, sample: GTSample, question: str, rid: str) -> list[str]:
        """Wordings of the question (``settings.wordings`` in all; ``question``, the template's, first where
        ``settings.template_question``): the LLM's paraphrases when one
        is configured, else (and to make up the number) worded from the relation names
        (:mod:`engine.evaluation.wording`). Drawn from a generator of their own, seeded by the record: the
        sampling does not change with the number of wordings."""
        from engine.evaluation.wording import wordings

        n = self.settings.wordings
        # the template's wording reads like no question a person asks; kept where it is asked for, or the only one
        first = [question] if self.settings.template_question or sample.shape == "star" else []
        if self.llm is not None and n > 1:
            seeds = [sample.names[s] for s in sample.seeds]
            first += [q for q in self._paraphrases(question, n - 1) if all(x in q for x in seeds)]
        rng = random.Random(f"{self.seed}:{rid}")
        return wordings(first, lambda: self._worded(sample, rng), n)

    def _worded(self, sample: GTSample, rng: random.Random) -> str:
        from engine.evaluation.wording import chain_wording, conjunction_wording, relation_forms

        forms = {rel: relation_forms(rel) for _, _, rel, _ in sample.edges}
        if sample.shape.startswith("path"):
            # edge i joins node i (nearer the seed) and node i + 1; it leaves node i when its head is i
            hops = [(forms[rel], h == i) for i, (h, _, rel, _) in enumerate(sample.edges)]
            return chain_wording(sample.names, hops, rng)
        answer = sample.answer
        if sample.shape in ("conj2", "conj3"):
            parts = [(sample.names[t if h == answer else h], forms[rel], h == answer) for h, _, rel, t in sample.edges]
            return conjunction_wording(parts, rng)
        return question_text(sample)  # star: the template's wording

    def corrupt(self, sample: GTSample, gt: list[list[str]]) -> list[dict[str, Any]]:
        """Claims with one entity of one triple swapped for another entity at the same end of the same relation."""
        out: list[dict[str, Any]] = []
        allowed = self.graph.relation_types()
        order = list(range(len(sample.edges)))
        self.rng.shuffle(order)
        for i in order:
            if len(out) >= self.settings.corruptions:
                break
            h, rtype, rel, t = sample.edges[i]
            end = self.rng.choice(["head", "tail"])
            if rtype not in allowed:
                continue
            slot = {"rel_type": rel_type_slot(rtype, allowed)}
            rows = self.graph.read(render("synth_relation_ends", **slot), kg=self.graph.kg, end=end,
                                   exclude=list(sample.eids), limit=50)
            self.rng.shuffle(rows)
            for row in rows[:5]:
                new_h, new_t = (row["eid"], sample.eids[t]) if end == "head" else (sample.eids[h], row["eid"])
                if self.graph.read(render("synth_edge_exists", **slot), h=new_h, t=new_t)[0]["found"]:
                    continue
                if not row["name"] or row["name"] in sample.names:
                    continue
                triples = [list(x) for x in gt]
                triples[i][0 if end == "head" else 2] = row["name"]
                out.append({"claim": claim_text(triples), "label": "REFUTED", "pattern": {"triples": triples},
                            "swapped": {"triple": i, "end": end, "was": gt[i][0 if end == "head" else 2],
                                        "now": row["name"]}})
                break
        return out

    def _paraphrases(self, question: str, n: int) -> list[str]:
        """``n`` ways a person might ask ``question``, from the LLM (none when it fails)."""
        if self.llm is None:
            return []
        prompt = (f"Write {n} different ways a person might ask this question, as people really ask (which / who / "
                  f"what / name the ..., other words for its relations, passive and active). Keep every entity "
                  f"name exactly as written. One question per line, nothing else.\n\n{question}")
        try:
            text = self.llm.complete(prompt)
        except Exception:  # noqa: BLE001 - paraphrasing is optional; the worded ones stay
            return []
        lines = [re.sub(r"^\s*(?:[-*]|\d+[.)])\s*", "", line).strip() for line in text.splitlines()]
        return [q for q in dict.fromkeys(lines) if q][:n]

    def _paraphrase(self, text: str, kind: str) -> str | None:
        if self.llm is None:
            return None
        prompt = (f"Rewrite this {kind} in natural English. Keep every entity name exactly as written and do not "
                  f"change its meaning. Reply with the rewritten {kind} only.\n\n{text}")
        try:
            return self.llm.complete(prompt).strip() or None
        except Exception:  # noqa: BLE001 - paraphrasing is optional; the template stays
            return None

    # -- driver -------------------------------------------------------------------------------------
    def generate(self, n: int, shapes: Sequence[str] = SHAPES) -> Iterator[dict[str, Any]]:
        """``n`` records, shapes taken in turn; a shape the KG cannot give within the attempts is skipped."""
        for s in shapes:
            if s not in SHAPES:
                raise ConfigError(f"unknown shape {s!r}; known: {', '.join(SHAPES)}")
        self._pool_size = max(100, n * self.settings.pool_factor)
        self._fill_pool(self._pool_size)
        made = {s: 0 for s in shapes}
        failures = {s: 0 for s in shapes}
        per_path: dict[tuple[str, tuple[tuple[str, bool], ...]], int] = {}
        cap = max(1, math.ceil(self.settings.path_share * n / len(shapes))) if shapes else 1
        live = list(shapes)
        count = 0
        while count < n and live:
            shape = min(live, key=lambda s: made[s])
            sample = self.sample_shape(shape)
            path = (shape, tuple((rel, h < t) for h, _, rel, t in sample.edges) if sample is not None else ())
            if sample is None:
                self._drop("no_neighbours")
                rec = None
            elif self.settings.path_share < 1.0 and per_path.get(path, 0) >= cap:
                self._drop("path_share")
                rec = None
            else:
                rec = self.build_record(sample, f"{shape}-{made[shape]}")
            if rec is None:
                failures[shape] += 1
                if failures[shape] > self.settings.attempts * (made[shape] + 1):
                    live.remove(shape)
                continue
            made[shape] += 1
            per_path[path] = per_path.get(path, 0) + 1
            count += 1
            yield rec


def synthesize(graph: GraphReader, n: int = 100, shapes: Sequence[str] = SHAPES, *, seed: int = 0,
               settings: SynthSettings | None = None, llm: LLM | None = None) -> list[dict[str, Any]]:
    return list(Synthesizer(graph, seed=seed, settings=settings, llm=llm).generate(n, shapes))


def write_jsonl(records: Sequence[dict[str, Any]], path: str | Path) -> None:
    with Path(path).open("w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


__all__ = ["SHAPES", "WALKS", "SynthSettings", "GTSample", "Synthesizer", "synthesize", "write_jsonl", "answer_query",
           "isomorphism_type", "hops", "subtree_edges", "inverse_degree_weights", "claim_text", "question_text"]
