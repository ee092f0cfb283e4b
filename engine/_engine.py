"""The Engine: one object that owns the stores, the embedder, the LLM and the triple scorer."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine._config import EngineConfig
from engine._errors import ConfigError, InputError, KGLockedError, KGNotFoundError
from engine._secrets import mask_uri

if TYPE_CHECKING:  # pragma: no cover - the components load at first use: `import engine` stays light
    from engine._protocols import TextEmbedder
    from engine.answering.pipeline import Pipeline
    from engine.answering.results import Answer, StreamEvent, Verdict
    from engine.changes.apply import ApplyReport
    from engine.changes.check import CheckReport
    from engine.changes.ops import Op
    from engine.integrations.langchain import IsoragRetriever
    from engine.learned.generator import PatternGenerator, Proposal
    from engine.learned.train import GeneratorRecord, GeneratorSettings, TrainedGenerator
    from engine.llm import LLM
    from engine.retrieval.pattern import PatternLike
    from engine.retrieval.results import RetrievalResult
    from engine.retrieval.retriever import Retriever
    from engine.scoring.features import FeatureStore
    from engine.scoring.qa import QARecord
    from engine.scoring.service import LinkedEntity, ScoringResult, ScoringService
    from engine.scoring.train import TrainResult
    from engine.servers.neo4j import LocalNeo4j
    from engine.stores.graph import GraphStore
    from engine.stores.vectors import VectorStore
    from engine.changes.sync import SyncReport
    from loaders.bulk import BulkLoader, LoadSummary
    from loaders.offline import OfflineLoader

_COUNTED = ("entities", "relations", "types")


class Engine:
    """Entry point of the Python API.

    >>> with Engine(kg="demo") as eng:          # local Neo4j and Milvus start on demand
    ...     eng.load("engine/data/demo/kb.txt")
    ...     eng.retrieve({"triples": [["Flashpoint", "starred_actors", "UNKNOWN actor 1"]]})
    ...     eng.ask("who acted in Flashpoint")   # with an LLM (ISORAG_LLM_* or llm=); else pass pattern=

    ``llm``: an :class:`~engine.llm.LLMConfig`, an :class:`~engine.llm.LLM`, a langchain-core chat model,
    ``None`` (the default: an OpenAI-compatible endpoint when ``ISORAG_LLM_*`` configures one, else no LLM)
    or ``False`` (no LLM, whatever the environment says).

    ``embedder``: an :class:`~engine.embeddings.Embedder` to use instead of ``config.embedding_model`` (one model
    shared by several engines in a process, or a stand-in); ``None`` (the default) loads the configured model at
    first use.
    """

    def __init__(self, config: EngineConfig | None = None, *, llm: Any = None, embedder: TextEmbedder | None = None,
                 **overrides: Any) -> None:
        cfg = config or EngineConfig.from_env()
        if overrides:
            cfg = cfg.with_(**overrides)
        self.config = cfg
        self._lock = threading.RLock()
        self._graph: GraphStore | None = None
        self._vectors: VectorStore | None = None
        self._embedder: TextEmbedder | None = embedder
        self._retriever: Retriever | None = None
        self._llm_arg: Any = llm  # an LLMConfig, an LLM, a langchain-core chat model, None or False
        self._llm: LLM | None = None
        self._llm_ready = False
        self._llm_owned = False
        self._fewshot: dict[str, list[dict[str, Any]]] = {}
        self._scorer: ScoringService | None = None
        self._features: FeatureStore | None = None
        self._generator: PatternGenerator | None = None
        self._kg_found = False  # require_kg passed (reset by load and drop)

    # -- components (lazy: a component starts or connects at first use) -------------------------------
    @property
    def kg(self) -> str:
        return self.config.kg

    @property
    def graph(self) -> GraphStore:
        with self._lock:
            if self._graph is None:
                from engine.stores.graph import GraphStore

                self._graph = GraphStore(self.config.neo4j, self.config.kg)
                if self._vectors is not None:
                    self._graph.watch.on_vector_writes(self._vectors.observe)
            return self._graph

    @property
    def embedder(self) -> TextEmbedder:
        with self._lock:
            if self._embedder is None:
                from engine.embeddings import load_embedder

                self._embedder = load_embedder(self.config.embedding_model, device=self.config.device)
            return self._embedder

    @property
    def vectors(self) -> VectorStore:
        """The KG's :class:`~engine.stores.vectors.VectorStore`. Opening it creates nothing: collections are made by the
        write paths (loads, adoption), so a read of a KG that does not exist leaves Milvus as it was."""
        with self._lock:
            if self._vectors is None:
                from engine.stores.vectors import VectorStore

                uri = self.config.milvus.uri
                if not uri:
                    from engine.servers.milvus import ensure_local_milvus

                    uri = ensure_local_milvus()
                emb = self.embedder
                self._vectors = VectorStore(uri, token=self.config.milvus.token, kg=self.config.kg,
                                            model=emb.slug, dim=emb.dim)
                # what another process wrote before the KG's version stamp moved is read once the stamp is seen
                # (hooked when both stores are open, whichever opens second: the vectors alone need no Neo4j)
                if self._graph is not None:
                    self._graph.watch.on_vector_writes(self._vectors.observe)
            return self._vectors

    def _in_neo4j(self) -> bool:
        """Whether Neo4j holds anything of this KG (an entity, a relation or a type)."""
        return any(self.graph.stats()[k] for k in _COUNTED)

    def require_kg(self, *, vectors: bool = True) -> None:
        """Raise :class:`~engine._errors.KGNotFoundError` unless this KG exists in Neo4j and (``vectors``) in
        Milvus. Every read path checks this once per engine: a read never creates a KG, a load does."""
        if self._kg_found:
            return
        with self._lock:
            # the relation catalog is what retrieval reads first anyway (then cached; read afresh here, as another
            # process may have loaded the KG since), the counts only when it is empty
            in_neo4j = bool(self.graph.relation_catalog(refresh=True)) or self._in_neo4j()
            if in_neo4j and not vectors:
                return
            in_milvus = bool(self.vectors.existing_kinds())
            if in_neo4j and in_milvus:
                self._kg_found = True
                return
            raise KGNotFoundError(self.kg, self.graph.uri, self.vectors.uri, in_neo4j=in_neo4j,
                                  in_milvus=in_milvus and vectors)

    def require_kg_to_change(self) -> None:
        """Raise :class:`~engine._errors.KGNotFoundError` unless this KG was made (by a load or a sync): it has an
        identity or anything in Neo4j. A change set changes a KG and never makes one, so that a mistyped KG name is
        refused before anything is written instead of becoming a new KG of the change set's additions (an emptied KG
        keeps its identity and can be changed again)."""
        if self.graph.identity() is None and not self._in_neo4j():
            raise KGNotFoundError(self.kg, self.graph.uri, self.vectors.uri)

    # -- loading -------------------------------------------------------------------------------------
    def load(self, path: str | Path, fmt: str | None = None, *, strict: bool = False, progress: bool = True,
             batch_size: int = 10_000, echo: Callable[[str], None] | None = None, offline_import: bool = False,
             local_neo4j: LocalNeo4j | None = None, **options: Any) -> LoadSummary:
        """Load a source file (see :mod:`loaders`) into Neo4j and Milvus; returns a ``LoadSummary``.

        ``offline_import``: the first load of a big KG into an empty local Neo4j by Neo4j's offline importer
        (:mod:`loaders.offline`); ``local_neo4j`` is that instance (a :class:`engine.servers.neo4j.LocalNeo4j`,
        default: the local instance this engine uses when no NEO4J_URI is set)."""
        if offline_import:
            from engine._errors import OfflineImportError
            from loaders.offline import OfflineLoader

            if local_neo4j is None:
                if self.config.neo4j.uri:
                    raise OfflineImportError(
                        f"the offline import writes the stores of a local Neo4j that isorag manages; this engine "
                        f"uses {self.config.neo4j.uri} (NEO4J_URI): unset it and choose the instance with "
                        "ISORAG_NEO4J_HOME / ISORAG_NEO4J_PORT")
                from engine.servers.neo4j import default_instance

                local_neo4j = default_instance()
            loader: OfflineLoader | BulkLoader = OfflineLoader(self.graph, self.vectors, self.embedder, local_neo4j,
                                                               progress=progress, batch_size=batch_size)
        else:
            from loaders.bulk import BulkLoader

            loader = BulkLoader(self.graph, self.vectors, self.embedder, batch_size=batch_size, progress=progress)
        summary = loader.load_file(path, fmt, strict=strict, echo=echo, **options)
        # readers in any process rebuild what they cache of the KG, and read the vectors written until now
        self.graph.bump_version(f"load {path}", self.vectors.last_write_ts)
        self.invalidate()
        self._generator = None
        self._kg_found = False
        return summary

    def load_existing(self, label: str, key: str, name: str | None = None, *, progress: bool = True,
                      batch_size: int = 10_000, aliases: str | None = None) -> LoadSummary:
        """Embed a graph already in Neo4j (nodes with ``label``) into Milvus without moving it (``aliases``: the
        property, a list of strings, holding each node's other names)."""
        from loaders.existing import embed_existing

        summary = embed_existing(self.graph, self.vectors, self.embedder, label=label, key=key, name=name,
                                 progress=progress, batch_size=batch_size, aliases=aliases)
        self.graph.bump_version(f"adopt label {label}", self.vectors.last_write_ts)
        self.invalidate()
        self._kg_found = False
        return summary

    def apply(self, changes: str | Path | Iterable[Op] | None = None, *, add: str | Path | None = None,
              remove: str | Path | None = None, fmt: str | None = None, strict: bool = False, progress: bool = True,
              batch_size: int | None = None) -> ApplyReport:
        """Apply a change set to the KG (both stores): a JSON Lines file (:func:`engine.changes.ops.read_changes`),
        an iterable of operations (:mod:`engine.changes.ops`), or two triple files, ``remove`` then ``add``, in any
        format :meth:`load` reads (:func:`engine.changes.ops.read_triple_files`). Idempotent and resumable: the same
        change set run again finishes a killed run, or changes nothing. Returns an
        :class:`~engine.changes.apply.ApplyReport` (with the KG's new version). Bad operations follow the loaders'
        rules: skipped and reported with ``file:line``, or raised with ``strict=True`` (for files, read whole before
        anything is written)."""
        from engine.changes.apply import BATCH_SIZE, apply_changes
        from engine.changes.ops import read_changes, read_triple_files
        from loaders import SkipLog

        if (changes is None) == (add is None and remove is None):
            raise ConfigError("apply: give a change set, or add= and/or remove= triple files (not both)")
        self.require_kg_to_change()
        unread = SkipLog()
        if add is not None or remove is not None:
            source = ", ".join(f"{w} {p}" for w, p in (("remove", remove), ("add", add)) if p is not None)
            if strict:
                for _ in read_triple_files(add=add, remove=remove, fmt=fmt, strict=True):
                    pass
            ops: Iterable[Op] = read_triple_files(add=add, remove=remove, fmt=fmt, strict=strict, on_skip=unread)
        elif isinstance(changes, (str, Path)):
            source = str(changes)
            if strict:  # a bad line fails before anything is written, as a strict load does
                for _ in read_changes(changes, strict=True):
                    pass
            ops = read_changes(changes, strict=strict, on_skip=unread)
        else:
            source, ops = "", changes  # type: ignore[assignment]
        report = apply_changes(self.graph, self.vectors, self.embedder, ops, strict=strict, progress=progress,
                               batch_size=batch_size or BATCH_SIZE, source=source)
        report.add_skips(unread)
        self.invalidate()
        return report

    def check(self, *, repair: bool = False, deep: bool = False, progress: bool = True) -> CheckReport:
        """Compare the KG's two stores in full (counts, ids, the text each vector was embedded from: every entity's
        with ``deep``) and, with ``repair``, make Milvus agree with Neo4j; see :mod:`engine.changes.check`."""
        from engine.changes.check import check_stores

        self.require_kg(vectors=False)
        report = check_stores(self.graph, self.vectors, self.embedder, repair=repair, deep=deep, progress=progress)
        if repair:
            self.invalidate()
        return report

    def invalidate(self) -> None:
        """Forget what this engine caches of the KG: every cache derived from it (the relation catalog, the
        retriever's relation vectors and "has types", the scorer's entity and relation vectors) follows one
        :class:`~engine.stores.version.VersionWatch`, which this starts anew. Needed only after a write through
        another object: reads check the KG's version stamp and drop what a change made stale themselves, whichever
        process changed the KG."""
        with self._lock:
            if self._graph is not None:
                self._graph.watch.forget()

    def version(self) -> dict[str, Any]:
        """The KG's version: ``seq`` (change sets and loads applied), ``at`` (when, ISO 8601 UTC). One small read."""
        v = self.graph.version()
        return {"seq": v["seq"], "at": v["at"]}

    def sync(self, path: str | Path | None, fmt: str | None = None, *, dry_run: bool = False, strict: bool = False,
             progress: bool = True, batch_size: int | None = None, **options: Any) -> SyncReport:
        """Make the KG equal to a source file (any format :meth:`load` reads): what the file has and the KG lacks is
        added, what the KG has and the file lacks is removed, entity names and types are set as a fresh load of the
        file would set them (:mod:`engine.changes.sync`: both sides streamed by eid partitions, never the whole KG
        in memory). ``dry_run``: count the differences, write nothing; ``batch_size``: operations per batch of the
        apply (:func:`engine.changes.apply.apply_changes`). Returns a :class:`SyncReport`."""
        from engine.changes.sync import sync_file

        # a dry run writes nothing: it needs neither Milvus nor the embedding model
        vectors, embedder = (None, None) if dry_run else (self.vectors, self.embedder)
        report = sync_file(self.graph, vectors, embedder, path, fmt, dry_run=dry_run, strict=strict,
                           progress=progress, batch_size=batch_size, **options)
        if not dry_run and report.changes:
            self.invalidate()
        return report

    def resync_existing(self, label: str, key: str, name: str | None = None, *, dry_run: bool = False,
                        progress: bool = True, batch_size: int = 10_000) -> SyncReport:
        """Adoption re-sync (``isorag sync --from-neo4j``): pick up the nodes of ``label`` added, changed (name, key)
        or deleted since the KG adopted them, and the relationship types added or no longer used, touching only what
        isorag owns on them (:mod:`engine.changes.adopt_sync`). Returns a :class:`SyncReport`."""
        from engine.changes.adopt_sync import resync_existing

        report = resync_existing(self.graph, self.vectors, self.embedder, label=label, key=key, name=name,
                                 dry_run=dry_run, progress=progress, batch_size=batch_size)
        if not dry_run and report.changes:
            self.invalidate()
        return report

    def stats(self) -> dict[str, Any]:
        """Counts from both stores and whether they agree. ``exists`` per store: whether it holds anything of
        this KG (Milvus: any of its collections); a KG in one store only never agrees. A KG in neither is a
        :class:`~engine._errors.KGNotFoundError`. ``milvus.duplicates``: vector rows stored twice under one id,
        per kind (looked for where Milvus has more rows than Neo4j has items; a load run again removes them).
        ``writer``: the holder of the KG's writer lease (``info``, ``expires_in_s``) or None."""
        # a writer that held the lease while the counts were read, looked for before them and after them (the
        # counts can take seconds, a load end meanwhile: its disagreement was then work in progress all the same)
        writer = self.graph.lock_holder()
        g = self.graph.stats()
        in_neo4j = any(g[k] for k in _COUNTED)
        in_milvus = bool(self.vectors.existing_kinds())
        if not in_neo4j and not in_milvus:
            raise KGNotFoundError(self.kg, self.graph.uri, self.vectors.uri)
        v = {kind: self.vectors.count(kind) for kind in _COUNTED}
        dup = {kind: self.vectors.excess_rows(kind) for kind in _COUNTED if v[kind] > g[kind]}
        version = self.graph.version()
        queued = self.graph.read_named("changes_queued", kg=self.kg)
        pending = int(queued[0]["queued"]) if queued else 0
        return {
            "kg": self.kg,
            "neo4j": {"uri": mask_uri(self.graph.uri), "exists": in_neo4j, **g},
            "milvus": {"uri": mask_uri(self.vectors.uri), "exists": in_milvus, **v,
                       "duplicates": {k: n for k, n in dup.items() if n}},
            "agree": in_neo4j and in_milvus and not pending and all(g[k] == v[k] for k in _COUNTED),
            # the KG's version (change sets and loads applied) and the vector work a change set has queued and not
            # done yet (a run killed between its two stores: run it again, or `isorag check --repair`)
            "version": {"seq": version["seq"], "at": version["at"]},
            "queued": pending,
            # a load (or drop) holding the KG's writer lease now: counts that disagree are then work in progress
            "writer": writer or self.graph.lock_holder(),
        }

    def drop(self) -> None:
        """Delete this KG from both stores: exactly what isorag wrote for it (an adopted graph is given back as it
        was, see :meth:`engine.stores.graph.GraphStore.drop`). Waits for no writer: fails if one holds the KG. A KG in
        neither store is a :class:`~engine._errors.KGNotFoundError` (and nothing is written)."""
        if not self._in_neo4j() and not self.vectors.existing_kinds():
            holder = self.graph.lock_holder()  # a load that has not written its first batch yet
            if holder is not None:
                raise KGLockedError(self.kg, holder["info"], float(holder["expires_in_s"] or 0))
            raise KGNotFoundError(self.kg, self.graph.uri, self.vectors.uri)
        kg_id = self.graph.identity()
        with self.graph.lock("drop"):
            self.graph.drop()
            self.vectors.drop()
            from engine.retrieval.replica import drop_replica_files

            drop_replica_files(self.graph)
        self.invalidate()
        self._vectors = None
        self._retriever = None
        self._features = None
        self._generator = None
        self._kg_found = False
        remove_kg_files(self.kg, kg_id)

    # -- retrieval -------------------------------------------------------------------------------------
    @property
    def retriever(self) -> Retriever:
        with self._lock:
            if self._retriever is None:
                from engine.retrieval.retriever import Retriever

                self.require_kg()
                self._retriever = Retriever(self.graph, self.vectors, self.embedder, self.config.match,
                                            graph_cache_mb=self.config.graph_cache_mb,
                                            name_vector_cache_mb=self.config.name_vector_cache_mb,
                                            watch=self.graph.watch)
            return self._retriever

    def retrieve(self, pattern: PatternLike, k: int | None = None, **match: Any) -> RetrievalResult:
        """Exact top-k subgraphs of the KG with the smallest graph semantic distance to ``pattern``.

        ``pattern`` is a :class:`~engine.retrieval.pattern.Pattern`, a ``{"triples": [[h, r, t], ...]}`` mapping, its
        JSON text or a list of triples. ``match`` overrides :class:`~engine._config.MatchSettings` fields for
        this call (``k_node``, ``k_rel``, ``injective``, ``directed``, ``deadline_s``, ...).
        """
        from dataclasses import replace

        _check_k(k)
        settings = replace(self.config.match, **match) if match else self.config.match
        return self.retriever.retrieve(pattern, k=k, settings=settings)

    # -- browsing: entity search and neighbourhoods (the service's explorer) -------------------------------
    def search_entities(self, text: str, *, limit: int = 20, offset: int = 0) -> dict[str, Any]:
        """Entities whose name contains ``text`` (case folded), best first (the exact name, then names that start
        with it, then shorter names; equal names: the better connected first):
        ``{"entities": [{eid, name, key, degree}], "next_offset"}`` for one page of ``limit`` from ``offset``;
        ``next_offset`` is None on the last page. Reads Neo4j only."""
        if not isinstance(text, str) or not text.strip():
            raise InputError("search_entities: give the text to look for (not empty)")
        if len(text) > SEARCH_TEXT_MAX:
            raise InputError(f"search_entities: text of {len(text):,} characters; at most {SEARCH_TEXT_MAX}")
        _check_page(limit, offset, "search_entities")
        self.require_kg(vectors=False)
        rows = self.graph.search_entities(text.strip(), limit=limit + 1, skip=offset)
        more = len(rows) > limit
        return {"entities": [_entity_row(r) for r in rows[:limit]], "next_offset": offset + limit if more else None}

    def neighbourhood(self, eid: int, *, limit: int = 500, offset: int = 0) -> dict[str, Any]:
        """One page of the triples around entity ``eid``, either way, in their source direction:
        ``{"entity": {eid, name, key, degree}, "triples": [{head, relation, tail, head_eid, tail_eid}],
        "neighbours": [{eid, name, key}], "offset", "next_offset"}``; ``degree`` counts every triple, so pages can
        be read until ``next_offset`` is None (no cap on the whole). An eid that is no entity of this KG is an
        :class:`~engine._errors.InputError`."""
        if isinstance(eid, bool) or not isinstance(eid, int):
            raise InputError(f"neighbourhood: eid must be an integer, got {eid!r}")
        _check_page(limit, offset, "neighbourhood")
        self.require_kg(vectors=False)
        centre = self.graph.entity(eid)
        if centre is None:
            raise InputError(f"neighbourhood: KG {self.kg!r} has no entity with eid {eid}")
        rows = self.graph.neighbours(eid, limit=limit + 1, skip=offset)
        more = len(rows) > limit
        rows = rows[:limit]
        me = _entity_row(centre)
        names = {eid: me["name"]}
        neighbours: dict[int, dict[str, Any]] = {}
        for r in rows:
            other = _entity_row(r)
            names[other["eid"]] = other["name"]
            neighbours.setdefault(other["eid"], other)
        triples = [{"head": names[r["head_eid"]], "relation": r["relation"], "tail": names[r["tail_eid"]],
                    "head_eid": r["head_eid"], "tail_eid": r["tail_eid"]} for r in rows]
        return {"entity": {**me, "degree": int(centre["degree"])}, "triples": triples,
                "neighbours": list(neighbours.values()), "offset": offset,
                "next_offset": offset + limit if more else None}

    def cache_stats(self) -> dict[str, dict[str, int]]:
        """What this engine's caches served: ``{"text_cache": {"hit", "miss"}}`` (pattern texts found in the
        embedding cache, or embedded). Makes nothing: zeros before the first retrieval."""
        r = self._retriever
        hit, miss = (r.text_cache_hits, r.text_cache_misses) if r is not None else (0, 0)
        return {"text_cache": {"hit": int(hit), "miss": int(miss)}}

    def list_kgs(self) -> list[dict[str, Any]]:
        """Every KG of this engine's Neo4j DBMS that has a version (loaded, adopted or changed):
        ``[{"kg", "version": {"seq", "at"}}]`` by name. Reads Neo4j only."""
        return [{"kg": r["kg"], "version": {"seq": int(r["seq"] or 0), "at": r["at"]}}
                for r in self.graph.list_kgs()]

    # -- the triple scorer (engine.scoring) ------------------------------------------------------------
    @property
    def scorer(self) -> ScoringService | None:
        """The :class:`~engine.scoring.service.ScoringService` of ``config.scorer`` (a checkpoint path), or None.

        Loaded at first use and checked against this KG and embedding model (a mismatch is a
        :class:`~engine._errors.CheckpointError`)."""
        with self._lock:
            if self._scorer is None and self.config.scorer:
                from engine.scoring.checkpoint import load_checkpoint
                from engine.scoring.device import resolve_device
                from engine.scoring.service import ScoringService

                self.require_kg()
                emb = self.embedder
                ckpt = load_checkpoint(self.config.scorer, kg=self.kg, embedding_slug=emb.slug, emb_dim=emb.dim,
                                       relation_types=sorted(self.graph.relation_types()),
                                       device=resolve_device(self.config.device), kg_id=self.graph.identity())
                self._scorer = ScoringService(ckpt, graph=self.graph, vectors=self.vectors, embedder=emb,
                                              features=self._scorer_features(), settings=self.config.scoring)
            return self._scorer

    @scorer.setter
    def scorer(self, value: str | Path | ScoringService | None) -> None:
        """Set a checkpoint path (loaded at next use), a ScoringService, or None."""
        with self._lock:
            from engine.scoring.service import ScoringService

            if isinstance(value, ScoringService) or value is None:
                self._scorer = value
                self.config = self.config.with_(scorer=None if value is None else self.config.scorer)
            else:
                self._scorer = None
                self.config = self.config.with_(scorer=str(value))

    @property
    def scorer_features(self) -> FeatureStore:
        """Entity / relation vectors for the scorers, cached per engine
        (:class:`~engine.scoring.features.FeatureStore`)."""
        with self._lock:
            return self._scorer_features()

    def _scorer_features(self) -> FeatureStore:  # under self._lock
        if self._features is None:
            from engine.scoring.features import FeatureStore

            self.require_kg()
            self._features = FeatureStore(self.vectors, self.graph, self.embedder.dim,
                                          capacity=self.config.scoring.cache_entities, watch=self.graph.watch)
        return self._features

    def link_entities(self, query: str) -> list[LinkedEntity]:
        """Entities of the KG named in ``query`` (n-gram vector search; needs a scorer checkpoint)."""
        return self._need_scorer().link(query)

    def score(self, query: str, anchors: Sequence[int] | None = None, **kw: Any) -> ScoringResult:
        """The top scored triples of the neighbourhood of ``anchors`` (eids; None: entities linked from ``query``)
        for ``query``: a :class:`~engine.scoring.service.ScoringResult`. ``kw``: ``hops``, ``max_edges``."""
        return self._need_scorer().score(query, anchors, **kw)

    def train_scorer(self, qa: str | Path | Sequence[str | Path] | Sequence[QARecord], *, model: str = "dde_mlp",
                     out: str | Path | None = None, **kw: Any) -> TrainResult:
        """Train a triple scorer on this KG (:func:`engine.scoring.train.train_scorer`); returns a TrainResult."""
        from engine.scoring.train import train_scorer

        self.require_kg()
        return train_scorer(self, qa, model=model, out=out, kg_id=self.graph.ensure_identity(), **kw)

    def _need_scorer(self) -> ScoringService:
        from engine._errors import ConfigError

        sc = self.scorer
        if sc is None:
            raise ConfigError("no scorer checkpoint configured: pass Engine(scorer=PATH) or set ISORAG_SCORER "
                              "(train one with `isorag train-scorer`)")
        return sc

    # -- the learned pattern generator (engine.learned) ----------------------------------------------------
    def generator_path(self) -> Path | None:
        """The generator file in use: ``config.generator`` (``ISORAG_GENERATOR``), else this KG's default file
        (:func:`default_generator_path`) when it exists, else None."""
        if self.config.generator:
            given = Path(self.config.generator).expanduser()
            if not given.is_file():
                from engine._errors import CheckpointError

                raise CheckpointError(f"no generator file at {given} (ISORAG_GENERATOR / generator=): train one "
                                      "with `isorag train-generator`")
            return given
        path = default_generator_path(self.kg)
        return path if path.is_file() else None

    @property
    def generator(self) -> PatternGenerator | None:
        """The learned pattern generator (:class:`~engine.learned.generator.PatternGenerator`) of
        :meth:`generator_path`, or None. Loaded at first use and checked against this KG and embedding model."""
        with self._lock:
            if self._generator is None:
                path = self.generator_path()
                if path is None:
                    return None
                from engine.learned.generator import PatternGenerator, load_generator

                self.require_kg()
                emb = self.embedder
                ckpt = load_generator(path, kg=self.kg, embedding_slug=emb.slug, kg_id=self.graph.identity())
                self._generator = PatternGenerator(ckpt, graph=self.graph, vectors=self.vectors, embedder=emb,
                                                   max_chars=self.config.max_question_chars,
                                                   encode=self.retriever.encode, replica=self.retriever.replica_now)
            return self._generator

    def _need_generator(self) -> PatternGenerator:
        from engine.learned.router import NO_GENERATOR_HELP

        gen = self.generator
        if gen is None:
            raise ConfigError(NO_GENERATOR_HELP)
        return gen

    def propose(self, query: str, *, beam: int = 3) -> Proposal:
        """The learned generator's patterns for ``query`` in plain text: linked topics and a beam of patterns with
        their probabilities (:class:`~engine.learned.generator.Proposal`). Needs a generator; a query longer than
        ``config.max_question_chars`` is an InputError."""
        from engine.learned.generator import check_text

        check_text(query, self.config.max_question_chars)
        return self._need_generator().propose(query, beam=beam)

    def train_generator(self, qa: str | Path | Sequence[str | Path] | Sequence[GeneratorRecord], *,
                        out: str | Path | None = None, settings: GeneratorSettings | None = None,
                        limit: int | None = None, progress: bool = True) -> TrainedGenerator:
        """Train this KG's pattern generator (:func:`engine.learned.train.train_generator`) from question files
        (MetaQA lines, JSON Lines such as ``isorag synth`` output) or records, and write it to ``out`` (default:
        :func:`default_generator_path`, where :meth:`ask` finds it). Returns a TrainedGenerator."""
        from engine.learned.train import GeneratorRecord, read_records, train_generator

        self.require_kg()
        if isinstance(qa, (str, Path)):
            qa = [qa]
        items = list(qa)
        records = [x for x in items if isinstance(x, GeneratorRecord)]
        for x in items:
            if not isinstance(x, GeneratorRecord):
                records.extend(read_records(x, limit=limit))
        target = Path(out).expanduser() if out is not None else default_generator_path(self.kg)
        res = train_generator(self.graph, self.vectors, self.embedder, records, kg=self.kg, out=target,
                              settings=settings, progress=progress, kg_id=self.graph.ensure_identity())
        with self._lock:
            self._generator = None  # the next use loads the new file
        return res

    # -- the LLM and its few-shot examples ---------------------------------------------------------------
    @property
    def llm(self) -> LLM | None:
        """The :class:`~engine.llm.LLM` in use, or None (made at first use from the ``llm`` argument)."""
        with self._lock:
            if not self._llm_ready:
                from engine.llm import LLM, make_llm

                arg = self._llm_arg
                self._llm = None if arg is False else make_llm(arg)
                # an LLM the engine made (from a config or the environment) is the engine's to close
                self._llm_owned = self._llm is not None and not isinstance(arg, LLM)
                self._llm_ready = True
            return self._llm

    @llm.setter
    def llm(self, value: Any) -> None:
        with self._lock:
            if self._llm_owned and self._llm is not None and hasattr(self._llm, "close"):
                self._llm.close()
            self._llm_arg, self._llm_ready, self._llm, self._llm_owned = value, False, None, False

    def fewshot(self, kind: str) -> list[dict[str, Any]]:
        """The first ``config.shots`` few-shot examples of ``kind`` (``pattern``, ``claim``, ``answer``,
        ``verify``) from ``config.fewshot``: a bundled name ("demo"), a directory with ``<kind>.jsonl`` (or
        ``<name>_<kind>.jsonl``) files, a path prefix ``P`` with ``P_<kind>.jsonl`` files, or None (no examples)."""
        with self._lock:
            if kind not in self._fewshot:
                self._fewshot[kind] = _load_fewshot(self.config.fewshot, kind, self.config.shots)
            return self._fewshot[kind]

    # -- answers and verdicts (engine.answering) ------------------------------------------------------
    def _pipeline(self) -> Pipeline:
        """The answering pipeline over this engine's components. Each is handed over deferred (made at first use,
        in the stage that needs it, once per pipeline); the generator is looked up only when a route may use it."""
        from engine._protocols import Deferred
        from engine.answering.pipeline import Pipeline

        cfg = self.config
        return Pipeline(retriever=Deferred(lambda: self.retriever), llm=Deferred(lambda: self.llm),
                        fewshot=self.fewshot, scorer=Deferred(self._need_scorer) if cfg.scorer else None,
                        kg=self.kg, match=cfg.match, verify=cfg.verify, generator=Deferred(lambda: self.generator),
                        route=cfg.route, max_question_chars=cfg.max_question_chars)

    def pattern_route(self, route: str | None = None) -> str:
        """Who first tries to write the pattern of a question asked without one, under ``route`` (default
        ``config.route``): ``"learned"``, ``"llm"`` or ``"scorer"``, as :meth:`ask` decides it
        (:func:`engine.learned.router.plan`). A route nothing can follow is a ConfigError. Asks no server: a
        command calls it to refuse such a question before anything starts."""
        from engine.learned.router import plan

        route = route or self.config.route
        generator = route != "llm" and self.generator_path() is not None
        return plan(route, generator=generator, llm=route != "learned" and self.llm is not None,
                    scorer=bool(self.config.scorer))

    def ask(self, query: str, *, pattern: PatternLike | None = None, k: int | None = None, raise_errors: bool = True,
            route: str | None = None, **match: Any) -> Answer:
        """Answer ``query`` from the KG: the LLM's pattern (or ``pattern``, or the learned generator's, as ``route``
        says: :mod:`engine.learned.router`), the top-``k`` subgraphs, the LLM's answer over them (without an LLM, or
        for a learned pattern: the entities bound to the pattern's unknown target). Returns an
        :class:`~engine.answering.Answer`; a failing stage raises, or with ``raise_errors=False`` is reported in
        ``Answer.failed_stage`` / ``Answer.error``. ``match`` overrides MatchSettings fields for this call."""
        from engine.answering.drivers import drive

        _check_k(k)
        return drive(self._pipeline().ask(query, pattern=pattern, k=k, raise_errors=raise_errors, route=route,
                                                 **match))

    async def aask(self, query: str, *, pattern: PatternLike | None = None, k: int | None = None,
                   raise_errors: bool = True, route: str | None = None, **match: Any) -> Answer:
        """The async twin of :meth:`ask`."""
        from engine.answering.drivers import adrive

        _check_k(k)
        return await adrive(self._pipeline().ask(query, pattern=pattern, k=k, raise_errors=raise_errors, route=route,
                                                 **match))

    def ask_stream(self, query: str, *, pattern: PatternLike | None = None, k: int | None = None,
                   raise_errors: bool = True, route: str | None = None, **match: Any) -> Iterator[StreamEvent]:
        """:meth:`ask` as events: ``PatternEvent``, ``SubgraphsEvent``, ``ScoredEvent`` (with a triple scorer),
        ``TokenEvent``... and ``AnswerEvent``."""
        from engine.answering.drivers import stream

        _check_k(k)
        return stream(self._pipeline().ask(query, pattern=pattern, k=k, raise_errors=raise_errors, route=route,
                                                 **match))

    def aask_stream(self, query: str, *, pattern: PatternLike | None = None, k: int | None = None,
                    raise_errors: bool = True, route: str | None = None, **match: Any) -> AsyncIterator[StreamEvent]:
        """The async twin of :meth:`ask_stream` (an async iterator)."""
        from engine.answering.drivers import astream

        _check_k(k)
        return astream(self._pipeline().ask(query, pattern=pattern, k=k, raise_errors=raise_errors, route=route,
                                                 **match))

    def verify(self, claim: str, *, pattern: PatternLike | None = None, k: int | None = None,
               threshold: float | None = None, raise_errors: bool = True, route: str | None = None,
               **match: Any) -> Verdict:
        """Check ``claim`` against the KG: a :class:`~engine.answering.Verdict` (SUPPORTED, REFUTED or
        NOT_ENOUGH_INFO) with its evidence. With an LLM, SimGRAG's True/False over the evidence; without one,
        the rule of :mod:`engine.answering.verification` (``threshold`` overrides ``config.verify.threshold``)."""
        from engine.answering.drivers import drive

        _check_k(k)
        return drive(self._pipeline().verify(claim, pattern=pattern, k=k, threshold=threshold,
                                             raise_errors=raise_errors, route=route, **match))

    async def averify(self, claim: str, *, pattern: PatternLike | None = None, k: int | None = None,
                      threshold: float | None = None, raise_errors: bool = True, route: str | None = None,
               **match: Any) -> Verdict:
        """The async twin of :meth:`verify`."""
        from engine.answering.drivers import adrive

        _check_k(k)
        return await adrive(self._pipeline().verify(claim, pattern=pattern, k=k, threshold=threshold,
                                                    raise_errors=raise_errors, route=route, **match))

    def verify_many(self, claims: Iterable[Any], *, concurrency: int = 4, raise_errors: bool = False,
                    **kw: Any) -> list[Verdict]:
        """Verdicts for many claims (strings, ``(claim, pattern)`` pairs or ``{"claim", "pattern"}`` mappings),
        in order, ``concurrency`` at a time. A failing claim is reported in its Verdict unless ``raise_errors``."""
        from engine.answering.drivers import verify_many

        _check_k(kw.get("k"))
        return verify_many(self._pipeline(), claims, concurrency=concurrency, raise_errors=raise_errors, **kw)

    async def averify_many(self, claims: Iterable[Any], *, concurrency: int = 4, raise_errors: bool = False,
                           **kw: Any) -> list[Verdict]:
        """The async twin of :meth:`verify_many`."""
        from engine.answering.drivers import averify_many

        _check_k(kw.get("k"))
        return await averify_many(self._pipeline(), claims, concurrency=concurrency, raise_errors=raise_errors,
                                  **kw)

    def as_retriever(self, k: int = 3, **kw: Any) -> IsoragRetriever:
        """A langchain-core retriever over this engine (:class:`engine.integrations.langchain.IsoragRetriever`)."""
        from engine.integrations.langchain import IsoragRetriever

        return IsoragRetriever(engine=self, k=k, **kw)

    # -- lifecycle -----------------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            if self._vectors is not None and hasattr(self._vectors, "close"):
                self._vectors.close()
            self._vectors = None
            if self._llm_owned and self._llm is not None and hasattr(self._llm, "close"):
                self._llm.close()
            self._llm, self._llm_ready, self._llm_owned = None, False, False

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def default_generator_path(kg: str) -> Path:
    """Where a KG's pattern generator is written and found by default: ``$ISORAG_HOME/generators/<kg>.pt``."""
    from engine._config import isorag_home

    return isorag_home() / "generators" / f"{kg}.pt"


def kg_files(kg: str) -> list[Path]:
    """The files a KG has under ``ISORAG_HOME`` (its default pattern generator), those that exist."""
    gen = default_generator_path(kg)
    return [p for p in (gen, gen.with_name(gen.name + ".tmp")) if p.is_file()]


def remove_kg_files(kg: str, kg_id: str | None) -> list[Path]:
    """Remove the files of KG ``kg`` (identity ``kg_id``) under ``ISORAG_HOME`` (:func:`kg_files`) that were made for
    it: those that record its identity or none (made before identities). A file that records another identity
    belongs to another KG of that name (another server's, sharing this ``ISORAG_HOME``) and stays. Returns the files
    removed."""
    removed = []
    for path in kg_files(kg):
        if kg_id is None or _recorded_kg_id(path) in (None, kg_id):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _recorded_kg_id(path: Path) -> str | None:
    """The KG identity an isorag file (a torch-saved dict) records, None when it records none or cannot be read."""
    try:
        import torch

        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - a file that cannot be read records nothing: it was made for this KG name
        return None
    got = data.get("kg_id") if isinstance(data, dict) else None
    return got if isinstance(got, str) else None


#: longest text :meth:`Engine.search_entities` looks for; most items a page of a search or a neighbourhood holds
SEARCH_TEXT_MAX = 500
PAGE_MAX = 10_000


def _check_page(limit: Any, offset: Any, where: str) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= PAGE_MAX:
        raise InputError(f"{where}: limit must be an integer from 1 to {PAGE_MAX:,}, got {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InputError(f"{where}: offset must be an integer >= 0, got {offset!r}")


def _entity_row(r: dict[str, Any]) -> dict[str, Any]:
    out = {"eid": int(r["eid"]), "name": r.get("name") or r.get("key") or str(r["eid"]), "key": r.get("key") or ""}
    if r.get("degree") is not None:
        out["degree"] = int(r["degree"])
    return out


def _check_k(k: Any) -> None:
    # None is the configured default; 0 or a negative k would silently mean the default or nothing
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ConfigError(f"k (subgraphs to return) must be a positive integer, got {k!r}")


def _load_fewshot(source: str | None, kind: str, shots: int) -> list[dict[str, Any]]:
    from engine._errors import ConfigError
    from engine.answering.prompting import load_fewshot

    if source is None or shots == 0:
        return []
    given = Path(source).expanduser()
    if given.is_dir():
        files = [given / f"{kind}.jsonl"] + sorted(given.glob(f"*_{kind}.jsonl"))
        found = [f for f in files if f.is_file()]
        if not found:
            raise ConfigError(f"few-shot directory {given} has no {kind}.jsonl (nor *_{kind}.jsonl)")
        return load_fewshot(found[0], shots)
    prefixed = Path(f"{given}_{kind}.jsonl")
    if prefixed.is_file():
        return load_fewshot(prefixed, shots)
    if given.is_file():
        raise ConfigError(
            f"fewshot={source!r} is one file, but the prompts need four kinds of examples: give a directory with "
            "pattern.jsonl, claim.jsonl, answer.jsonl and verify.jsonl (or a prefix P of P_<kind>.jsonl files)"
        )
    return load_fewshot(source, shots, kind=kind)
