"""First load of a large KG by Neo4j's offline bulk importer (``neo4j-admin database import full``).

The online loader (:mod:`loaders.bulk`) writes batches through Bolt into a running server; it can add to any
KG, on any server. This one is for the first load of a big KG into a local Neo4j that isorag manages and that
holds nothing yet (``isorag load PATH --kg NAME --offline-import``; the instance is chosen by
``ISORAG_NEO4J_HOME`` / ``ISORAG_NEO4J_PORT``). It writes the same data model (docs/architecture.md) far faster:

1. **parse**: the source is streamed once into CSV files under ``<neo4j home>/import/<kg>/``: entities
   (isorag_eid, isorag_kg, isorag_key, isorag_name, isorag_types, isorag_name_key, isorag_own), the triples as typed
   relationships with the original name, the relation catalog, entity types and their ``ISORAG_IS_A`` links.
   Lines are checked as by the online loader (``file:line: reason``, skipped and counted unless ``strict``); a
   key or name holding a line break is skipped here too.
   Entities and triples are then made unique with ``sort -u`` (external, memory-flat), so a triple listed twice
   is one relationship, as with MERGE.
2. **import**: the server is stopped and Neo4j's importer replaces the database with those files; meanwhile
   the entity, relation and type names are embedded into Milvus (the two run at once: the importer in its
   own JVM, the embedder here).
3. **start**: the server comes back and the key constraints and indexes are built over the imported graph.

Memory: a bounded cache of entity ids (repeats past it are removed by ``sort -u``) and the entities that records
describe (RDF labels and types, node tables), which are gathered before they are written.

Resuming: a state file (``state.json`` beside the CSV files) records the source (path, size, mtime) and the
phase reached. Run again after a failure at any point, the load redoes the import if it had not finished
(the importer overwrites its own partial store), never parses twice, and embeds only the names Milvus does not
have yet. A database that holds anything but an unfinished import of the same file is refused: the importer
would replace it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from engine._errors import MalformedInputError, OfflineImportError
from engine.stores.graph import GraphStore, entity_id, name_key, relation_id, sanitize_relation, type_id
from loaders._model import EntityRecord, TripleRecord
from engine._reports import SkipLog
from loaders.bulk import LoadSummary, count_lines, default_name, embed_batch, peek_records, skip_log

if TYPE_CHECKING:  # pragma: no cover
    from engine._protocols import TextEmbedder
    from engine.servers.neo4j import LocalNeo4j
    from engine.stores.vectors import VectorStore

#: array delimiter of the entity ``types`` column (a control character no type name holds)
ARRAY_DELIMITER = "\x1f"
#: The importer's integer ids have 56 bits, eids 63: the id column is the eid's text (string ids, not stored)
#: and the eid is written again as a long property.
ENTITY_HEADER = (":ID(IsoragEntity),isorag_eid:long,isorag_kg,isorag_key,isorag_name,isorag_types:string[],"
                 "isorag_name_key,isorag_own:boolean")
REL_HEADER = ":START_ID(IsoragEntity),:END_ID(IsoragEntity),:TYPE,isorag_name"
RELTYPE_HEADER = "rid:long,kg,name,type"
ETYPE_HEADER = ":ID(IsoragEntityType),tid:long,kg,name"
ISA_HEADER = ":START_ID(IsoragEntity),:END_ID(IsoragEntityType),:TYPE"
#: phases, in order (state.json)
PHASES = ("parsing", "parsed", "importing", "imported", "done")


def _q(s: str) -> str:
    """One CSV field, always quoted (the importer's default quote character, doubled inside)."""
    return '"' + s.replace('"', '""') + '"'


def _sort_unique(src: Path, dst: Path, workdir: Path) -> int:
    """``sort -u`` (bytewise, external: memory-flat); returns the number of lines written."""
    env = {**os.environ, "LC_ALL": "C"}
    subprocess.run(["sort", "-u", "-S", "1G", "--parallel=2", "-T", str(workdir), "-o", str(dst), str(src)],
                   check=True, env=env)
    src.unlink()
    with dst.open("rb") as f:
        return sum(buf.count(b"\n") for buf in iter(lambda: f.read(1 << 20), b""))


class OfflineLoader:
    """Loads one source file into an empty local Neo4j (offline importer) and into Milvus."""

    def __init__(self, graph: GraphStore, vectors: VectorStore, embedder: TextEmbedder, local: LocalNeo4j, *,
                 progress: bool = True, batch_size: int = 10_000, embed_batch_size: int = 64, import_heap: str = "2g",
                 import_memory: str = "2G") -> None:
        self.graph, self.vectors, self.embedder, self.local = graph, vectors, embedder, local
        self.kg = graph.kg
        self.progress = progress
        self.batch_size = batch_size
        self.embed_batch_size = embed_batch_size
        self.import_heap, self.import_memory = import_heap, import_memory
        self.workdir = Path(local.home) / "import" / self.kg

    # -- state ---------------------------------------------------------------------------------------
    @property
    def _state_path(self) -> Path:
        return self.workdir / "state.json"

    def _read_state(self) -> dict[str, Any]:
        try:
            return json.loads(self._state_path.read_text())
        except (OSError, ValueError):
            return {}

    def _write_state(self, state: dict[str, Any]) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        tmp = self._state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1) + "\n")
        os.replace(tmp, self._state_path)

    @staticmethod
    def _source_id(path: Path, fmt: str) -> dict[str, Any]:
        st = path.stat()
        return {"path": str(path.resolve()), "size": st.st_size, "mtime": st.st_mtime, "format": fmt}

    # -- parse ---------------------------------------------------------------------------------------
    def _parse(self, records: Iterable[TripleRecord | EntityRecord], summary: LoadSummary, skips: SkipLog,
               strict: bool, total: int | None) -> dict[str, Any]:
        """Stream the records into the CSV files; returns the counts for the state file.

        Kept whole: one pass over the records writes the raw node and relationship files while it collects the
        described entities, the relations and the types, which the sorting and the header, record and type files
        written after it need; split, each part would take and return all of them.
        """
        from tqdm import tqdm

        wd = self.workdir
        for f in wd.glob("*.csv*"):
            f.unlink()
        kg, kgq = self.kg, _q(self.kg)
        eid_cache: dict[str, int] = {}  # key -> eid of entities already written (bounded; sort -u dedupes)
        described: dict[int, dict[str, Any]] = {}  # entities with an EntityRecord: eid -> key, name, types
        relations: dict[str, tuple[str, str]] = {}  # relation name -> (type, quoted name)
        bar = tqdm(total=total, desc="parse  (records)", unit="rec", disable=not self.progress, file=sys.stderr,
                   dynamic_ncols=True, mininterval=1.0)
        n = 0
        with (wd / "nodes.raw").open("w", encoding="utf-8") as nodes, \
                (wd / "rels.raw").open("w", encoding="utf-8") as rels:
            for rec in records:
                n += 1
                if n % 10_000 == 0:
                    bar.update(10_000)
                summary.records += 1
                if isinstance(rec, TripleRecord):
                    if any("\n" in s or "\r" in s for s in (rec.head, rec.tail, rec.relation)):
                        err = MalformedInputError(summary.path, rec.line, "a line break inside a key or a relation "
                                                  "name (not supported by the offline import)")
                        if strict:
                            raise err
                        skips(err)
                        continue
                    summary.triples += 1
                    ends = []
                    for key in (rec.head, rec.tail):
                        eid = eid_cache.get(key)
                        if eid is None:
                            if len(eid_cache) >= 2_000_000:
                                eid_cache.clear()
                            eid = eid_cache[key] = entity_id(kg, key)
                            name = default_name(key)
                            nodes.write(f"{eid},{eid},{kgq},{_q(key)},{_q(name)},,{_q(name_key(name))},false\n")
                        ends.append(eid)
                    rel = relations.get(rec.relation)
                    if rel is None:
                        rel = relations[rec.relation] = (sanitize_relation(rec.relation), _q(rec.relation))
                    rels.write(f"{ends[0]},{ends[1]},{rel[0]},{rel[1]}\n")
                else:
                    if "\n" in rec.key or "\r" in rec.key or (rec.name and ("\n" in rec.name or "\r" in rec.name)):
                        err = MalformedInputError(summary.path, rec.line, "a line break inside a key or a name "
                                                  "(not supported by the offline import)")
                        if strict:
                            raise err
                        skips(err)
                        continue
                    eid = entity_id(kg, rec.key)
                    row = described.setdefault(eid, {"key": rec.key, "name": None, "types": []})
                    if rec.name:  # the last name given wins, as in an online load
                        row["name"] = rec.name
                    for ty in rec.types:
                        if ty not in row["types"]:
                            row["types"].append(ty)
        bar.update(n % 10_000)
        bar.close()
        # entities: those of the triples, unique, minus those an EntityRecord describes (written apart)
        entities = _sort_unique(wd / "nodes.raw", wd / "nodes.sorted", wd)
        if described:
            kept = 0
            with (wd / "nodes.sorted").open(encoding="utf-8") as src, \
                    (wd / "nodes.csv").open("w", encoding="utf-8") as dst:
                for line in src:
                    if int(line[:line.index(",")]) not in described:
                        dst.write(line)
                        kept += 1
            (wd / "nodes.sorted").unlink()
            entities = kept
        else:
            os.replace(wd / "nodes.sorted", wd / "nodes.csv")
        types: dict[str, int] = {}
        with (wd / "records.csv").open("w", encoding="utf-8") as out, \
                (wd / "isa.csv").open("w", encoding="utf-8") as isa:
            for eid, row in described.items():
                name = row["name"] or default_name(row["key"])
                tys = ARRAY_DELIMITER.join(row["types"])
                out.write(f"{eid},{eid},{kgq},{_q(row['key'])},{_q(name)},{_q(tys) if tys else ''},"
                          f"{_q(name_key(name))},true\n")
                for ty in row["types"]:
                    tid = types.get(ty)
                    if tid is None:
                        tid = types[ty] = type_id(kg, ty)
                    isa.write(f"{eid},{tid},ISORAG_IS_A\n")
        triples = _sort_unique(wd / "rels.raw", wd / "rels.csv", wd)
        with (wd / "reltypes.csv").open("w", encoding="utf-8") as out:
            for name, (rtype, qname) in sorted(relations.items()):
                out.write(f"{relation_id(kg, name)},{kgq},{qname},{rtype}\n")
        with (wd / "etypes.csv").open("w", encoding="utf-8") as out:
            for ty, tid in sorted(types.items()):
                out.write(f"{tid},{tid},{kgq},{_q(ty)}\n")
        for name, header in (("entity", ENTITY_HEADER), ("rel", REL_HEADER), ("reltype", RELTYPE_HEADER),
                             ("etype", ETYPE_HEADER), ("isa", ISA_HEADER)):
            (wd / f"{name}.header.csv").write_text(header + "\n", encoding="utf-8")
        return {"records": summary.records, "triples_read": summary.triples, "entities": entities + len(described),
                "relationships": triples, "relations": len(relations), "types": len(types),
                "lines_skipped": summary.lines_skipped, "skip_reasons": summary.skip_reasons,
                "skip_examples": summary.skip_examples}

    # -- import --------------------------------------------------------------------------------------
    def _import_args(self) -> list[str]:
        wd = self.workdir

        def h(name: str) -> str:
            return str(wd / f"{name}.header.csv")

        return [
            f"--nodes=IsoragEntity={h('entity')},{wd / 'records.csv'},{wd / 'nodes.csv'}",
            f"--nodes=IsoragRelationType={h('reltype')},{wd / 'reltypes.csv'}",
            f"--nodes=IsoragEntityType={h('etype')},{wd / 'etypes.csv'}",
            f"--relationships={h('rel')},{wd / 'rels.csv'}",
            f"--relationships={h('isa')},{wd / 'isa.csv'}",
            "--id-type=string", f"--array-delimiter={ARRAY_DELIMITER}", "--overwrite-destination",
            "--threads=2", f"--max-off-heap-memory={self.import_memory}",
            f"--report-file={wd / 'import.report'}",
        ]

    def _database_holds(self) -> str | None:
        """The kg of some node in the database (None when it is empty)."""
        rows = self.graph.read_named("any_node_owner")
        return rows[0]["kg"] if rows else None

    # -- embeddings ----------------------------------------------------------------------------------
    def _entity_batches(self) -> Iterator[dict[int, str]]:
        """(eid -> name) batches of every entity in the CSV files."""
        import csv

        batch: dict[int, str] = {}
        for name in ("records.csv", "nodes.csv"):
            with (self.workdir / name).open(encoding="utf-8", newline="") as f:
                for row in csv.reader(f):
                    batch[int(row[1])] = row[4]
                    if len(batch) >= self.batch_size:
                        yield batch
                        batch = {}
        if batch:
            yield batch

    def _embed_all(self, summary: LoadSummary, state: dict[str, Any], check: Callable[[], None]) -> None:
        import csv

        from tqdm import tqdm

        self.vectors.ensure_collections()
        rels = [row[2] for row in csv.reader((self.workdir / "reltypes.csv").open(encoding="utf-8", newline=""))]
        tys = [row[3] for row in csv.reader((self.workdir / "etypes.csv").open(encoding="utf-8", newline=""))]
        bar = tqdm(total=state["counts"]["entities"], desc="embed  (entities)", unit="ent",
                   disable=not self.progress, file=sys.stderr, dynamic_ncols=True, mininterval=1.0)
        first = True
        try:
            for names in self._entity_batches():
                check()
                info = {"eids": list(names), "renamed": [], "names": names,
                        "rels": rels if first else [], "types": tys if first else []}
                first = False
                embed_batch(self.vectors, self.embedder, self.kg, info, summary, bar, self.embed_batch_size)
        finally:
            bar.close()
        t0 = time.perf_counter()
        self.vectors.finalize()
        summary.vector_s += time.perf_counter() - t0

    # -- driver --------------------------------------------------------------------------------------
    def load_file(self, path: str | Path, fmt: str | None = None, *, strict: bool = False,
                  echo: Callable[[str], None] | None = None, **options: Any) -> LoadSummary:
        """Load ``path`` by the offline importer, resuming where a killed run stopped: parse into CSV files, import
        them while the entities are embedded, then start the server again and finish its schema.

        Kept whole: the phases (parsing, importing, imported, done) are recorded in one state file and each step
        reads and moves it; the resume rules read best in one place, in the order the phases run.
        """
        from loaders import detect_format, open_source

        say = echo or (lambda m: print(m, file=sys.stderr, flush=True))
        t_start = time.perf_counter()
        path = Path(path)
        fmt = fmt or detect_format(path)
        summary = LoadSummary(path=str(path), kg=self.kg)
        source = self._source_id(path, fmt)
        state = self._read_state()
        if state.get("source") != source or state.get("kg") != self.kg:
            state = {}
        phase = state.get("phase")
        resumable = phase in ("parsed", "importing", "imported", "done")

        holds = None
        if phase not in ("importing", "imported", "done"):
            # (past "parsed", the database was found empty before: it holds this import, perhaps unfinished)
            if self.local.is_running() or (Path(self.local.home) / "data" / "databases").exists():
                self.local.start()
                holds = self._database_holds()
        if holds is not None:
            raise OfflineImportError(
                f"the offline import replaces the whole database of the local Neo4j in {self.local.home}, "
                f"and it holds data (KG {holds!r}): import into an empty instance (ISORAG_NEO4J_HOME, "
                f"ISORAG_NEO4J_PORT), or load with the online loader (without --offline-import)")

        if not resumable:
            self._write_state({"kg": self.kg, "source": source, "phase": "parsing"})
            t0 = time.perf_counter()
            skips = skip_log(summary, echo)
            records = peek_records(open_source(path, fmt, strict=strict, on_skip=skips, **options), summary)
            total = count_lines(path) if fmt in ("hrt", "tsv", "csv", "nt", "jsonl") else None
            counts = self._parse(records, summary, skips, strict, total)
            counts["parse_s"] = round(time.perf_counter() - t0, 2)
            state = {"kg": self.kg, "source": source, "phase": "parsed", "counts": counts}
            self._write_state(state)
            say(f"parsed {counts['triples_read']:,} triples into {counts['relationships']:,} relationships and "
                f"{counts['entities']:,} entities in {counts['parse_s']:.1f} s")
        counts = state["counts"]
        summary.records, summary.triples = counts["records"], counts["triples_read"]
        summary.lines_skipped, summary.skip_reasons = counts["lines_skipped"], counts["skip_reasons"]
        summary.skip_examples = counts["skip_examples"]
        summary.graph_s += counts.get("parse_s", 0.0)

        pool = ThreadPoolExecutor(1, thread_name_prefix="isorag-import")
        fut = None
        try:
            if state["phase"] in ("parsed", "importing"):
                self.local.stop()
                state["phase"] = "importing"
                self._write_state(state)
                say(f"importing into {self.local.home} (neo4j-admin database import full)")
                log = self.workdir / "import.log"
                fut = pool.submit(self._timed_import, log, state)

            def check() -> None:
                if fut is not None and fut.done() and fut.exception() is not None:
                    raise fut.exception()  # type: ignore[misc]

            if state["phase"] != "done":
                self._embed_all(summary, state, check)
            if fut is not None:
                summary.graph_s += fut.result()
                summary.entities_created = counts["entities"]
                summary.relationships_created = counts["relationships"]
                summary.relations_created = counts["relations"]
                summary.types_created = counts["types"]
        finally:
            pool.shutdown(wait=True)
        t0 = time.perf_counter()
        self.local.start()
        self.graph.ensure_schema()
        summary.graph_s += time.perf_counter() - t0
        summary.relations = len(self.graph.relation_catalog(refresh=True))
        state = self._read_state()
        if state["phase"] != "done":
            state["phase"] = "done"
            self._write_state(state)
            for f in self.workdir.glob("*.csv"):
                f.unlink()
        summary.wall_s = time.perf_counter() - t_start
        return summary

    def _timed_import(self, log: Path, state: dict[str, Any]) -> float:
        t0 = time.perf_counter()
        self.local.import_full(self._import_args(), log_path=log, heap=self.import_heap,
                               echo=(lambda m: print(f"  neo4j-admin: {m}", file=sys.stderr, flush=True))
                               if self.progress else None)
        took = time.perf_counter() - t0
        self._write_state({**state, "phase": "imported", "import_s": round(took, 2)})
        return took

