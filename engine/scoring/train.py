"""Training the triple scorers from question-answer pairs (SubgraphRAG / QSRAG recipes, DIGEST §1.1, §6.3, §6.4).

Data: MetaQA lines (``question with [topic]<TAB>answer1|answer2``) or JSON Lines
``{"question", "topics": [...], "answers": [...], "triples": [[h, r, t], ...]?}`` (topics and answers are
entity keys or names; ``triples``, when given, are the ground-truth evidence and replace the weak labels).

Steps:

1. **prepare**: resolve topics and answers to entities (one batched query by key, one by name for the rest),
   fetch the neighbourhood of each distinct topic set once (:func:`~engine.scoring.neighbourhood.fetch_neighbourhood`),
   label its triples (shortest paths topic -> answer, :func:`~engine.scoring.labels.shortest_path_labels`, or the
   ground-truth triples), embed the questions, read every entity vector once from Milvus. All of it can be kept
   in a cache file (``torch.save`` of tensors), so epochs and reruns never query Neo4j or Milvus again.
2. **train**: BCE with logits over every candidate triple (the mean per question, averaged over a batch of
   questions), Adam, seeds fixed; after each epoch the dev split's triple recall@K (K = 100) decides early
   stopping (patience), and the best weights are kept. Questions without a labelled triple are skipped, as
   SubgraphRAG does.
3. **save**: :func:`~engine.scoring.checkpoint.save_checkpoint` (model class, hyperparameters, weights, embedding
   model, KG and its relation vocabulary fingerprint).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import random
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from engine._errors import ConfigError, InputError, MalformedInputError
from engine.scoring.neighbourhood import DEFAULT_HOPS, DEFAULT_MAX_EDGES, Neighbourhood, fetch_neighbourhood

__all__ = [
    "QARecord",
    "PreparedSet",
    "TrainSettings",
    "TrainResult",
    "read_qa",
    "resolve_entities",
    "prepare",
    "train_model",
    "evaluate",
    "train_scorer",
]

_TOPIC = re.compile(r"\[([^\[\]]+)\]")
#: model settings train_scorer starts from (``model_config`` overrides them). DDE with s^(0), the topic
#: one-hot itself (the paper's formula; SubgraphRAG's code leaves it out): on a KG whose relations all point
#: one way (MetaQA: film -> person, film -> year) the propagated rounds alone cannot tell the topic film from
#: the other films around it, and the model learns nothing. On such a KG multi-hop questions also walk paths
#: that change direction (topic -> director <- film): the mixed DDE rounds and crossing QR-GAT stacks follow
#: them, and log-scaled DDE shares stay readable three hops out. On a KG that stores inverses (Freebase) they
#: add features the model may ignore. The gated DDE rounds add which relations lead from the topic to an entity;
#: the relation walk (engine.scoring.models.query_walk) where a walk of the question's relations from the topic ends, and
#: which triples it crosses, without DDE's division by degrees (a hub answer, a language or a genre, is
#: marked as clearly as a rare one). benchmarks/scorer.py measures exactly these settings.
#: Widths are chosen for CPU latency (at most 50 ms per question up to 10k triples on 2 cores); QR-GAT's
#: dropout is 0 so that its first layer runs by blocks in training too (half the cost of an epoch).
#: DDE+MLP takes 3 DDE rounds (the paper's default is 2): a 3-hop answer then carries a (gated) share of the
#: topic itself rather than only of its neighbour on the path.
DEFAULT_MODEL_CONFIG: dict[str, dict[str, Any]] = {
    "dde_mlp": {"hidden": 128, "include_initial": True, "dde_mixed": True, "dde_log": True, "dde_gated": True,
                "dde_rounds": 3, "walk": True},
    "qrgat": {"hidden": 64, "heads": 4, "num_layers": 2, "dropout": 0.0, "cross_directions": True,
              "dde_gated": True, "walk": True},
}
CACHE_FORMAT = "isorag-scorer-cache/1"


# ---------------------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------------------


@dataclass
class QARecord:
    """One training question. ``hops`` overrides the neighbourhood depth for it (None: the run's)."""

    question: str
    topics: list[str]
    answers: list[str]
    triples: list[tuple[str, str, str]] | None = None
    hops: int | None = None
    source: str = ""
    #: relation names (or types) from the topic to the answers, when known (MetaQA's question types name it):
    #: the training labels are then the triples on walks that follow it (:func:`relation_path_labels`)
    relation_path: list[str] | None = None


def _text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of a UTF-8 file; a byte that is not UTF-8 is a MalformedInputError at its line."""
    try:
        f = path.open("rb")
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from e
    with f:
        for n, raw in enumerate(f, start=1):
            try:
                yield n, raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                raise MalformedInputError(path, n, f"not valid UTF-8: byte 0x{raw[e.start]:02x} at column "
                                                   f"{e.start + 1}") from None


def read_relation_paths(path: str | Path) -> list[list[str] | None]:
    """One relation path per line (relation names separated by commas or white space; an empty line: none)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no relation-path file at {path}")
    return [re.split(r"[,\s]+", line.strip()) if line.strip() else None for _, line in _text_lines(path)]


def read_qa(path: str | Path, *, fmt: str | None = None, hops: int | None = None,
            limit: int | None = None, relation_paths: str | Path | Sequence[list[str] | None] | None = None,
            ) -> list[QARecord]:
    """Questions from a MetaQA file (``fmt="metaqa"``) or JSON Lines (``"jsonl"``; default: by suffix).

    Relation paths (training labels along them, see :class:`QARecord`): a JSON Lines record's
    ``"relation_path": [r1, r2, ...]``, or ``relation_paths``, a file (:func:`read_relation_paths`) or list
    aligned with the question file's lines (line i of one for line i of the other, blank lines included).
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no question file at {path}")
    paths_from = "the relation paths"
    if relation_paths is not None and not isinstance(relation_paths, (list, tuple)):
        paths_from = f"{relation_paths}"
        relation_paths = read_relation_paths(relation_paths)
    fmt = fmt or ("jsonl" if path.suffix.lower() in (".jsonl", ".json", ".ndjson") else "metaqa")
    out: list[QARecord] = []
    for lineno, line in _text_lines(path):
        if limit is not None and len(out) >= limit:
            break
        if not line.strip():
            continue
        src = f"{path.name}:{lineno}"
        if fmt == "jsonl":
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise MalformedInputError(path, lineno, f"not JSON: {e.msg}") from e
            if not isinstance(obj, dict) or not isinstance(obj.get("question"), str):
                raise MalformedInputError(path, lineno, 'needs a "question" string')
            topics, answers = obj.get("topics"), obj.get("answers")
            if not isinstance(topics, list) or not topics or not all(isinstance(t, str) for t in topics):
                raise MalformedInputError(path, lineno, '"topics" must be a non-empty list of strings')
            if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
                raise MalformedInputError(path, lineno, '"answers" must be a list of strings')
            triples = obj.get("triples")
            if triples is not None:
                if not isinstance(triples, list) or not all(
                        isinstance(t, list) and len(t) == 3 and all(isinstance(x, str) for x in t) for t in triples):
                    raise MalformedInputError(path, lineno, '"triples" must be a list of [head, relation, tail]')
                triples = [tuple(t) for t in triples]
            rp = obj.get("relation_path")
            if rp is not None and (not isinstance(rp, list) or not all(isinstance(x, str) for x in rp)):
                raise MalformedInputError(path, lineno, '"relation_path" must be a list of relation names')
            out.append(QARecord(obj["question"], topics, answers, triples, obj.get("hops", hops), src, rp or None))
        else:
            if "\t" not in line:
                raise MalformedInputError(path, lineno, "expected 'question<TAB>answer1|answer2'")
            q, a = line.split("\t", 1)
            topics = _TOPIC.findall(q)
            if not topics:
                raise MalformedInputError(path, lineno, "no [topic entity] in the question")
            answers = [x for x in a.split("|") if x]
            out.append(QARecord(q, topics, answers, None, hops, src))
        if relation_paths is not None:
            if lineno > len(relation_paths):
                raise InputError(f"{paths_from} has {len(relation_paths)} lines of relation paths, {path} more")
            if relation_paths[lineno - 1]:
                out[-1].relation_path = list(relation_paths[lineno - 1])
    return out


def resolve_entities(graph: Any, texts: Iterable[str]) -> dict[str, list[int]]:
    """Entity ids of each text: by source key (one query), else by display name (one query for the rest)."""
    texts = list(dict.fromkeys(t for t in texts if t))
    out: dict[str, list[int]] = {}
    batch = 20_000
    for i in range(0, len(texts), batch):
        for r in graph.entities_by_key(texts[i:i + batch]):
            out.setdefault(r["key"], []).append(int(r["eid"]))
    rest = [t for t in texts if t not in out]
    for i in range(0, len(rest), batch):
        for r in graph.entities_by_name(rest[i:i + batch]):
            out.setdefault(r["name"], []).append(int(r["eid"]))
    return out


# ---------------------------------------------------------------------------------------------------------
# prepared data (what the cache file holds)
# ---------------------------------------------------------------------------------------------------------


@dataclass
class PreparedSet:
    """Questions ready to train or evaluate on: neighbourhoods, labels, features.

    ``examples[i]``: ``{"q": row of q_emb, "nb": neighbourhood key, "topic": local idx, "answers": local idx of
    the answers in the neighbourhood, "n_answers": answers resolved in the KG, "n_gold": answers given,
    "pos": labelled triple idx, "source": "file:line", "hops": depth}``, and ``"train_pos"`` (relation-path
    labels, :func:`attach_relation_path_labels`) when the question's record has a relation path.
    ``q_walk_emb`` (row ``ex["q"]`` too): the questions with their topic mentions masked, for the relation
    walk's gates (:func:`~engine.scoring.models.query_walk.mask_mentions`, :func:`attach_masked_questions`).
    """

    neighbourhoods: dict[str, Neighbourhood]
    examples: list[dict[str, Any]]
    questions: list[str]
    q_emb: np.ndarray
    node_eids: np.ndarray
    node_vecs: np.ndarray
    node_has_vec: np.ndarray
    relation_types: tuple[str, ...]
    rel_mat: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)
    _rows: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    q_walk_emb: np.ndarray | None = None

    def rows(self, key: str) -> np.ndarray:
        """Rows of ``node_vecs`` for the nodes of neighbourhood ``key``."""
        r = self._rows.get(key)
        if r is None:
            r = np.searchsorted(self.node_eids, self.neighbourhoods[key].nodes)
            self._rows[key] = r
        return r

    def graph(self, ex: dict[str, Any], with_labels: bool = True) -> Any:
        """The :class:`~engine.scoring.question_graph.QuestionGraph` of example ``ex``."""
        import torch

        from engine.scoring.question_graph import QuestionGraph

        nb = self.neighbourhoods[ex["nb"]]
        rows = self.rows(ex["nb"])
        labels = node_labels = None
        if with_labels:
            labels = torch.zeros(nb.num_edges)
            labels[torch.as_tensor(train_pos(ex), dtype=torch.long)] = 1.0
            node_labels = torch.zeros(nb.num_nodes)
            node_labels[torch.as_tensor(ex["answers"], dtype=torch.long)] = 1.0
        return QuestionGraph(
            num_nodes=nb.num_nodes,
            edge_index=torch.from_numpy(np.stack([nb.heads, nb.tails]).reshape(2, -1)),
            edge_rel=torch.from_numpy(nb.rels),
            node_emb=torch.from_numpy(self.node_vecs[rows]),
            has_text=torch.from_numpy(self.node_has_vec[rows] & ~nb.nameless),
            rel_emb=torch.from_numpy(self.rel_mat),
            q_emb=torch.from_numpy(self.q_emb[ex["q"]]),
            topic=torch.as_tensor(ex["topic"], dtype=torch.long),
            labels=labels,
            node_rows=torch.from_numpy(rows),
            node_labels=node_labels,
            q_walk=torch.from_numpy(self.q_walk_emb[ex["q"]]) if self.q_walk_emb is not None else None,
        )

    def subset(self, idx: Sequence[int]) -> PreparedSet:
        return PreparedSet(self.neighbourhoods, [self.examples[i] for i in idx], self.questions, self.q_emb,
                           self.node_eids, self.node_vecs, self.node_has_vec, self.relation_types, self.rel_mat,
                           dict(self.meta), self._rows, self.q_walk_emb)

    # -- cache file ----------------------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        import torch

        def t(a: np.ndarray) -> Any:
            return torch.from_numpy(np.ascontiguousarray(a))

        nbs = {}
        for k, nb in self.neighbourhoods.items():
            arr = nb.to_arrays()
            nbs[k] = {name: (t(v) if isinstance(v, np.ndarray) else v) for name, v in arr.items()}
            nbs[k]["report"] = json.dumps(arr["report"])
        # the relation-path labels are not kept: they are made again from the records on every prepare
        examples = [{**{k: v for k, v in ex.items() if k != "train_pos" and not k.startswith("_")},
                     "topic": t(np.asarray(ex["topic"], np.int64)), "answers": t(np.asarray(ex["answers"], np.int64)),
                     "pos": t(np.asarray(ex["pos"], np.int64))} for ex in self.examples]
        payload = {"format": CACHE_FORMAT, "meta": json.dumps(self.meta), "neighbourhoods": nbs, "examples": examples,
                   "questions": list(self.questions), "q_emb": t(self.q_emb), "node_eids": t(self.node_eids),
                   "node_vecs": t(self.node_vecs), "node_has_vec": t(self.node_has_vec),
                   "relation_types": list(self.relation_types), "rel_mat": t(self.rel_mat)}
        if self.q_walk_emb is not None:
            payload["q_walk_emb"] = t(self.q_walk_emb)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        torch.save(payload, tmp)
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> PreparedSet:
        import torch

        payload = torch.load(Path(path), map_location="cpu", weights_only=True)
        if not isinstance(payload, dict) or payload.get("format") != CACHE_FORMAT:
            raise InputError(f"{path} is not a scorer training cache ({CACHE_FORMAT})")

        def n(x: Any) -> np.ndarray:
            return x.numpy()

        nbs = {}
        for k, d in payload["neighbourhoods"].items():
            d = {name: (n(v) if isinstance(v, torch.Tensor) else v) for name, v in d.items()}
            d["report"] = json.loads(d["report"])
            nbs[k] = Neighbourhood.from_arrays(d)
        examples = [{**ex, "topic": n(ex["topic"]), "answers": n(ex["answers"]), "pos": n(ex["pos"])}
                    for ex in payload["examples"]]
        q_walk = payload.get("q_walk_emb")
        return cls(nbs, examples, list(payload["questions"]), n(payload["q_emb"]), n(payload["node_eids"]),
                   n(payload["node_vecs"]), n(payload["node_has_vec"]), tuple(payload["relation_types"]),
                   n(payload["rel_mat"]), json.loads(payload["meta"]), q_walk_emb=None if q_walk is None else n(q_walk))


def train_pos(ex: dict[str, Any]) -> np.ndarray:
    """The triples an example is trained (and early-stopped) on: its relation-path labels when it has them,
    else its shortest-path (or ground-truth) labels ``ex["pos"]``."""
    got = ex.get("train_pos")
    return ex["pos"] if got is None else got


def attach_masked_questions(data: PreparedSet, records: Sequence[QARecord], embedder: Any) -> int:
    """Set ``data.q_walk_emb``: each question embedded with its topic mentions masked (its record's
    ``topics`` and bracketed spans, :func:`~engine.scoring.models.query_walk.mask_mentions`), one embedding call. Examples
    are matched to records by ``source`` and question; a question without a record keeps its text. Returns how many
    questions changed."""
    from engine.scoring.models.query_walk import mask_mentions

    by_key = {(r.source, r.question): r for r in records}  # sources alone repeat across files of one name
    texts = list(data.questions)
    changed = 0
    for ex in data.examples:
        r = by_key.get((ex["source"], data.questions[ex["q"]]))
        if r is not None:
            masked = mask_mentions(r.question, r.topics)
            changed += masked != texts[ex["q"]]
            texts[ex["q"]] = masked
    data.q_walk_emb = (np.asarray(embedder.encode(texts), dtype=np.float32) if texts
                       else np.zeros((0, data.q_emb.shape[1]), np.float32))
    return changed


def attach_relation_path_labels(data: PreparedSet, records: Sequence[QARecord], graph: Any = None,
                                fallback: bool = True) -> dict[str, int]:
    """Set ``ex["train_pos"]`` of every example whose record has a relation path: the triples on walks that
    follow it (:func:`~engine.scoring.labels.path_labels_with_fallback`; ``fallback=False``: the walks alone).
    Examples are matched to records by ``source``. Relation names are mapped to the KG's types with ``graph``'s
    relation catalog when given. Returns counts (labelled, unknown relation, no triple on the path)."""
    import torch

    from engine.scoring.labels import path_labels_with_fallback, relation_path_labels

    names_to_type = {ri.name: ri.type for ri in graph.relation_catalog().values()} if graph is not None else {}
    by_source = {r.source: r for r in records if r.relation_path}
    counts = {"path_labelled": 0, "path_unknown_relation": 0, "path_empty": 0}
    for ex in data.examples:
        ex.pop("train_pos", None)
        r = by_source.get(ex["source"])
        if r is None:
            continue
        nb = data.neighbourhoods[ex["nb"]]
        want = [names_to_type.get(x, x) for x in r.relation_path]
        if not all(w in nb.relation_types for w in want):
            counts["path_unknown_relation"] += 1
            continue
        ids = [list(nb.relation_types).index(w) for w in want]
        fn = path_labels_with_fallback if fallback else relation_path_labels
        lab = fn(nb.num_nodes, torch.from_numpy(np.stack([nb.heads, nb.tails]).reshape(2, -1)),
                 torch.from_numpy(nb.rels), torch.from_numpy(np.asarray(ex["topic"])),
                 torch.from_numpy(np.asarray(ex["answers"])), ids)
        ex["train_pos"] = torch.nonzero(lab).flatten().numpy()
        counts["path_labelled"] += 1
        counts["path_empty"] += int(len(ex["train_pos"]) == 0)
    data.meta["path_labels"] = counts
    return counts


def _nb_key(topics: Sequence[int], hops: int) -> str:
    return f"{hops}:" + ",".join(str(t) for t in sorted(set(topics)))


def _records_digest(records: Sequence[QARecord]) -> str:
    h = hashlib.sha256()
    for r in records:
        h.update(json.dumps([r.question, r.topics, r.answers, r.triples, r.hops]).encode("utf-8"))
    return h.hexdigest()[:16]


def prepare(
    engine: Any,
    records: Sequence[QARecord],
    *,
    hops: int = DEFAULT_HOPS,
    max_edges: int = DEFAULT_MAX_EDGES,
    cache: str | Path | None = None,
    progress: bool = True,
    label_mode: str = "pair",
    echo: Callable[[str], None] | None = None,
) -> PreparedSet:
    """Neighbourhoods, labels and features of ``records`` on ``engine``'s KG (see the module docstring).

    With ``cache``: a cache file made for the same KG, relation vocabulary, embedding model, depth, cap and
    questions is read instead; otherwise the set is built and written there.
    """
    import torch
    from tqdm import tqdm

    from engine.scoring.checkpoint import relation_fingerprint
    from engine.scoring.labels import shortest_path_labels

    say = echo or (lambda m: print(m, file=sys.stderr))
    graph = engine.stores.graph
    types = tuple(sorted({ri.type for ri in graph.relation_catalog().values()}))
    meta = {"kg": engine.kg, "relations": relation_fingerprint(types), "embedding": engine.embedder.slug,
            "hops": hops, "max_edges": max_edges, "records": _records_digest(records), "label_mode": label_mode}
    if cache is not None and Path(cache).is_file():
        try:
            got = PreparedSet.load(cache)
        except Exception as e:  # noqa: BLE001 - an unreadable cache is rebuilt
            say(f"scorer cache {cache} unreadable ({type(e).__name__}: {e}); rebuilding it")
        else:
            if got.meta.get("build") == meta:
                say(f"scorer training data from cache {cache} ({len(got.examples):,} questions)")
                if got.q_walk_emb is None:  # a cache from before the masked questions: made now, kept
                    attach_masked_questions(got, records, engine.embedder)
                    got.save(cache)
                if any(r.relation_path for r in records):
                    attach_relation_path_labels(got, records, graph)
                return got
            say(f"scorer cache {cache} was made for other data or settings; rebuilding it")

    t0 = time.perf_counter()
    # 1. entities of topics, answers and ground-truth triples
    texts = {t for r in records for t in r.topics} | {a for r in records for a in r.answers}
    texts |= {x for r in records if r.triples for (h, _, t) in r.triples for x in (h, t)}
    resolved = resolve_entities(graph, texts)
    names_to_type = {ri.name: ri.type for ri in graph.relation_catalog().values()}

    # 2. one neighbourhood per distinct (topic set, depth)
    keyed: list[tuple[QARecord, list[int], int, str]] = []
    for r in records:
        topics = [e for t in r.topics for e in resolved.get(t, [])]
        depth = r.hops if r.hops is not None else hops
        keyed.append((r, topics, depth, _nb_key(topics, depth)))
    wanted = {k: (topics, depth) for _, topics, depth, k in keyed if topics}
    nbs: dict[str, Neighbourhood] = {}
    for k, (topics, depth) in tqdm(wanted.items(), desc="neighbourhoods", unit="nb", disable=not progress,
                                   file=sys.stderr, dynamic_ncols=True):
        nbs[k] = fetch_neighbourhood(graph, topics, depth, max_edges)
    t_fetch = time.perf_counter() - t0

    # 3. labels
    examples: list[dict[str, Any]] = []
    questions: list[str] = []
    skipped = {"no_topic": 0, "empty": 0}
    for r, topics, depth, k in keyed:
        nb = nbs.get(k)
        if nb is None:
            skipped["no_topic"] += 1
            continue
        if nb.num_edges == 0:
            skipped["empty"] += 1
            continue
        gold = [e for a in r.answers for e in resolved.get(a, [])[:1]]
        answers = nb.local(gold)
        topic = nb.anchors
        if r.triples:
            index = {int(e): i for i, e in enumerate(nb.nodes.tolist())}
            want = set()
            for h, rel, t in r.triples:
                rtype = names_to_type.get(rel, rel)
                for he in resolved.get(h, []):
                    for te in resolved.get(t, []):
                        if he in index and te in index and rtype in nb.relation_types:
                            want.add((index[he], nb.relation_types.index(rtype), index[te]))
            pos = np.asarray([i for i in range(nb.num_edges)
                              if (int(nb.heads[i]), int(nb.rels[i]), int(nb.tails[i])) in want], dtype=np.int64)
        else:
            lab = shortest_path_labels(nb.num_nodes, torch.from_numpy(np.stack([nb.heads, nb.tails])),
                                       torch.from_numpy(topic), torch.from_numpy(answers), mode=label_mode)
            pos = torch.nonzero(lab).flatten().numpy()
        examples.append({"q": len(questions), "nb": k, "topic": topic, "answers": answers,
                         "n_answers": len(gold), "n_gold": len(r.answers), "pos": pos, "source": r.source,
                         "hops": depth})
        questions.append(r.question)

    # 4. features: question embeddings, every entity vector once, the relation table
    t1 = time.perf_counter()
    q_emb = np.asarray(engine.embedder.encode(questions), dtype=np.float32) if questions else \
        np.zeros((0, engine.embedder.dim), np.float32)
    used = {k for k in (ex["nb"] for ex in examples)}
    nbs = {k: v for k, v in nbs.items() if k in used}
    node_eids = np.unique(np.concatenate([nb.nodes for nb in nbs.values()])) if nbs else np.zeros(0, np.int64)
    store = engine.scorer_features
    node_vecs = np.zeros((node_eids.shape[0], engine.embedder.dim), np.float32)
    node_has = np.zeros(node_eids.shape[0], bool)
    step = 50_000
    for i in tqdm(range(0, node_eids.shape[0], step), desc="entity vectors", unit="batch", disable=not progress,
                  file=sys.stderr, dynamic_ncols=True):
        got = store.vectors.get_vectors("entities", node_eids[i:i + step].tolist())
        for j, e in enumerate(node_eids[i:i + step].tolist()):
            v = got.get(e)
            if v is not None:
                node_vecs[i + j] = v
                node_has[i + j] = True
    rtypes, rel_mat, _ = store.relation_table()
    for nb in nbs.values():
        if tuple(nb.relation_types) != tuple(rtypes):
            raise InputError("the KG's relation catalog changed while preparing: run again")
    out = PreparedSet(nbs, examples, questions, q_emb, node_eids, node_vecs, node_has, tuple(rtypes),
                      np.asarray(rel_mat, np.float32))
    attach_masked_questions(out, records, engine.embedder)
    out.meta = {"build": meta, "fetch_s": round(t_fetch, 2), "features_s": round(time.perf_counter() - t1, 2),
                "skipped": skipped, "neighbourhoods": len(nbs)}
    if cache is not None:
        out.save(cache)
    if any(r.relation_path for r in records):
        attach_relation_path_labels(out, records, graph)
    return out


# ---------------------------------------------------------------------------------------------------------
# training and evaluation
# ---------------------------------------------------------------------------------------------------------


@dataclass
class TrainSettings:
    """How a scorer is trained. Adam at 1e-3 and early stopping on dev recall@100 as in SubgraphRAG's code, which
    waits 10 epochs without a gain; isorag waits ``patience`` = 5. Batches of questions for CPU throughput and a
    wall-clock budget."""

    epochs: int = 30
    patience: int = 5
    lr: float = 1e-3
    weight_decay: float = 0.0
    batch_questions: int = 8
    recall_k: int = 100
    seed: int = 42
    max_minutes: float | None = None
    dev_fraction: float = 0.1
    dev_max: int = 1000
    threads: int | None = None
    device: str = "auto"
    #: weight of a positive triple's BCE term (1: plain BCE). A 3-hop question has ~20 positives among
    #: thousands of candidates, so the unweighted loss is dominated by pushing negatives down.
    pos_weight: float = 1.0
    #: negatives per question and epoch (0: every triple of the neighbourhood is a candidate every epoch).
    #: With N > 0 an epoch scores the positives and N sampled negatives per question, stratified: up to
    #: ``near_share * N`` from the negatives that touch an entity of a positive triple (the other relations
    #: around the evidence, where the hubs are), the rest uniformly from the others; each stratum's terms
    #: are weighted by (its size / drawn), so the loss is an unbiased estimate of the full one.
    neg_samples: int = 0
    near_share: float = 0.5
    #: weight of the relation walk's auxiliary loss (:func:`~engine.scoring.models.query_walk.walk_answer_loss`: where the
    #: question's walk ends against the answers), for models built with ``walk=True``; 0 turns it off
    walk_aux: float = 1.0
    #: BCE target of a labelled triple that touches no answer (a bridge on the way: topic -> director, the
    #: director's films); 1 gives the plain labels. Below 1 the model ranks the triples that reach an answer
    #: first, bridges next, the rest last: answer recall@K then holds where a question has more labelled
    #: triples than K (a 3-hop question with 45 answers and 194 path triples, half of them bridges). MetaQA
    #: 3-hop answer recall@100, DDE+MLP: 0.943 with 1, 0.967 with 0.5 (relation-path triple recall@100 the same)
    bridge_target: float = 0.5

    def __post_init__(self) -> None:
        import math

        def number(name: str, lo: float, hi: float = math.inf, *, integer: bool = False, lo_open: bool = False,
                   optional: bool = False) -> None:
            v = getattr(self, name)
            if v is None and optional:
                return
            kind_ok = isinstance(v, int) if integer else isinstance(v, (int, float))
            if isinstance(v, bool) or not kind_ok or not math.isfinite(v) or v < lo or lo_open and v == lo or v > hi:
                raise ConfigError(f"training setting {name} must be {'an integer' if integer else 'a finite number'} "
                                  f"in {'(' if lo_open else '['}{lo:g}, {hi:g}], got {v!r}")

        for name in ("epochs", "patience", "batch_questions", "recall_k", "dev_max"):
            number(name, 1, integer=True)
        number("neg_samples", 0, integer=True)
        number("threads", 1, integer=True, optional=True)
        number("seed", 0, 2 ** 32 - 1, integer=True)
        number("lr", 0, lo_open=True)
        number("weight_decay", 0)
        number("max_minutes", 0, lo_open=True, optional=True)
        number("dev_fraction", 0, 1)
        number("pos_weight", 0, lo_open=True)
        number("near_share", 0, 1)
        number("walk_aux", 0)
        number("bridge_target", 0, 1)


@dataclass
class TrainResult:
    model: Any
    checkpoint: str | None
    history: list[dict[str, Any]]
    best_epoch: int
    best_dev_recall: float
    train_s: float
    prepare_s: float
    questions: int
    dev_questions: int
    skipped: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint, "history": self.history, "best_epoch": self.best_epoch,
                "best_dev_recall": self.best_dev_recall, "train_s": round(self.train_s, 2),
                "prepare_s": round(self.prepare_s, 2), "questions": self.questions,
                "dev_questions": self.dev_questions, "skipped": self.skipped,
                "model_class": type(self.model).__name__, "config": self.model.config}


def seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _loss(model: Any, batch: Any, pos_weight: float = 1.0, sample: tuple[Any, Any] | None = None,
          walk_aux: float = 0.0, bridge_target: float = 1.0) -> Any:
    """BCE with logits, the mean per question, then over the batch. ``sample``: ``(edges, weights)``, the
    triples scored this step and the weight of each one's term (sampled negatives, :func:`sample_edges`);
    the per-question mean still divides by the question's full triple count. ``walk_aux``: weight of the
    relation walk's answer loss, added when the model has a walk and the batch its answers. ``bridge_target``:
    the target of a labelled triple touching no answer (:attr:`TrainSettings.bridge_target`; needs the
    batch's answers, ``node_labels``)."""
    import torch
    import torch.nn.functional as F

    if sample is None:
        logits = model(batch)
        labels, which = batch.labels, batch.triple_batch
        weight = None
        if pos_weight != 1.0:
            weight = torch.where(labels > 0, torch.as_tensor(pos_weight, dtype=logits.dtype, device=logits.device),
                                 torch.ones((), dtype=logits.dtype, device=logits.device))
    else:
        edges, w = sample
        logits = model(batch, edges=edges)
        labels, which = batch.labels.index_select(0, edges), batch.triple_batch.index_select(0, edges)
        weight = torch.where(labels > 0, torch.as_tensor(pos_weight, dtype=logits.dtype, device=logits.device),
                             w.to(logits.dtype))
    if bridge_target != 1.0 and batch.node_labels is not None:
        head, tail = batch.edge_index[0], batch.edge_index[1]
        if sample is not None:
            head, tail = head.index_select(0, sample[0]), tail.index_select(0, sample[0])
        touches = (batch.node_labels.index_select(0, head) > 0) | (batch.node_labels.index_select(0, tail) > 0)
        labels = torch.where((labels > 0) & ~touches, torch.as_tensor(bridge_target, dtype=labels.dtype,
                                                                       device=labels.device), labels)
    per = F.binary_cross_entropy_with_logits(logits, labels, weight=weight, reduction="none")
    # mean per question, then over the batch: a large neighbourhood does not outweigh a small one
    sums = torch.zeros(batch.num_graphs, device=per.device).index_add_(0, which, per)
    counts = torch.diff(batch.edge_ptr).clamp(min=1).to(per.dtype)
    loss = (sums / counts).mean()
    end = getattr(model, "walk_end", None)
    if walk_aux > 0 and end is not None and batch.node_labels is not None:
        from engine.scoring.models.query_walk import walk_answer_loss

        loss = loss + walk_aux * walk_answer_loss(end, batch)
    return loss


def near_negatives(data: PreparedSet, ex: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(positives, near negatives, other negatives)`` of an example (triple indices): near negatives touch
    an entity of a positive triple. Cached in the example (``_strata``)."""
    got = ex.get("_strata")
    if got is not None and got[0] is train_pos(ex):
        return got[1]
    nb = data.neighbourhoods[ex["nb"]]
    pos = np.asarray(train_pos(ex), dtype=np.int64)
    is_pos = np.zeros(nb.num_edges, bool)
    is_pos[pos] = True
    pos_nodes = np.unique(np.concatenate([nb.heads[pos], nb.tails[pos]])) if len(pos) else np.zeros(0, np.int64)
    near = (np.isin(nb.heads, pos_nodes) | np.isin(nb.tails, pos_nodes)) & ~is_pos
    strata = (np.flatnonzero(is_pos), np.flatnonzero(near), np.flatnonzero(~near & ~is_pos))
    ex["_strata"] = (train_pos(ex), strata)
    return strata


def sample_edges(data: PreparedSet, examples: Sequence[dict[str, Any]], n_neg: int, near_share: float,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Triples to score for a batch of ``examples`` (in batch order, indices into the batched triples) and
    the weight of each: positives (weight 1 here; the loss applies ``pos_weight``) and ``n_neg`` negatives
    per question drawn by stratum (see :attr:`TrainSettings.neg_samples`), weighted by stratum size / drawn."""
    edges, weights = [], []
    off = 0
    for ex in examples:
        pos, near, rest = near_negatives(data, ex)
        want_near = min(len(near), int(round(near_share * n_neg)))
        want_rest = min(len(rest), n_neg - want_near)
        want_near = min(len(near), n_neg - want_rest)  # what the other stratum cannot use
        parts = [pos]
        wparts = [np.ones(len(pos), np.float32)]
        for stratum, k in ((near, want_near), (rest, want_rest)):
            if k <= 0:
                continue
            pick = stratum if k >= len(stratum) else rng.choice(stratum, size=k, replace=False)
            parts.append(pick)
            wparts.append(np.full(len(pick), len(stratum) / len(pick), np.float32))
        edges.append(np.concatenate(parts) + off)
        weights.append(np.concatenate(wparts))
        off += data.neighbourhoods[ex["nb"]].num_edges
    return np.concatenate(edges), np.concatenate(weights)


def score_examples(model: Any, data: PreparedSet, examples: Sequence[dict[str, Any]] | None = None,
                   device: Any = "cpu", select: bool = False, walk_ends: list[Any] | None = None,
                   ) -> list[tuple[np.ndarray, float, float]]:
    """``[(logits [E], wall ms, cpu ms)]`` per example, one question per forward pass (as at query time), in
    eval mode. The time covers the scoring step given the fetched neighbourhood and cached features: building
    the graph's tensors, the forward pass, the sigmoid and (``select=True``) the adaptive top-p selection.
    The entity text terms come from the model's entity table over ``data.node_vecs`` (projected once here,
    before the clock starts, as a feature cache is filled once per process). ``walk_ends``: a list that gets
    each example's relation-walk end ``[N]`` (None for a model without a walk)."""
    import torch

    from engine.scoring.select import adaptive_top_p

    model.eval()
    if hasattr(model, "attach_entity_table"):
        model.attach_entity_table(torch.from_numpy(data.node_vecs))
    out = []
    with torch.inference_mode():
        for ex in (data.examples if examples is None else examples):
            t0, c0 = time.perf_counter(), time.process_time()
            g = data.graph(ex, with_labels=False).to(device)
            logits = model(g)
            if select:
                torch.sigmoid(logits)
                adaptive_top_p(logits)
            if logits.is_cuda:
                torch.cuda.synchronize()
            ms = (time.perf_counter() - t0) * 1000.0
            cpu = (time.process_time() - c0) * 1000.0
            out.append((logits.float().cpu().numpy(), ms, cpu))
            if walk_ends is not None:
                end = getattr(model, "walk_end", None)
                walk_ends.append(None if end is None else end.float().cpu().numpy())
    return out


def dev_recall(model: Any, data: PreparedSet, k: int, device: Any = "cpu") -> float:
    from engine.scoring.metrics import triple_recall_at_k

    import torch

    vals = []
    for ex, (logits, _, _) in zip(data.examples, score_examples(model, data, device=device)):
        pos = train_pos(ex)
        if len(pos):
            labels = torch.zeros(logits.shape[0])
            labels[torch.as_tensor(pos, dtype=torch.long)] = 1.0
            vals.append(triple_recall_at_k(torch.from_numpy(logits), labels, k))
    return float(np.mean(vals)) if vals else math.nan


def train_model(
    model: Any,
    train: PreparedSet,
    dev: PreparedSet | None,
    settings: TrainSettings | None = None,
    *,
    progress: bool = True,
    echo: Callable[[str], None] | None = None,
) -> tuple[Any, list[dict[str, Any]], int, float]:
    """Train ``model`` in place on ``train``; early stopping on ``dev``'s triple recall@K. Returns
    ``(model with the best weights, history, best epoch, best dev recall)``."""
    import torch
    from tqdm import tqdm

    from engine.scoring.device import resolve_device
    from engine.scoring.question_graph import batch_graphs

    s = settings or TrainSettings()
    say = echo or (lambda m: print(m, file=sys.stderr))
    if s.threads:
        torch.set_num_threads(s.threads)
    seed_everything(s.seed)
    device = resolve_device(s.device)
    model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=s.lr, weight_decay=s.weight_decay)
    usable = [i for i, ex in enumerate(train.examples) if len(train_pos(ex))]
    if not usable:
        raise InputError("no training question has a labelled triple (no path topic -> answer in its neighbourhood)")
    order_rng = random.Random(s.seed)
    sample_rng = np.random.default_rng(s.seed)
    history: list[dict[str, Any]] = []
    best_state, best_recall, best_epoch, bad = None, -1.0, 0, 0
    deadline = time.monotonic() + s.max_minutes * 60.0 if s.max_minutes else None
    t_start = time.perf_counter()
    for epoch in range(1, s.epochs + 1):
        model.train()
        order = usable[:]
        order_rng.shuffle(order)
        losses = []
        bar = tqdm(range(0, len(order), s.batch_questions), desc=f"epoch {epoch}", unit="batch",
                   disable=not progress, file=sys.stderr, dynamic_ncols=True, leave=False)
        out_of_time = False
        for b0 in bar:
            exs = [train.examples[i] for i in order[b0:b0 + s.batch_questions]]
            batch = batch_graphs([train.graph(ex) for ex in exs], device=device)
            sample = None
            if s.neg_samples > 0:
                e, w = sample_edges(train, exs, s.neg_samples, s.near_share, sample_rng)
                sample = (torch.from_numpy(e).to(device), torch.from_numpy(w).to(device))
            loss = _loss(model, batch, s.pos_weight, sample, s.walk_aux, s.bridge_target)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
            if len(losses) % 20 == 0:
                bar.set_postfix(loss=f"{np.mean(losses[-20:]):.4f}")
            if deadline is not None and time.monotonic() > deadline:
                out_of_time = True
                break
        bar.close()
        recall = dev_recall(model, dev, s.recall_k, device) if dev is not None and dev.examples else math.nan
        entry = {"epoch": epoch, "loss": float(np.mean(losses)) if losses else math.nan,
                 f"dev_triple_recall@{s.recall_k}": recall, "elapsed_s": round(time.perf_counter() - t_start, 1)}
        history.append(entry)
        say(f"epoch {epoch}: loss {entry['loss']:.4f}  dev triple recall@{s.recall_k} {recall:.4f}"
            f"  ({entry['elapsed_s']:.0f} s)")
        score = recall if not math.isnan(recall) else -entry["loss"]
        if score > best_recall:
            best_state, best_recall, best_epoch, bad = copy.deepcopy(model.state_dict()), score, epoch, 0
        else:
            bad += 1
            if bad >= s.patience:
                say(f"early stop: no better dev recall for {s.patience} epochs (best {best_recall:.4f} at epoch "
                    f"{best_epoch})")
                break
        if out_of_time:
            say(f"stopped: the {s.max_minutes:g}-minute budget is spent")
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    return model, history, best_epoch, best_recall


def split_dev(n: int, fraction: float, max_dev: int, seed: int) -> tuple[list[int], list[int]]:
    """Deterministic train/dev split of ``n`` examples."""
    idx = list(range(n))
    random.Random(seed).shuffle(idx)
    k = min(max_dev, int(round(n * fraction))) if n > 1 else 0
    return sorted(idx[k:]), sorted(idx[:k])


def train_scorer(
    engine: Any,
    qa: str | Path | Sequence[str | Path] | Sequence[QARecord],
    *,
    model: str = "dde_mlp",
    out: str | Path | None = None,
    dev: str | Path | Sequence[str | Path] | None = None,
    hops: int = DEFAULT_HOPS,
    max_edges: int = DEFAULT_MAX_EDGES,
    cache: str | Path | None = None,
    settings: TrainSettings | None = None,
    model_config: dict[str, Any] | None = None,
    limit: int | None = None,
    progress: bool = True,
    echo: Callable[[str], None] | None = None,
) -> TrainResult:
    """Train a triple scorer for ``engine``'s KG from question files (or records) and save it to ``out``.

    ``dev``: separate dev questions; by default ``settings.dev_fraction`` of ``qa`` (at most ``dev_max``) is
    held out. ``cache``: the prepared data's cache file (dev data goes to ``<cache>.dev``).
    """
    from engine.scoring.checkpoint import make_model, save_checkpoint

    s = settings or TrainSettings()
    say = echo or (lambda m: print(m, file=sys.stderr))
    records = _as_records(qa, limit)
    t0 = time.perf_counter()
    data = prepare(engine, records, hops=hops, max_edges=max_edges, cache=cache, progress=progress, echo=echo)
    if dev is not None:
        dev_cache = None if cache is None else Path(str(cache) + ".dev")
        dev_data = prepare(engine, _as_records(dev, None), hops=hops, max_edges=max_edges, cache=dev_cache,
                           progress=progress, echo=echo)
        train_data = data
    else:
        tr, dv = split_dev(len(data.examples), s.dev_fraction, s.dev_max, s.seed)
        train_data, dev_data = data.subset(tr), data.subset(dv)
    prepare_s = time.perf_counter() - t0
    say(f"training {model} on {len(train_data.examples):,} questions ({sum(1 for e in train_data.examples if len(e['pos'])):,}"
        f" with a labelled triple), dev {len(dev_data.examples):,}; data ready in {prepare_s:.1f} s")
    seed_everything(s.seed)
    net = make_model(model, engine.embedder.dim,
                     **{**DEFAULT_MODEL_CONFIG.get(model.lower(), {}), **(model_config or {})})
    t1 = time.perf_counter()
    net, history, best_epoch, best = train_model(net, train_data, dev_data, s, progress=progress, echo=echo)
    train_s = time.perf_counter() - t1
    path = None
    if out is not None:
        path = str(save_checkpoint(
            out, net.cpu(), kg=engine.kg, embedding_model=engine.config.embedding_model,
            embedding_slug=engine.embedder.slug, relation_types=data.relation_types, hops=hops, max_edges=max_edges,
            info={"questions": len(train_data.examples), "dev_questions": len(dev_data.examples),
                  "best_epoch": best_epoch, f"dev_triple_recall@{s.recall_k}": best, "train_s": round(train_s, 1),
                  "seed": s.seed, "lr": s.lr, "batch_questions": s.batch_questions}))
        say(f"checkpoint written to {path}")
    return TrainResult(net, path, history, best_epoch, best, train_s, prepare_s, len(train_data.examples),
                       len(dev_data.examples), dict(data.meta.get("skipped", {})))


def _as_records(qa: Any, limit: int | None) -> list[QARecord]:
    if isinstance(qa, (str, Path)):
        return read_qa(qa, limit=limit)
    items = list(qa)
    if items and all(isinstance(x, QARecord) for x in items):
        return items[:limit] if limit else items
    out: list[QARecord] = []
    for p in items:
        out.extend(read_qa(p, limit=limit))
    return out


# ---------------------------------------------------------------------------------------------------------
# evaluation (the benchmark and the CLI report)
# ---------------------------------------------------------------------------------------------------------


def evaluate(model: Any, data: PreparedSet, ks: Sequence[int] = (50, 100, 200), device: Any = "cpu",
             group: Callable[[dict[str, Any]], Any] | None = None) -> dict[str, Any]:
    """Triple recall@K against ``ex["pos"]`` (the shortest-path or ground-truth labels, questions with labels),
    ``path_triple_recall@K`` against the relation-path labels (questions that have them), answer recall@K (over *all* given answers: an answer missing
    from the KG or the neighbourhood counts as missed), Hits@1 of the extracted answer and the forward
    latency per question; per ``group(example)`` (e.g. the hop count) and overall."""
    import torch

    from engine.scoring.extract import answer_candidates
    from engine.scoring.metrics import answer_ceiling_at_k
    from engine.scoring.select import top_k as top_k_idx

    rows: dict[Any, dict[str, list[float]]] = {}
    ends: list[Any] = []
    scored = score_examples(model, data, device=device, select=True, walk_ends=ends)
    for ex, (logits, ms, cpu), end in zip(data.examples, scored, ends):
        nb = data.neighbourhoods[ex["nb"]]
        keys = ["all"] + ([group(ex)] if group is not None else [])
        conf = 1.0 / (1.0 + np.exp(-logits))
        order = top_k_idx(torch.from_numpy(logits), max(ks)).numpy()
        vals: dict[str, float] = {"ms": ms, "cpu_ms": cpu, "edges": float(nb.num_edges)}
        answers = set(int(a) for a in ex["answers"].tolist())
        n_gold = max(ex["n_gold"], 1)
        pos = set(int(p) for p in ex["pos"].tolist())
        path_pos = set(int(p) for p in ex["train_pos"].tolist()) if ex.get("train_pos") is not None else set()
        for k in ks:
            top = order[:k]
            covered = set(nb.heads[top].tolist()) | set(nb.tails[top].tolist())
            vals[f"answer_recall@{k}"] = len(answers & covered) / n_gold
            if pos:
                vals[f"triple_recall@{k}"] = len(pos & set(top.tolist())) / len(pos)
            if path_pos:
                vals[f"path_triple_recall@{k}"] = len(path_pos & set(top.tolist())) / len(path_pos)
        vals["answer_ceiling"] = len(answers) / n_gold
        for k in ks:
            # the best any ranking of the fetched triples can do at K (a triple covers at most two answers)
            vals[f"answer_ceiling@{k}"] = answer_ceiling_at_k(nb.heads, nb.tails, answers, k) / n_gold
        # the answer is extracted from the k_max (200) best triples, as the engine's scorer does
        ext = order[:200] if max(ks) >= 200 else top_k_idx(torch.from_numpy(logits), 200).numpy()
        cands = answer_candidates(nb.heads, nb.tails, conf, ext, nb.anchors, prior=end)
        vals["hits1"] = 1.0 if cands and cands[0][0] in answers else 0.0
        for key in keys:
            bucket = rows.setdefault(key, {})
            for name, v in vals.items():
                bucket.setdefault(name, []).append(v)
    out: dict[str, Any] = {}
    for key, bucket in rows.items():
        out[str(key)] = {name: float(np.mean(v)) for name, v in bucket.items()
                         if name not in ("ms", "cpu_ms", "edges")}
        ms, cpu = bucket["ms"], bucket["cpu_ms"]
        out[str(key)]["questions"] = len(ms)
        out[str(key)]["score_p50_ms"] = float(np.percentile(ms, 50))
        out[str(key)]["score_p95_ms"] = float(np.percentile(ms, 95))
        out[str(key)]["score_cpu_p50_ms"] = float(np.percentile(cpu, 50))
        out[str(key)]["score_cpu_p95_ms"] = float(np.percentile(cpu, 95))
        big = [m for m, e in zip(ms, bucket["edges"]) if e >= 5000]
        out[str(key)]["score_p95_ms_5k_10k_edges"] = float(np.percentile(big, 95)) if big else None
        out[str(key)]["edges_max"] = int(max(bucket["edges"]))
        out[str(key)]["edges_mean"] = float(np.mean(bucket["edges"]))
    return out
