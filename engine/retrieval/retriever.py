"""Engine.retrieve: a pattern -> candidates (Milvus by meaning, Neo4j's full-text index by spelling) -> exact top-k
subgraphs from Neo4j."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from engine._config import DEFAULT_GRAPH_CACHE_MB, DEFAULT_NAME_VECTOR_CACHE_MB, MatchSettings
from engine._errors import PatternError
from engine._timing import ms
from engine.linking.names import NameMatch, normalize_name
from engine.linking.search import lookup_written, name_candidates
from engine.retrieval.matcher import Candidates, Match, SearchStats
from engine.retrieval.pattern import Pattern, PatternLike
from engine.retrieval.results import AnswerEntity, Entity, RetrievalResult, Subgraph, Triple, unmatched_warning
from engine.stores.version import Cached, VersionWatch

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    # (imported where used: the replica's module loads numpy, which importing the package must not)
    from engine.retrieval.graph_paths import EntityReader, GraphPath
    from engine.retrieval.name_vectors import NameTableState, NameVectorTable
    from engine.retrieval.replica import GraphReplica, VersionKey

    from engine._protocols import GraphReader, RelationRow, TextEmbedder, VectorIndex

#: at most this many entities are taken from the top-k(t) types of a typed unknown node
TYPE_CANDIDATE_LIMIT = 100_000
#: a relation vocabulary up to this size is searched exactly in process (one matrix product, no round trip)
LOCAL_RELATION_LIMIT = 20_000
#: pattern texts whose embeddings a Retriever keeps (the least recently used go first)
TEXT_CACHE_SIZE = 50_000
#: a named pattern node is looked up by name among this many of its nearest candidates
NAME_CHECK_CANDIDATES = 16
#: closest names reported for a named pattern node that is no entity's name
UNMATCHED_CLOSEST = 3


__all__ = ["Retriever", "as_pattern", "normalize_name"]


def as_pattern(pattern: PatternLike) -> Pattern:
    if isinstance(pattern, Pattern):
        return pattern
    if isinstance(pattern, Mapping):
        return Pattern.from_json(pattern)
    if isinstance(pattern, str):
        return Pattern.parse(pattern)
    return Pattern.from_triples(pattern)


class Retriever:
    """Candidates + matcher over one KG; the pieces come from an :class:`engine.Engine`."""

    def __init__(self, graph: GraphReader, vectors: VectorIndex, embedder: TextEmbedder, settings: MatchSettings, *,
                 text_cache_size: int = TEXT_CACHE_SIZE, graph_cache_mb: int = DEFAULT_GRAPH_CACHE_MB,
                 name_vector_cache_mb: int = DEFAULT_NAME_VECTOR_CACHE_MB, watch: VersionWatch | None = None) -> None:
        self.graph, self.vectors, self.embedder, self.settings = graph, vectors, embedder, settings
        #: what the caches of the KG below follow (engine.stores.version): the graph store's when it has one
        self.watch = watch or getattr(graph, "watch", None) or VersionWatch(getattr(graph, "version", None))
        self._has_types = Cached(self.watch, lambda: self.vectors.count("types") > 0)
        self._has_aliases = Cached(self.watch, lambda: getattr(self.vectors, "search_aliases", None) is not None
                                   and self.vectors.count("aliases") > 0)
        self._rel_matrix: tuple[int, list[int], np.ndarray] | None = None  # (generation, rids, vectors)
        #: the graph read replica's memory guard (MB; 0: no replica): see engine.retrieval.graph_paths
        self.graph_cache_mb = graph_cache_mb
        #: a named node whose text is exactly an entity's name (embedded from that name alone) takes the entity's
        #: stored vector instead of an embedding (needs a fresh replica: see GraphReplica.name_vector_ids)
        self.name_vectors = True
        #: the memory guard of the table of those stored vectors kept beside the replica (MB; 0: no table, the
        #: vectors are read from Milvus): see engine.retrieval.name_vectors
        self.name_vector_cache_mb = name_vector_cache_mb
        #: the last name table found ready, and forgotten() then (a query's look-up then takes no lock)
        self._name_table: tuple[NameVectorTable, int] | None = None
        self._version_key: VersionKey | None = None  # the KG's version as the last query read it
        self._reader: Any = None  # worker threads: the version is read while a query embeds and searches
        self.text_cache_size = text_cache_size
        self._text_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        #: texts of :meth:`encode` found in its cache, and embedded (counters for the service's metrics)
        self.text_cache_hits = 0
        self.text_cache_misses = 0
        self._text_lock = threading.Lock()
        self._pool: Any = None  # reads the names by spelling while the texts are embedded and searched by meaning

    def invalidate(self) -> None:
        """Forget what is cached of the KG: its relation catalog and relation vectors, whether it has types and
        aliases (a new generation of :attr:`watch`). The pattern-text embeddings stay: a text's vector does not
        depend on the KG."""
        self.watch.forget()

    def forget_text(self, *texts: str) -> None:
        """Drop these texts' cached embeddings, so that the next retrieval embeds them again (as for a text never
        seen: what a measurement of a first question needs, or of one question asked several ways)."""
        with self._text_lock:
            for text in texts:
                self._text_cache.pop(text, None)

    def check_version(self, ahead: Future[dict[str, Any]] | None = None) -> int | None:
        """Read the KG's version (one small read; ``ahead``: a read already under way) and drop the caches built on
        an earlier one, whoever changed the KG (this process or another); returns its sequence number (None for a
        graph without versions)."""
        v = self.watch.check(ahead.result() if ahead is not None else None)
        if v is None:
            return None
        from engine.retrieval.replica import version_key

        self._version_key = version_key(self.graph.kg, dict(v))
        return int(v["seq"])

    def _version_ahead(self) -> Future[dict[str, Any]] | None:
        """The version read, started in a worker thread: the query's embedding and vector search run meanwhile on the
        version the last query read, and are done again in the rare case that the read finds a newer one."""
        read = getattr(self.graph, "version", None)
        if read is None:
            return None
        with self._text_lock:
            if self._reader is None:
                from concurrent.futures import ThreadPoolExecutor

                self._reader = ThreadPoolExecutor(max_workers=4, thread_name_prefix="isorag-version")
        future: Future[dict[str, Any]] = self._reader.submit(read)
        return future

    def graph_path(self, settings: MatchSettings | None = None) -> GraphPath:
        """The path of the graph stage for a query on the version :meth:`check_version` read last (the replica only
        when it was built on exactly that version; :func:`engine.retrieval.graph_paths.choose_path`)."""
        from engine.retrieval.graph_paths import choose_path

        return choose_path(self.graph, self._version_key, settings or self.settings, self.graph_cache_mb)

    def replica_now(self) -> GraphReplica | None:
        """The graph read replica of the KG's version the last query read, when this process holds it ready (never
        waited for: a missing one starts building in the background). None before any query has read the version,
        after a write through this process until the next read, on the expand and statement paths, and without a
        replica. What the learned generator links names and reads its topics' relations from; the retrieval of its
        pattern reads the version anew, as every retrieval does."""
        key = self._version_key
        if key is None or self.watch.stamp is None or self.settings.graph in ("expand", "statement"):
            return None
        from engine.retrieval.replica import replica_for

        return replica_for(self.graph, key, self.graph_cache_mb)[0]

    def relation_matrix(self, catalog: Mapping[int, RelationRow]) -> tuple[list[int], np.ndarray] | None:
        """The KG's relation vectors, fetched once per version: relation candidates are then exact and local."""
        if len(catalog) > LOCAL_RELATION_LIMIT:
            return None
        generation = self.watch.generation
        cached = self._rel_matrix
        if cached is None or cached[0] != generation or len(cached[1]) != len(catalog):
            import numpy as np

            got = self.vectors.get_vectors("relations", list(catalog))
            rids = [rid for rid in catalog if rid in got]
            mat = np.stack([got[r] for r in rids]).astype("float32") if rids else np.zeros((0, 1), "float32")
            if self.watch.keep(generation):
                self._rel_matrix = (generation, rids, mat)
            return rids, mat
        return cached[1], cached[2]

    def encode(self, texts: Sequence[str], *, given: Mapping[str, np.ndarray] | None = None) -> np.ndarray | None:
        """Embeddings of pattern texts; relation and node texts repeat across queries, so they are cached
        (``given``: vectors some texts already have, used as they are and not cached here).

        Thread-safe: the vectors are taken out under the lock, so another thread's eviction cannot lose them.
        """
        if not texts:
            return None
        import numpy as np

        unique = list(dict.fromkeys(texts))
        got: dict[str, np.ndarray] = dict(given or {})
        cache = self._text_cache
        with self._text_lock:
            for t in unique:
                if t in got:
                    continue
                v = cache.get(t)
                if v is not None:
                    cache.move_to_end(t)
                    got[t] = v
            self.text_cache_hits += len(got)
            self.text_cache_misses += len(unique) - len(got)
        if len(got) < len(unique):
            miss = [t for t in unique if t not in got]
            vecs = self.embedder.encode(miss)  # outside the lock: other queries need not wait for the model
            with self._text_lock:
                for t, v in zip(miss, vecs):
                    got[t] = cache[t] = v
                    cache.move_to_end(t)
                while cache and len(cache) > self.text_cache_size:
                    cache.popitem(last=False)
        return np.stack([got[t] for t in texts])

    def _stored_vectors(self, texts: Sequence[str], replica: GraphReplica) -> dict[str, np.ndarray]:
        """The stored vectors of the texts (not in the text cache) that are exact entity names (from the name table,
        else one Milvus read for them all), instead of embeddings: the load embedded those very texts."""
        with self._text_lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._text_cache]
        return self.name_vectors_of(missing, replica) if missing else {}

    def name_table(self, replica: GraphReplica, *, wait: bool = False) -> tuple[NameVectorTable | None,
                                                                               NameTableState]:
        """The table of name vectors kept beside ``replica`` when it is ready (a missing one is read in the
        background; ``wait``: and waited for), and its state (:func:`engine.retrieval.name_vectors.name_table_for`)."""
        from engine.retrieval.name_vectors import NameTableState, forgotten, name_table_for

        held = self._name_table
        if held is not None and held[1] == forgotten() and held[0].key == replica.key \
                and held[0].nbytes <= self.name_vector_cache_mb * 2**20:
            return held[0], NameTableState("ready", mb=held[0].mb)
        self._name_table = None  # (of another version, forgotten, or over the guard now: never served)
        gen = forgotten()
        table, state = name_table_for(self.graph, self.vectors, replica, self.name_vector_cache_mb, wait=wait)
        if table is not None:
            self._name_table = (table, gen)
        return table, state

    def name_vectors_of(self, texts: Sequence[str], replica: GraphReplica) -> dict[str, np.ndarray]:
        """text -> the stored vector of the entity whose exact name it is (:meth:`GraphReplica.name_vector_ids`),
        for the texts that are such names: from the replica's name table when it is ready, else (and for any
        entity it lacks) by one Milvus read. The one way from a text to its entity's stored vector."""
        ids = replica.name_vector_ids(texts) if texts else {}
        if not ids:
            return {}
        want = sorted(set(ids.values()))
        table, _ = self.name_table(replica)
        got = table.vectors(replica, want) if table is not None else {}
        rest = [eid for eid in want if eid not in got]
        if rest:
            got.update(self.vectors.get_vectors("entities", rest))
        return {text: got[eid] for text, eid in ids.items() if eid in got}

    def replica_info(self, path: GraphPath) -> dict[str, Any]:
        """What a result's ``stats["replica"]`` says: the replica's state and size (:meth:`GraphPath.info`) and, on
        a replica, its name table's (``name_vectors``: state, size, vectors held, read time, from where)."""
        info = path.info()
        if path.replica is not None and self.name_vectors:
            table, state = self.name_table(path.replica)
            info["name_vectors"] = state.info(table)
        return info

    def _remember(self, vectors: Mapping[str, np.ndarray]) -> None:
        with self._text_lock:
            for text, v in vectors.items():
                self._text_cache[text] = v
                self._text_cache.move_to_end(text)

    def has_types(self) -> bool:
        """Whether the KG has entity types (cached while its version stays)."""
        return self._has_types.get()

    def candidates(self, pattern: Pattern, settings: MatchSettings, timings: dict[str, float],
                   path: GraphPath | None = None, *, stash: dict[str, np.ndarray] | None = None) -> Candidates:
        """The candidates of each pattern item: named nodes and known relations from one embedding call and one
        vector search, typed unknowns from their types' entities. With ``path`` on a replica (and ``stash``), a named
        node whose text is an entity's exact name takes that entity's stored vector, put into ``stash`` (cached by
        the caller once the replica proved fresh).

        Kept whole: the node, relation and type texts are embedded in one ``encode`` call whose rows ``vecs`` each
        part slices by offset, and the lookup by spelling (``spelled``) runs in Neo4j across those steps until
        ``named_candidates`` joins it; split, the parts would pass ``vecs``, its offsets, ``typed`` and that future."""
        catalog = self.graph.relation_catalog()
        if not catalog:
            raise PatternError(f"KG {self.graph.kg!r} has no relations: load a KG first")
        type_names = {ri.type: ri.name for ri in catalog.values()}
        node_texts = sorted({n.text for n in pattern.known_nodes if n.text})
        rel_texts = sorted({e.relation for e in pattern.edges if e.relation is not None})
        # typed unknowns take type candidates where their component has no known node (as SimGRAG does)
        typed: dict[str, str] = {}
        if pattern.has_typed_unknown() and self.has_types():
            for comp in pattern.components():
                if not comp.known_nodes:
                    for n in comp.unknown_nodes:
                        if n.type_hint:
                            typed[n.id] = n.type_hint
        type_texts = sorted(set(typed.values()))
        # the search by spelling needs no vector: it runs in Neo4j while the texts are embedded and searched in Milvus
        # (names as written are read from the replica where the query has one: then only a name that is no entity's
        # asks Neo4j)
        replica = path.replica if path is not None else None
        spelled = (self._names_pool().submit(lookup_written, self.graph, node_texts,
                                             exact=replica.entities_by_name if replica is not None else None)
                   if node_texts else None)
        t0 = time.perf_counter()
        texts = node_texts + rel_texts + type_texts
        given = (self._stored_vectors(node_texts, path.replica)
                 if self.name_vectors and path is not None and path.replica is not None and stash is not None else {})
        if stash is not None:
            stash.update(given)
        vecs = self.encode(texts, given=given)
        timings["embed"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        vec_hits: list[dict[int, float]] = []
        # vecs is None only when there are no texts (then no branch below reads it)
        if node_texts and vecs is not None:
            vec_hits = self.nearest_by_meaning(vecs[: len(node_texts)], settings.k_node)
        rel_hits: dict[str, dict[str, float]] = {}
        if rel_texts and vecs is not None:
            limit = min(settings.k_rel, len(catalog))
            qv = vecs[len(node_texts): len(node_texts) + len(rel_texts)]
            local = self.relation_matrix(catalog)
            if local is not None and local[0]:
                import numpy as np

                rids, mat = local
                dist = np.sqrt(np.maximum(((qv[:, None, :] - mat[None, :, :]) ** 2).sum(-1), 0.0))
                for t, row in zip(rel_texts, dist):
                    order = np.argsort(row, kind="stable")[:limit]
                    rel_hits[t] = {catalog[rids[j]].type: float(row[j]) for j in order}
            else:
                res = self.vectors.search("relations", qv, limit)
                for t, hits in zip(rel_texts, res):
                    rel_hits[t] = {catalog[rid].type: d for rid, d in hits if rid in catalog}
        type_hits: dict[str, list[int]] = {}
        if type_texts and vecs is not None:
            res = self.vectors.search("types", vecs[len(node_texts) + len(rel_texts):], settings.k_type)
            type_hits = {t: [tid for tid, _ in hits] for t, hits in zip(type_texts, res)}
        timings["vector"] = time.perf_counter() - t1
        t_names = time.perf_counter()
        matches = self.named_candidates(node_texts, vec_hits, settings.k_node, spelled) if node_texts else {}
        timings["names"] = time.perf_counter() - t_names
        nodes: dict[str, dict[int, float] | None] = {}
        names: dict[str, dict[int, NameMatch]] = {}
        cut: dict[str, str] = {}
        t2 = time.perf_counter()
        for n in pattern.nodes.values():
            if n.known:
                got = matches.get(n.text or "", {})
                nodes[n.id] = {eid: m.distance for eid, m in got.items()}
                names[n.id] = got
            elif n.id in typed:
                limit = TYPE_CANDIDATE_LIMIT
                tids = type_hits.get(typed[n.id], [])
                if path is not None and path.replica is not None:
                    of_type = path.replica.entities_of_types(tids, limit + 1)
                else:
                    of_type = [r["eid"] for r in self.graph.read_named("entities_of_types", tids=tids,
                                                                       limit=limit + 1)]
                if len(of_type) > limit:  # the lowest eids are kept (the query orders them): a cut, said as one
                    of_type = of_type[:limit]
                    cut[n.id] = (f"candidates of {n.id!r} (entities of type {typed[n.id]!r}) cut at {limit:,}: "
                                 "the result is not exact; name the node or narrow its type")
                nodes[n.id] = {eid: 0.0 for eid in of_type}
            else:
                nodes[n.id] = None
        timings["graph"] = timings.get("graph", 0.0) + time.perf_counter() - t2
        relations = {}
        for e in pattern.edges:
            relations[e.index] = (rel_hits.get(e.relation, {}) if e.relation is not None
                                  else {t: 0.0 for t in type_names})
        return Candidates(nodes, relations, type_names, cut, names)

    def has_aliases(self) -> bool:
        """Whether the KG has aliases with vectors (read once per KG version)."""
        return bool(self._has_aliases.get())

    def nearest_by_meaning(self, vecs: np.ndarray, k: int) -> list[dict[int, float]]:
        """Per vector, the ``k`` entities nearest by embedding over their names, and over their aliases where the
        KG has any (each collection searched for its ``k`` nearest; an entity returned by both is at the smaller of
        its distances): eid -> distance."""
        res = self.vectors.search("entities", vecs, k)
        out = [{int(eid): float(d) for eid, d in hits} for hits in res]
        if self.has_aliases():
            for got, hits in zip(out, self.vectors.search_aliases(vecs, k)):  # type: ignore[attr-defined]
                for eid, _, d in hits:
                    if d < got.get(eid, float("inf")):
                        got[eid] = float(d)
            out = [dict(sorted(got.items(), key=lambda kv: (kv[1], kv[0]))[:k]) for got in out]
        return out

    def _names_pool(self) -> Any:
        """Worker threads that read names by spelling while the texts are embedded and searched by meaning."""
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="isorag-names")
        return self._pool

    def named_candidates(self, texts: Sequence[str], vec_hits: Sequence[Mapping[int, float]], k: int,
                         spelled: Any = None) -> dict[str, dict[int, NameMatch]]:
        """text -> its candidates by meaning and by spelling (:mod:`engine.linking.search`). ``spelled``: the
        search by spelling already under way (a future of :func:`~engine.linking.search.lookup_written` over
        ``texts``), else it is read now."""
        by_text, by_name, names = spelled.result() if spelled is not None else lookup_written(self.graph, texts)
        found = [a + [e for e in b if e not in a] for a, b in zip(by_text, by_name)]
        return dict(zip(texts, name_candidates(texts, vec_hits, k, found, names)))

    def retrieve(self, pattern: PatternLike, *, k: int | None = None,
                 settings: MatchSettings | None = None) -> RetrievalResult:
        settings = settings or self.settings
        k = k or settings.k
        pat = as_pattern(pattern)
        t_start = time.perf_counter()
        deadline = time.monotonic() + settings.deadline_s
        timings: dict[str, float] = {}
        # The version is read (one small read) while the candidates are made on the version the last query read;
        # what depends on it (the relation catalog, the replica's names and vectors, the path) is made again when
        # the read finds the KG changed. The replica serves only a query whose version it was built on.
        guess, stamp = self._version_key, self.watch.stamp  # (read before the version read starts)
        ahead = self._version_ahead()
        stash: dict[str, np.ndarray] = {}
        t0 = time.perf_counter()
        path = self.graph_path(settings)
        timings["graph"] = time.perf_counter() - t0
        cands = self.candidates(pat, settings, timings, path, stash=stash)
        t0 = time.perf_counter()
        version = self.check_version(ahead)
        timings["version"] = time.perf_counter() - t0
        if self._version_key != guess:
            t0 = time.perf_counter()
            redo = (stamp is not None and self.watch.stamp != stamp) or path.replica is not None
            path = self.graph_path(settings)
            timings["graph"] += time.perf_counter() - t0
            if redo:
                stash.clear()
                cands = self.candidates(pat, settings, timings, path, stash=stash)
        self._remember(stash)
        t0 = time.perf_counter()
        matches, stats, entities, served = path.top_k(pat, cands, k, settings, deadline=deadline)
        result = self.build_result(pat, matches, cands, stats, entities)
        result.kg_version = version
        result.stats["graph_path"] = served
        result.stats["replica"] = self.replica_info(path)
        timings["graph"] = timings.get("graph", 0.0) + time.perf_counter() - t0
        timings["total"] = time.perf_counter() - t_start
        result.timings = {k2: ms(v) for k2, v in timings.items()}
        return result

    def build_result(self, pat: Pattern, matches: Sequence[Match], cands: Candidates,
                     stats: SearchStats, entities: EntityReader | None = None) -> RetrievalResult:
        """The result of a search: subgraphs with names (``entities``: where they are read, default the graph),
        answers, bindings, the name check of named nodes, warnings."""
        # the nearest candidates of each named node, read in the same query, tell whether its text is a name
        nearest: dict[str, list[tuple[int, float]]] = {}
        for n in pat.known_nodes:
            if n.text and n.text not in nearest:
                c = cands.nodes.get(n.id) or {}
                nearest[n.text] = sorted(c.items(), key=lambda kv: (kv[1], kv[0]))[:NAME_CHECK_CANDIDATES]
        eids = sorted({eid for m in matches for eid in m.nodes.values()}
                      | {x for m in matches for e in m.edges.values() for x in (e.start, e.end)}
                      | {eid for near in nearest.values() for eid, _ in near})
        rows = (entities or self.graph.entities)(eids) if eids else {}
        ent = {eid: Entity(eid, r.get("name") or r.get("key") or str(eid), r.get("key") or "")
               for eid, r in rows.items()}
        for eid in eids:
            ent.setdefault(eid, Entity(eid, str(eid), ""))
        subgraphs = []
        for m in matches:
            triples = [Triple(ent[e.start], cands.type_names.get(e.type, e.type), ent[e.end], ei)
                       for ei, e in sorted(m.edges.items())]
            node_d = {n: float((cands.nodes.get(n) or {}).get(eid, 0.0)) for n, eid in m.nodes.items()}
            edge_d = {ei: float(cands.relations.get(ei, {}).get(e.type, 0.0)) for ei, e in m.edges.items()}
            subgraphs.append(Subgraph(m.gsd, {n: ent[eid] for n, eid in m.nodes.items()}, triples, node_d, edge_d))
        bindings: dict[str, list[AnswerEntity]] = {}
        known_ids = [n.id for n in pat.known_nodes]
        for n in pat.unknown_nodes:
            best: dict[int, AnswerEntity] = {}
            for sg in subgraphs:
                e = sg.mapping.get(n.id)
                # (homomorphic mode) an unknown bound to the entity of a known node restates the question
                if e is not None and any(sg.mapping[k].eid == e.eid for k in known_ids if k in sg.mapping):
                    continue
                if e is not None and e.eid not in best:
                    best[e.eid] = AnswerEntity(e, sg.gsd, n.id)
            bindings[n.id] = list(best.values())
        target = pat.answer_node()
        answers = bindings.get(target, []) if target else []
        unmatched: dict[str, list[tuple[str, float]]] = {}
        matched: dict[str, NameMatch] = {}
        for n in pat.known_nodes:
            text = n.text or ""
            how = cands.names.get(n.id) or {}
            if text in matched or not how:
                continue
            bound = subgraphs[0].mapping.get(n.id) if subgraphs else None
            got = how.get(bound.eid) if bound is not None else None
            got = got or min(how.values(), key=lambda x: (x.distance, x.eid))
            if not got.name:  # found by meaning alone: its name read with the result's entities
                got = replace(got, name=ent[got.eid].name, matched=ent[got.eid].name)
            matched[text] = got
        for text, near in nearest.items():
            raw = {x for eid, _ in near for x in (ent[eid].name, ent[eid].key) if x}
            if text in raw:  # the text is a name as written (the normal forms then agree too)
                continue
            how = next((cands.names.get(n.id) or {} for n in pat.known_nodes if n.text == text), {})
            names = {normalize_name(x) for x in raw} | {normalize_name(m.matched) for m in how.values()}
            if normalize_name(text) not in names:
                unmatched[text] = [(ent[eid].name, round(d, 4)) for eid, d in near[:UNMATCHED_CLOSEST]]
        # first: the subgraphs below hold stand-ins for these names
        warnings = ([unmatched_warning(t, c) for t, c in unmatched.items()] + list(cands.cut.values())
                    + list(stats.warnings))
        exact = not stats.deadline_hit and stats.truncated == 0 and not cands.cut
        return RetrievalResult(pat, subgraphs, answers, bindings, {}, warnings, exact,
                               {"queries": stats.queries, "rows": stats.rows, "expansions": stats.expansions,
                                "pushed": stats.pushed, "truncated": stats.truncated, "narrowed": dict(stats.narrowed),
                                "from_candidates": stats.from_candidates, "deadline_hit": stats.deadline_hit,
                                "tier": stats.tier},
                               unmatched, names=matched)
