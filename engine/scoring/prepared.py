"""Prepared training data for the triple scorers, and its cache file.

:func:`prepare` resolves the questions' topics and answers to entities (:func:`~engine.scoring.qa.resolve_entities`),
fetches the neighbourhood of each distinct topic set once
(:func:`~engine.scoring.neighbourhood.fetch_neighbourhood`), labels its triples (shortest paths topic -> answer,
:func:`~engine.scoring.labels.shortest_path_labels`, or the ground-truth triples), embeds the questions and reads
every entity vector once from Milvus: a :class:`PreparedSet`. It can be kept in a cache file (``torch.save`` of
plain data: dicts, lists, strings and tensors, no class, loaded back with ``weights_only=True``), so epochs and
reruns never query Neo4j or Milvus again.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Protocol, Sequence

import numpy as np

from engine._errors import InputError
from engine.scoring.neighbourhood import DEFAULT_HOPS, DEFAULT_MAX_EDGES, Neighbourhood, fetch_neighbourhood
from engine.scoring.qa import QARecord, resolve_entities

if TYPE_CHECKING:  # pragma: no cover
    from engine._config import EngineConfig
    from engine._protocols import GraphReader, TextEmbedder
    from engine.scoring.features import FeatureStore

__all__ = ["CACHE_FORMAT", "PreparedSet", "ScorerKG", "prepare", "train_pos", "attach_masked_questions",
           "attach_relation_path_labels"]

CACHE_FORMAT = "isorag-scorer-cache/1"


class ScorerKG(Protocol):
    """What preparing and training a scorer read of an :class:`~engine.Engine` (a higher layer: not imported)."""

    @property
    def kg(self) -> str: ...

    @property
    def config(self) -> EngineConfig: ...

    @property
    def graph(self) -> GraphReader: ...

    @property
    def embedder(self) -> TextEmbedder: ...

    @property
    def scorer_features(self) -> FeatureStore: ...


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


def attach_masked_questions(data: PreparedSet, records: Sequence[QARecord], embedder: TextEmbedder) -> int:
    """Set ``data.q_walk_emb``: each question embedded with its topic mentions masked (its record's
    ``topics`` and bracketed spans, :func:`~engine.scoring.models.query_walk.mask_mentions`), one embedding call.
    Examples are matched to records by ``source`` and question; a question without a record keeps its text. Returns
    how many questions changed."""
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


def attach_relation_path_labels(data: PreparedSet, records: Sequence[QARecord], graph: GraphReader | None = None,
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
        want = [names_to_type.get(x, x) for x in r.relation_path or ()]  # (records with a path only)
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
    engine: ScorerKG,
    records: Sequence[QARecord],
    *,
    hops: int = DEFAULT_HOPS,
    max_edges: int = DEFAULT_MAX_EDGES,
    cache: str | Path | None = None,
    progress: bool = True,
    label_mode: Literal["pair", "set"] = "pair",
    echo: Callable[[str], None] | None = None,
) -> PreparedSet:
    """Neighbourhoods, labels and features of ``records`` on ``engine``'s KG (see the module docstring).

    With ``cache``: a cache file made for the same KG, relation vocabulary, embedding model, depth, cap and
    questions is read instead; otherwise the set is built and written there.

    Kept whole: the cache check and the four numbered steps share ``meta``, ``resolved``, ``keyed`` and ``nbs``
    (the labels read each record's neighbourhood by key and the features keep only the ones the labels used), and
    the cache is written only after step 4, so the order of the build stays visible in one place.
    """
    import torch
    from tqdm import tqdm

    from engine.scoring.checkpoint import relation_fingerprint
    from engine.scoring.labels import shortest_path_labels

    say = echo or (lambda m: print(m, file=sys.stderr))
    graph = engine.graph
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
    for r, _topics, depth, k in keyed:
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
        found = store.vectors.get_vectors("entities", node_eids[i:i + step].tolist())
        for j, eid in enumerate(node_eids[i:i + step].tolist()):
            v = found.get(eid)
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
