"""Bulk load of a triple stream into Neo4j and Milvus.

Per batch (one round trip per statement, never per row): MERGE the entities, the relation catalog (only for
relation names this load has not merged yet) and the batch's typed relationships, all types in one statement;
meanwhile, on the calling thread, embed whatever entity, relation or type of an earlier batch has no vector
in Milvus yet and write those vectors under the same ids. Everything is keyed by stable ids
(:func:`engine.stores.graph.stable_id`), every write is a MERGE, an insert of a pk never written or an upsert, and
the "what still needs a vector" question is asked of Milvus itself (or, for collections this load created,
of the pks written through it), so loading a file twice adds nothing and a load killed at any point
completes when run again.
"""

from __future__ import annotations

import queue
import re
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import chain, islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

from engine._errors import ConfigError, InputError, MalformedInputError
from engine._reports import Report, SkipLog
from engine.stores.aliases import has_aliases, resolve_keys
from engine.stores.graph import GraphStore, alias_id, entity_id, relation_id, sanitize_relation, type_id
from loaders._model import EntityRecord, TripleRecord

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import TextEmbedder
    from engine.stores.vectors import VectorStore

_IRI = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:(//|[^\s])\S*$")


def default_name(key: str) -> str:
    """The display name of an entity known only by its key: an IRI's local name, else the key itself."""
    if _IRI.match(key) and ("/" in key or "#" in key):
        local = re.split(r"[/#]", key.rstrip("/#"))[-1]
        if local:
            return urllib.parse.unquote(local).replace("_", " ")
    return key


@dataclass
class LoadSummary(Report):
    """What a load did: counts per store, the skipped lines by reason, and where the time went."""

    SKIP_COUNT = "lines_skipped"

    path: str = ""
    kg: str = ""
    records: int = 0
    triples: int = 0
    entities_created: int = 0
    relationships_created: int = 0
    relations: int = 0
    relations_created: int = 0
    types_created: int = 0
    embedded_entities: int = 0
    embedded_relations: int = 0
    embedded_types: int = 0
    embedded_aliases: int = 0
    lines_skipped: int = 0
    duplicates_removed: int = 0  # vector rows stored twice under one id, removed (see remove_duplicate_vectors)
    skip_reasons: dict[str, int] = field(default_factory=dict)
    skip_examples: list[str] = field(default_factory=list)
    graph_s: float = 0.0  # the graph stage: reading the source and writing Neo4j (not its waits for embeddings)
    embed_s: float = 0.0
    vector_s: float = 0.0
    wall_s: float = 0.0

    def lines(self) -> list[str]:
        out = [
            f"loaded {self.path} into KG {self.kg!r} in {self.wall_s:.1f} s",
            f"  triples read {self.triples:,}  relationships created {self.relationships_created:,}",
            f"  entities created {self.entities_created:,}  embedded {self.embedded_entities:,}",
            f"  relations {self.relations:,} (new {self.relations_created:,}, embedded {self.embedded_relations:,})"
            f"  types new {self.types_created:,} (embedded {self.embedded_types:,})"
            + (f"  aliases embedded {self.embedded_aliases:,}" if self.embedded_aliases else ""),
            f"  time: graph {self.graph_s:.1f} s, embed {self.embed_s:.1f} s, vectors {self.vector_s:.1f} s",
            f"  lines skipped {self.lines_skipped:,}",
        ]
        if self.duplicates_removed:
            out.insert(-1, f"  duplicate vector rows removed {self.duplicates_removed:,}")
        return out + self.skip_lines()


def skip_log(summary: LoadSummary, echo: Callable[[str], None] | None = None) -> SkipLog:
    """The skip log of a load: counts into ``summary``, keeps (and echoes) the first lines it skips."""
    return SkipLog(keep=LoadSummary.KEEP_SKIPPED, echo=echo, into=summary)


_Skips = skip_log  # its former name (a class of its own), which the CLI's tests still use


def nothing_loaded(summary: LoadSummary) -> str:
    """Why a source gave no record: every line skipped (by kind, with the first), or nothing in it."""
    if summary.lines_skipped:
        kinds = ", ".join(f"{n:,} x {r}" for r, n in sorted(summary.skip_reasons.items(), key=lambda kv: -kv[1]))
        first = f"; first: {summary.skip_examples[0]}" if summary.skip_examples else ""
        n = summary.lines_skipped
        return f"{summary.path}: nothing loaded: every line was skipped ({n:,} line{'s' * (n != 1)}: {kinds}){first}"
    return f"{summary.path}: nothing loaded: no triple or entity in it"


def peek_records(records: Iterable[Any], summary: LoadSummary) -> Iterator[Any]:
    """``records`` as they were, once the first one is read: a source that yields none (empty, or every line
    skipped) is an InputError before anything is written."""
    it = iter(records)
    for first in it:
        return chain([first], it)
    raise InputError(nothing_loaded(summary))


def _batches(it: Iterable[Any], n: int) -> Iterator[list[Any]]:
    it = iter(it)
    while batch := list(islice(it, n)):
        yield batch


def count_lines(path: Path) -> int | None:
    if not path.is_file() or path.stat().st_size > 4 << 30:
        return None
    n = 0
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            n += chunk.count(b"\n")
    return n


class _Failed:
    """An exception raised in the graph thread, handed to the embedding side."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def _stored(vectors: VectorStore, kind: str, ids: Sequence[int], known: dict[str, set[int]] | None) -> set[int]:
    """Which of ``ids`` have a vector of ``kind``: those in ``known[kind]`` without asking, the others by
    :meth:`VectorStore.existing_ids` (whose answers join ``known``)."""
    if known is None:
        return vectors.existing_ids(kind, ids)
    mine = known.setdefault(kind, set())
    have = {i for i in ids if i in mine}
    ask = [i for i in ids if i not in mine]
    if ask:
        found = vectors.existing_ids(kind, ask)
        mine.update(found)
        have |= found
    return have


def embed_batch(vectors: VectorStore, embedder: TextEmbedder, kg: str, info: dict[str, Any], summary: LoadSummary,
                bar: Any, embed_batch_size: int = 64, known: dict[str, set[int]] | None = None) -> None:
    """Embed what of a batch has no vector in Milvus yet (entities of ``info["eids"]`` and those ``renamed``, from the
    texts of ``info["names"]``: their name and description, :func:`engine.stores.texts.entity_text`; relation names
    ``info["rels"]``, type names ``info["types"]``) and write it, each row with the digest of its text.

    ``known``: ``relations`` / ``types`` -> the ids whose vectors the caller's load has written or found stored
    (updated here; a KG has few). The caller holds the KG's writer lease, so no other process deletes them
    meanwhile: they are not asked of Milvus again. (Without it, a relation name that recurs in every batch cost a
    strongly consistent query per batch, which also loaded the relation collection in the middle of the load.)
    Entities need no such memory: a load sends each entity to this stage once (:meth:`BulkLoader._write_nodes`)."""
    v = vectors
    # entities: those without a vector, plus those whose name a record just (re)set
    t0 = time.perf_counter()
    eids = info["eids"]
    have = v.existing_ids("entities", eids) if eids else set()
    todo = set(eids) - have
    todo.update(info["renamed"])
    stored = info["names"]  # what Neo4j holds for each entity of the batch
    names = {eid: stored.get(eid) or "" for eid in sorted(todo)}
    summary.vector_s += time.perf_counter() - t0
    if names:
        ids = list(names)
        t1 = time.perf_counter()
        texts = [names[i] for i in ids]
        vecs = embedder.encode(texts, batch_size=embed_batch_size)
        summary.embed_s += time.perf_counter() - t1
        t2 = time.perf_counter()
        v.upsert("entities", ids, vecs, texts=texts)
        summary.vector_s += time.perf_counter() - t2
        summary.embedded_entities += len(ids)
    if bar is not None:
        bar.update(len(eids))
    embed_aliases(vectors, embedder, kg, info.get("aliases") or {}, summary, embed_batch_size)
    for kind, items, idf in (("relations", info["rels"], relation_id), ("types", info["types"], type_id)):
        if not items:
            continue
        ids = [idf(kg, n) for n in items]
        have = _stored(v, kind, ids, known)
        miss = [(i, n) for i, n in zip(ids, items) if i not in have]
        if miss:
            t1 = time.perf_counter()
            vecs = embedder.encode([n for _, n in miss], batch_size=embed_batch_size)
            summary.embed_s += time.perf_counter() - t1
            t2 = time.perf_counter()
            v.upsert(kind, [i for i, _ in miss], vecs, names=[n for _, n in miss])
            summary.vector_s += time.perf_counter() - t2
            if known is not None:
                known.setdefault(kind, set()).update(i for i, _ in miss)
            if kind == "relations":
                summary.embedded_relations += len(miss)
            else:
                summary.embedded_types += len(miss)


def embed_aliases(vectors: VectorStore, embedder: TextEmbedder, kg: str, aliases: dict[int, list[str]],
                  summary: LoadSummary, embed_batch_size: int = 64) -> None:
    """Embed the aliases (eid -> its aliases) that have no vector yet, each like a name, into the aliases
    collection (made by the first alias)."""
    from engine.stores.vectors import ALIASES

    rows = [(alias_id(kg, eid, a), eid, a) for eid, names in aliases.items() for a in names]
    if not rows:
        return
    t0 = time.perf_counter()
    have = vectors.existing_ids(ALIASES, [r[0] for r in rows])
    miss = [r for r in rows if r[0] not in have]
    summary.vector_s += time.perf_counter() - t0
    if not miss:
        return
    t1 = time.perf_counter()
    vecs = embedder.encode([a for _, _, a in miss], batch_size=embed_batch_size)
    summary.embed_s += time.perf_counter() - t1
    t2 = time.perf_counter()
    vectors.upsert(ALIASES, [i for i, _, _ in miss], vecs, names=[a for _, _, a in miss],
                   owners=[e for _, e, _ in miss])
    summary.vector_s += time.perf_counter() - t2
    summary.embedded_aliases += len(miss)


def remove_duplicate_vectors(graph: GraphStore, vectors: VectorStore) -> int:
    """Remove the vector rows stored twice under one id (two loads of one KG at once, before loads took the KG's
    lease, inserted some ids twice); returns the rows removed. Looked for only where Milvus holds more rows than
    Neo4j has items, so a sound KG costs three counts."""
    st = graph.stats()
    removed = 0
    for kind in ("entities", "relations", "types"):
        if vectors.count(kind) > st[kind]:
            removed += vectors.remove_duplicates(kind)
    return removed


class BulkLoader:
    """Loads record streams into a KG; one instance per (graph, vectors, embedder).

    Two stages run at once: a graph thread parses the source and writes each batch to Neo4j (one
    statement for the batch's entities, one for all its triples whatever their relationship types),
    while the calling thread embeds the batch's new names and inserts their vectors into Milvus.
    Neo4j works in its own process and the embedder releases the GIL, so the two overlap; the graph
    thread runs at most ``ahead`` batches in front of the embeddings (memory stays flat).
    """

    def __init__(self, graph: GraphStore, vectors: VectorStore, embedder: TextEmbedder, *,
                 batch_size: int = 10_000, progress: bool = True, ahead: int = 8, embed_batch_size: int = 64) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.graph, self.vectors, self.embedder = graph, vectors, embedder
        self.kg = graph.kg
        self.batch_size = batch_size
        self.progress = progress
        self.ahead = max(1, ahead)
        # rows per embedding call: short names run fastest in small batches on 2 cores (benchmarks/embed.py)
        self.embed_batch_size = embed_batch_size
        self._relations: dict[str, tuple[int, str]] = {}  # name -> (rid, type); a KG has few relation names
        self._merged_relations: set[str] = set()  # relation names whose catalog node this loader has merged
        # Per load (reset by load_records), bounded: see _remember.
        self._written: set[int] = set()  # eids this load has merged (committed): not sent again
        self._fresh: set[int] = set()  # eids this load created and has not yet written triples from
        self._stored: dict[str, set[int]] = {}  # relations/types whose vectors this load wrote or found (embed_batch)
        self._has_aliases = False  # the KG has keys merged into other entities (engine.changes): resolve them

    # -- graph stage -------------------------------------------------------------------------------
    def _relation(self, name: str) -> tuple[int, str]:
        got = self._relations.get(name)
        if got is None:
            got = (relation_id(self.kg, name), sanitize_relation(name))
            self._relations[name] = got
        return got

    def _write_triples(self, groups: tuple[list[dict[str, Any]], list[dict[str, Any]]], summary: LoadSummary) -> None:
        merge, create = groups
        if merge or create:
            summary.relationships_created += self.graph.merge_relationships(merge, create)

    #: most eids kept in each of the per-load sets (about 80 bytes each): beyond it a set starts over, which only
    #: costs look-ups (an entity merged again, a triple MERGEd instead of CREATEd), never a wrong write
    remember_limit = 1_000_000

    def _remember(self, which: set[int], eids: Iterable[int]) -> None:
        which.update(eids)
        if len(which) > self.remember_limit:
            which.clear()

    def _write_nodes(self, batch: Sequence[TripleRecord | EntityRecord], summary: LoadSummary
                     ) -> tuple[dict[str, Any], tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
        """Entities, type links and relation catalog of a batch; returns (embedding info, (triples to MERGE,
        triples to CREATE)).

        Two shortcuts, both exact while a KG is loaded by one process at a time (as the vector side requires):

        * an entity this load has already merged (its transaction committed: batches are written in order)
          is not sent again; it went to the embedding side with the batch that merged it;
        * a triple whose head this load created (``merge_entities`` reports which entities existed) and has
          not yet written triples from is CREATEd rather than MERGEd. No relationship can start from such a
          head: it did not exist before this load, and since then only this load writes the KG, which writes
          the triples of a head in the batches where it is a head, in order, one transaction at a time. The
          head leaves the fresh set with this batch, so any later triple of it is MERGEd; duplicates within
          the batch are dropped here. A load killed and run again is a new load: whatever the killed one
          created exists, is reported as existing, and its triples are MERGEd.

        Kept whole: one pass over the batch fills the entity rows, the type links, the relation rows and the
        triples grouped by head at once, sharing the batch's key -> eid map; split, each part would walk the batch
        again or take and return all four.
        """
        kg = self.kg
        written = self._written
        eid_of: dict[str, int] = {}  # key -> eid for this batch (a key recurs in many triples)
        key_of: dict[str, str] = {}  # an alias key -> the key of the entity it resolves to
        if self._has_aliases:  # keys merged into another entity by a change set resolve to it
            key_of = self._aliased(batch)
            eid_of = {k: entity_id(kg, t) for k, t in key_of.items()}
        ents: list[dict[str, Any]] = []
        records: dict[int, dict[str, Any]] = {}
        groups: dict[int, list[dict[str, Any]]] = {}  # head eid -> its triples of this batch
        types: dict[str, list[int]] = {}
        rel_names: set[str] = set()
        for rec in batch:
            if isinstance(rec, TripleRecord):
                ends = []
                for key in (rec.head, rec.tail):
                    eid = eid_of.get(key)
                    if eid is None:
                        eid = eid_of[key] = entity_id(kg, key)
                        if eid not in written:
                            ents.append({"eid": eid, "key": key, "name": default_name(key), "types": []})
                    ends.append(eid)
                h, t = ends
                _, rtype = self._relation(rec.relation)
                rel_names.add(rec.relation)
                groups.setdefault(h, []).append({"t": t, "type": rtype, "name": rec.relation})
            else:
                key = key_of.get(rec.key, rec.key)
                eid = entity_id(kg, key)
                row = records.setdefault(eid, {"eid": eid, "key": key, "key_name": default_name(key), "name": None,
                                               "types": [], "aliases": []})
                if rec.name:
                    row["name"] = rec.name
                for a in rec.aliases:
                    if a and a not in row["aliases"]:
                        row["aliases"].append(a)
                for ty in rec.types:
                    if ty not in row["types"]:
                        row["types"].append(ty)
                    types.setdefault(ty, []).append(eid)
        g = self.graph
        created, existed = g.merge_entities(ents)
        summary.entities_created += created
        names = {e["eid"]: e["name"] for e in ents}
        names.update(existed)  # a name set earlier (e.g. by a label record) is the one to embed
        self._remember(self._fresh, (e["eid"] for e in ents if e["eid"] not in existed))
        self._remember(written, names)
        created, renamed_names = g.update_entities(list(records.values()))
        summary.entities_created += created
        names.update(renamed_names)
        new_rels = sorted(rel_names - self._merged_relations)
        if new_rels:
            summary.relations_created += g.merge_relation_types(
                [{"rid": self._relations[n][0], "name": n, "type": self._relations[n][1]} for n in new_rels])
            self._merged_relations.update(new_rels)
        if types:
            summary.types_created += g.merge_entity_types(
                [{"tid": type_id(kg, ty), "name": ty, "eids": eids} for ty, eids in types.items()])
        renamed = [r["eid"] for r in records.values() if r["name"]]
        # an alias equal to the entity's name adds nothing (the name is embedded already)
        aliases = {r["eid"]: [a for a in r["aliases"] if a != (names.get(r["eid"]) or r["name"])]
                   for r in records.values() if r["aliases"]}
        info = {"eids": list(names), "renamed": renamed, "names": names,
                "rels": sorted(rel_names), "types": sorted(types), "aliases": aliases}
        return info, self._split_triples(groups)

    def _split_triples(self, groups: dict[int, list[dict[str, Any]]]
                       ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The batch's triples by head: (to MERGE, to CREATE: those of heads this load created, see
        :meth:`_write_nodes`)."""
        fresh = self._fresh
        merge: list[dict[str, Any]] = []
        create: list[dict[str, Any]] = []
        for h, rels in groups.items():
            if h in fresh:
                fresh.discard(h)
                if len(rels) > 1:
                    uniq = {(r["type"], r["t"]): r for r in rels}
                    rels = list(uniq.values())
                create.append({"h": h, "rels": rels})
            else:
                merge.append({"h": h, "rels": rels})
        return merge, create

    def _aliased(self, batch: Sequence[TripleRecord | EntityRecord]) -> dict[str, str]:
        """alias key -> the key of the entity it resolves to, for the keys of ``batch`` that are aliases
        (:func:`engine.stores.aliases.resolve_keys`)."""
        keys = {k for rec in batch for k in ((rec.head, rec.tail) if isinstance(rec, TripleRecord) else (rec.key,))}
        return {k: r.key for k, r in resolve_keys(self.graph, keys).items() if r.key != k}

    # -- vector stage -------------------------------------------------------------------------------
    def _embed(self, info: dict[str, Any], summary: LoadSummary, bar: Any) -> None:
        embed_batch(self.vectors, self.embedder, self.kg, info, summary, bar, self.embed_batch_size, self._stored)

    # -- driver --------------------------------------------------------------------------------------
    def load_records(self, records: Iterable[TripleRecord | EntityRecord], summary: LoadSummary,
                     total_lines: int | None = None) -> LoadSummary:
        """Load ``records`` into the KG, holding its writer lease (one writer per KG: a second one fails at once
        with :class:`~engine._errors.KGLockedError` naming this one)."""
        with self.graph.lock(f"load {summary.path or 'records'}"):
            return self._load_records(records, summary, total_lines)

    def _load_records(self, records: Iterable[TripleRecord | EntityRecord], summary: LoadSummary,
                      total_lines: int | None) -> LoadSummary:
        """The load's pipeline: the graph stage on a thread of its own hands each written batch to the embedding
        and vector stage on this thread, through a bounded queue; then the vectors are indexed and checked.

        Kept whole: the two stages share the queue, the stop event, the progress bars and the summary, and the
        order of their shutdown (a failure on either side must stop the other and be raised here) reads best in
        one place.
        """
        from tqdm import tqdm

        t_start = time.perf_counter()
        self._written, self._fresh = set(), set()  # per load (see _write_nodes)
        self._stored = {}  # per load (see embed_batch)
        self.graph.ensure_schema()
        self._has_aliases = has_aliases(self.graph)
        self.graph.ensure_identity()  # a KG gets its identity with its first load
        graph_only = self.vectors is None  # (benchmarks: the graph stage alone)
        if not graph_only:
            self.vectors.ensure_collections()
        disable = not self.progress
        # two lines, one bar each (without positions the second bar redrew the first one's line)
        gbar = tqdm(total=total_lines, desc="graph  (records)", unit="rec", disable=disable, file=sys.stderr,
                    dynamic_ncols=True, position=0, leave=True)
        ebar = tqdm(desc="embed  (entities)", unit="ent", disable=disable, file=sys.stderr, dynamic_ncols=True,
                    position=1, leave=True)
        handoff: queue.Queue[Any] = queue.Queue(maxsize=self.ahead)
        stop = threading.Event()

        def graph_stage() -> None:
            # The triples of batch i are written (on a helper thread) while the entities of batch i+1 are
            # prepared and merged: two transactions at once keep both of Neo4j's cores busy. They do not
            # conflict: entity MERGEs lock index entries of new keys, relationship writes lock nodes.
            t0 = time.perf_counter()
            waited = 0.0
            pending: Any = None
            pool = ThreadPoolExecutor(1, thread_name_prefix="isorag-graph-triples")
            try:
                for batch in _batches(records, self.batch_size):
                    if stop.is_set():
                        return
                    summary.records += len(batch)
                    summary.triples += sum(1 for r in batch if isinstance(r, TripleRecord))
                    info, groups = self._write_nodes(batch, summary)
                    if pending is not None:
                        pending.result()
                    pending = pool.submit(self._write_triples, groups, summary)
                    gbar.update(len(batch))
                    t1 = time.perf_counter()
                    handoff.put(info)  # waits while `ahead` batches wait for their vectors
                    waited += time.perf_counter() - t1
                if pending is not None:
                    pending.result()
            except BaseException as e:  # noqa: BLE001 - re-raised by the embedding side
                handoff.put(_Failed(e))
                return
            finally:
                pool.shutdown(wait=True)
                summary.graph_s += time.perf_counter() - t0 - waited
            handoff.put(None)

        worker = threading.Thread(target=graph_stage, name="isorag-graph", daemon=True)
        worker.start()
        try:
            while True:
                item = handoff.get()
                if item is None:
                    break
                if isinstance(item, _Failed):
                    raise item.exc
                if not graph_only:
                    self._embed(item, summary, ebar)
        finally:
            stop.set()
            while worker.is_alive():  # let a graph stage blocked on a full hand-off see the stop
                try:
                    handoff.get(timeout=0.1)
                except queue.Empty:
                    pass
            worker.join()
            gbar.close()
            ebar.close()
        if not graph_only:
            t0 = time.perf_counter()
            self.vectors.finalize()
            summary.duplicates_removed = remove_duplicate_vectors(self.graph, self.vectors)
            summary.vector_s += time.perf_counter() - t0
        summary.relations = len(self.graph.relation_catalog(refresh=True))
        summary.wall_s = time.perf_counter() - t_start
        return summary

    def load_file(self, path: str | Path, fmt: str | None = None, *, strict: bool = False,
                  echo: Callable[[str], None] | None = None, **options: Any) -> LoadSummary:
        from loaders import detect_format, open_source

        path = Path(path)
        fmt = fmt or detect_format(path)
        summary = LoadSummary(path=str(path), kg=self.kg)
        total = count_lines(path) if fmt in ("hrt", "tsv", "csv", "nt", "jsonl") else None
        if strict:
            self._check(path, fmt, total, options)
        skips = skip_log(summary, echo)
        records = peek_records(open_source(path, fmt, strict=strict, on_skip=skips, **options), summary)
        return self.load_records(records, summary, total_lines=total)

    def _check(self, path: Path, fmt: str, total: int | None, options: dict[str, Any]) -> None:
        """``strict``: read the whole source before writing anything, so a bad line leaves the stores untouched
        (one more pass over the file: parsing costs a small part of a load)."""
        from tqdm import tqdm

        from loaders import open_source

        with tqdm(total=total, desc="check  (records)", unit="rec", disable=not self.progress, file=sys.stderr,
                  dynamic_ncols=True, leave=False) as bar:
            try:
                for batch in _batches(open_source(path, fmt, strict=True, **options), 10_000):
                    bar.update(len(batch))
            except MalformedInputError as e:
                raise MalformedInputError(e.path, e.line, f"{e.reason} (--strict: the source is read whole before "
                                          "loading; nothing was written)") from e
