"""The KG in Neo4j: one driver per process, read routing for retrieval, typed relationships.

Every statement comes from ``cypher/`` (see :mod:`engine._cypher`); every value is a parameter.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence, TypeVar, overload

from engine._config import Neo4jSettings, check_kg_name
from engine._cypher import cypher, identifier, render
from engine._errors import (ConfigError, DeadlineExceeded, IsoragError, KGLockedError, StoreError,
                            StoreUnavailableError, UnknownRelationError)
from engine.stores.texts import entity_text
from engine.stores.version import Cached, VersionWatch

if TYPE_CHECKING:  # pragma: no cover - the driver loads at first use
    import neo4j

_T = TypeVar("_T")
_DRIVERS: dict[tuple[str, str, str], neo4j.Driver] = {}
_DRIVERS_LOCK = threading.Lock()
_SANITIZE = re.compile(r"[^A-Za-z0-9_]+")
_REL_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Relationship types the engine uses for its own bookkeeping; never a KG relation. Every label, relationship type
#: and property isorag writes is in its namespace (``Isorag*``, ``ISORAG_*``, ``isorag_*``; see docs/security.md).
RESERVED_TYPES = frozenset({"ISORAG_IS_A"})
_RESERVED_PREFIX = "ISORAG_"
#: A relationship type made from a relation name is at most this long (a longer name is cut and keeps a digest
#: suffix, so distinct names stay distinct types); the full name stays in the catalog and on each relationship.
TYPE_MAX = 200
#: isorag 0.1's schema objects, by the label they are on (see GraphStore._drop_v1_schema)
_V1_SCHEMA = {
    "Entity": ("isorag_entity_eid", "isorag_entity_kg_key", "isorag_entity_kg", "isorag_entity_name"),
    "RelationType": ("isorag_reltype_rid", "isorag_reltype_kg"),
    "EntityType": ("isorag_etype_tid", "isorag_etype_kg"),
}
#: Neo4j's range index refuses keys over about 8 kB (measured: 8,000 bytes indexed, 9,000 refused); a name whose
#: UTF-8 form is longer than this is indexed by a digest instead (:func:`name_key`), its full text kept.
NAME_KEY_MAX_BYTES = 4096
#: Neo4j's status codes for a transaction stopped by its timeout: the driver's per-statement timeout
#: (``neo4j.Query(timeout=...)``; ``...ClientConfiguration`` since 5.x) or the server's ``db.transaction.timeout``.
TIMEOUT_CODES = frozenset({
    "Neo.ClientError.Transaction.TransactionTimedOut",
    "Neo.ClientError.Transaction.TransactionTimedOutClientConfiguration",
})
# Refusals of a CREATE ... IF NOT EXISTS that lost a race with the same statement from another process
# (GraphStore.write_schema runs it again).
SCHEMA_RACE_CODES = frozenset({
    "Neo.ClientError.Schema.EquivalentSchemaRuleAlreadyExists",
    "Neo.ClientError.Schema.IndexAlreadyExists",
    "Neo.ClientError.Schema.ConstraintAlreadyExists",
})


def new_kg_id() -> str:
    """A new KG identity (random: two KGs made under one name, one after the other, never share one)."""
    return uuid.uuid4().hex


def stable_id(*parts: str) -> int:
    """A 63-bit id that is the same in every run: entities, relations and types are keyed by it in both stores."""
    h = hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(h, "big") & 0x7FFF_FFFF_FFFF_FFFF


def entity_id(kg: str, key: str) -> int:
    return stable_id("e", kg, key)


def alias_id(kg: str, eid: int, alias: str) -> int:
    """The id of an entity's alias (its row in the aliases collection)."""
    return stable_id("a", kg, str(eid), alias)


def relation_id(kg: str, name: str) -> int:
    return stable_id("r", kg, name)


def type_id(kg: str, name: str) -> int:
    return stable_id("t", kg, name)


def is_relation_type(name: str) -> bool:
    """Whether ``name`` can be a KG relation's relationship type: an identifier, and not one of the engine's own."""
    return bool(_REL_TYPE.fullmatch(name)) and name not in RESERVED_TYPES


def sanitize_relation(name: str) -> str:
    """A relationship type for a relation name: letters, digits and '_' (the original stays in ``r.isorag_name``).

    Names that sanitize to the same text get a short hash suffix, so distinct names stay distinct types; a name
    longer than :data:`TYPE_MAX` is cut and gets the suffix too; isorag's own ``ISORAG_`` prefix is never produced.
    """
    base = _SANITIZE.sub("_", name.strip()).strip("_") or "rel"
    if base[0].isdigit() or base.upper().startswith(_RESERVED_PREFIX):
        base = "r_" + base
    if base == name and len(base) <= TYPE_MAX:
        return base
    return f"{base[:TYPE_MAX]}__{hashlib.blake2b(name.encode('utf-8'), digest_size=3).hexdigest()}"


@overload
def name_key(name: str) -> str: ...


@overload
def name_key(name: None) -> None: ...


def name_key(name: str | None) -> str | None:
    """The indexed form of an entity name (``isorag_name_key``): the name itself, or for a name over
    :data:`NAME_KEY_MAX_BYTES` bytes of UTF-8 a digest of it. A look-up by name sends the name with its key and
    compares the full name too, so a short name that looks like a digest never matches a long one."""
    if name is None:
        return None
    if len(name) * 4 <= NAME_KEY_MAX_BYTES or len(name.encode("utf-8")) <= NAME_KEY_MAX_BYTES:
        return name
    return "digest:blake2b:" + hashlib.blake2b(name.encode("utf-8"), digest_size=20).hexdigest()


@dataclass(frozen=True)
class RelationInfo:
    rid: int
    name: str
    type: str


def get_driver(settings: Neo4jSettings, uri: str) -> neo4j.Driver:
    """One driver per (uri, user, database) per process."""
    key = (uri, settings.user, settings.database or "")
    with _DRIVERS_LOCK:
        drv = _DRIVERS.get(key)
        if drv is None:
            import neo4j

            auth = (settings.user, settings.password) if settings.password else None
            try:
                drv = neo4j.GraphDatabase.driver(
                    uri,
                    auth=auth,
                    max_connection_lifetime=settings.max_connection_lifetime,
                    liveness_check_timeout=settings.liveness_check_timeout,
                    connection_timeout=settings.connection_timeout,
                    keep_alive=True,
                    # the server's hints (e.g. "relationship type ISORAG_IS_A does not exist yet") are not errors
                    notifications_min_severity="OFF",
                )
            except (neo4j.exceptions.ConfigurationError, ValueError) as e:
                # its message quotes the URI, password included: ConfigError masks it, and no chained cause
                # carries it into a traceback
                raise ConfigError(f"Neo4j URI {uri}: {e}") from None
            if not _DRIVERS:
                import atexit

                atexit.register(close_drivers)  # the pooled connections are closed when the process ends
            _DRIVERS[key] = drv
        return drv


def close_drivers() -> None:
    """Close every pooled driver (at exit, or to drop all connections); the next use opens a new one."""
    with _DRIVERS_LOCK:
        for drv in _DRIVERS.values():
            drv.close()
        _DRIVERS.clear()


class GraphStore:
    """A KG (``kg`` name) inside a Neo4j DBMS."""

    def __init__(self, settings: Neo4jSettings | None = None, kg: str = "default", *, start_local: bool = True) -> None:
        self.settings = settings or Neo4jSettings.from_env()
        self.kg = check_kg_name(kg)
        if self.settings.uri:
            self.uri = self.settings.uri
        elif start_local:
            from engine.servers.neo4j import ensure_local_neo4j

            self.uri = ensure_local_neo4j()
        else:
            from engine.servers.neo4j import LocalNeo4j

            self.uri = LocalNeo4j().uri
        self._driver = get_driver(self.settings, self.uri)
        #: the one way this store's caches of the KG follow its version (engine.stores.version)
        self.watch = VersionWatch(self.version)
        self._catalog = Cached(self.watch, self._read_catalog)
        self._checked = False

    # -- low level ---------------------------------------------------------------------------------
    def _run(self, query: str, params: Mapping[str, Any], *, write: bool) -> neo4j.EagerResult:
        import neo4j
        from neo4j import exceptions as nex

        try:
            return self._driver.execute_query(
                query,
                parameters_=dict(params),
                routing_=neo4j.RoutingControl.WRITE if write else neo4j.RoutingControl.READ,
                database_=self.settings.database,
            )
        except (nex.Neo4jError, nex.DriverError, OSError) as e:
            raise self._translate(e) from e

    def _translate(self, e: BaseException) -> IsoragError:
        """A driver error as the engine's typed error, naming the server; a statement stopped by its timeout
        (recognised by Neo4j's status code, :data:`TIMEOUT_CODES`) is :class:`DeadlineExceeded`."""
        from neo4j import exceptions as nex

        if isinstance(e, nex.Neo4jError) and e.code in TIMEOUT_CODES:
            return DeadlineExceeded(f"Neo4j at {self.uri} stopped a statement at its timeout ({e.code})")

        if isinstance(e, (nex.ServiceUnavailable, nex.SessionExpired, OSError)):
            return StoreUnavailableError("Neo4j", self.uri, str(e))
        if isinstance(e, nex.AuthError):
            return StoreUnavailableError("Neo4j", self.uri, f"authentication failed: {e}")
        if isinstance(e, nex.ClientError):
            return StoreError(f"Neo4j at {self.uri} rejected a statement: {e.message}")
        return StoreError(f"Neo4j at {self.uri}: {e}")

    def read(self, query: str | neo4j.Query, **params: Any) -> list[dict[str, Any]]:
        """Run a read-only statement in a read-mode auto-commit transaction (read routing).

        One round trip (RUN and PULL pipelined) instead of a managed transaction's two: retrieval issues
        several small statements per query. Reads are idempotent, so transient failures are retried here.
        """
        import neo4j
        from neo4j import exceptions as nex

        delay = 0.05
        for attempt in range(4):
            try:
                with self._driver.session(database=self.settings.database,
                                          default_access_mode=neo4j.READ_ACCESS) as session:
                    return session.run(query, params).data()
            except (nex.TransientError, nex.SessionExpired, nex.ServiceUnavailable) as e:
                if attempt == 3 or isinstance(e, nex.TransientError) and (
                        e.code in TIMEOUT_CODES or "Terminated" in str(e.code or "")):
                    raise self._translate(e) from e
                time.sleep(delay)
                delay *= 4
            except (nex.Neo4jError, nex.DriverError, OSError) as e:
                raise self._translate(e) from e
        raise AssertionError("unreachable")

    def read_one(self, query: str | neo4j.Query, **params: Any) -> Any:
        """The first column of the first row of a read-only statement, as the driver decodes it (no per-row dict,
        no conversion pass: a statement that collects a large list into one row sends it fastest)."""
        import neo4j
        from neo4j import exceptions as nex

        try:
            with self._driver.session(database=self.settings.database,
                                      default_access_mode=neo4j.READ_ACCESS) as session:
                rec = session.run(query, params).single(strict=True)
                return rec[0]
        except (nex.Neo4jError, nex.DriverError, OSError) as e:
            raise self._translate(e) from e

    def read_stream(self, query: str, consume: Callable[[Iterable[Any]], _T], **params: Any) -> _T:
        """``consume(records)`` over the records of a read-only statement as they arrive (a read-mode auto-commit
        transaction; each record indexable by column): one read of a large result without holding its rows.
        Not retried (``consume`` may have used part of it)."""
        import neo4j
        from neo4j import exceptions as nex

        try:
            with self._driver.session(database=self.settings.database,
                                      default_access_mode=neo4j.READ_ACCESS, fetch_size=5_000) as session:
                return consume(session.run(query, params))
        except (nex.Neo4jError, nex.DriverError, OSError) as e:
            raise self._translate(e) from e

    def read_named(self, name: str, **params: Any) -> list[dict[str, Any]]:
        return self.read(cypher(name), **params)

    def write(self, query: str, **params: Any) -> neo4j.SummaryCounters:
        """Run a statement in a write transaction; returns the summary counters."""
        res = self._run(query, params, write=True)
        return res.summary.counters

    def write_tx(self, statements: Sequence[tuple[str, Any]]) -> list[list[dict[str, Any]]]:
        """Run several statements in one write transaction (all or nothing); returns each one's rows.

        A statement's parameters may be a callable taking the rows of the statements before it (for values that
        depend on what the transaction has written so far): ``(query, lambda prev: {...})``."""
        import neo4j
        from neo4j import exceptions as nex

        def work(tx: Any) -> list[list[dict[str, Any]]]:
            out: list[list[dict[str, Any]]] = []
            for query, params in statements:
                values = params(out) if callable(params) else params
                out.append(tx.run(query, dict(values)).data())
            return out

        try:
            with self._driver.session(database=self.settings.database,
                                      default_access_mode=neo4j.WRITE_ACCESS) as session:
                return session.execute_write(work)
        except (nex.Neo4jError, nex.DriverError, OSError) as e:
            raise self._translate(e) from e

    def version(self) -> dict[str, Any]:
        """The KG's version, one small read: ``seq`` (change sets and loads applied, 0 for none), ``at`` (when,
        ISO 8601 UTC), ``stamp`` (moves when a change set's batch commits and again when the vectors it made stale
        are written: what caches derived from the KG follow, :class:`engine.stores.version.VersionWatch`),
        ``vectors_ts`` (the Milvus timestamp of that last vector write, 0 for none) and ``kg_id`` (the KG's identity,
        None for a KG made before identities)."""
        rows = self.read_named("kg_version", kg=self.kg)
        if not rows:
            return {"seq": 0, "at": None, "stamp": 0, "vectors_ts": 0, "kg_id": None}
        r = rows[0]
        return {"seq": int(r["seq"] or 0), "at": r["at"], "stamp": int(r["stamp"] or 0),
                "vectors_ts": int(r["vectors_ts"] or 0), "kg_id": r["kg_id"]}

    def bump_version(self, reason: str, vectors_ts: int = 0) -> int:
        """A new version after a write that is not a change set (a load, an adoption), once both stores hold it
        (``vectors_ts``: the Milvus timestamp of its last vector write); returns its number."""
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.ensure_schema()
        rows, _ = self._write_rows(cypher("changes_bump"), kg=self.kg, at=at, hash=reason,
                                   vectors_ts=int(vectors_ts or 0), kg_id=new_kg_id())
        self.watch.forget()
        return int(rows[0]["seq"])

    def identity(self) -> str | None:
        """The KG's identity: made with the KG, kept in its version node, recorded by the files made for it (pattern
        generators, triple scorers), so that a file made for another KG of the same name (dropped and made again
        since) is refused. None: the KG has none yet (made before identities; its next write gives it one)."""
        return self.version()["kg_id"]

    def ensure_identity(self) -> str:
        """The KG's identity, made now if it has none (a write: loads and change sets call it)."""
        self.ensure_schema()
        rows, _ = self._write_rows(cypher("kg_identity"), kg=self.kg, kg_id=new_kg_id())
        return str(rows[0]["kg_id"])

    def invalidate(self) -> None:
        """Forget what this process caches of the KG (every cache that follows :attr:`watch`)."""
        self.watch.forget()

    def verify(self) -> None:
        """Fail fast with the URI when the server is dead."""
        from neo4j import exceptions as nex

        try:
            self._driver.verify_connectivity()
        except (nex.ServiceUnavailable, nex.SessionExpired, OSError, ValueError) as e:
            raise StoreUnavailableError("Neo4j", self.uri, str(e)) from e
        except nex.AuthError as e:
            raise StoreUnavailableError("Neo4j", self.uri, f"authentication failed: {e}") from e

    # -- schema ------------------------------------------------------------------------------------
    def ensure_schema(self) -> None:
        if self._checked:
            return
        text = "\n".join(ln for ln in cypher("schema").splitlines() if not ln.strip().startswith("//"))
        for stmt in text.split(";"):
            if stmt.strip():
                self.write_schema(stmt.strip())
        self._drop_v1_schema()
        self.write(cypher("await_indexes"))
        self._checked = True

    def write_schema(self, statement: str) -> None:
        """Run one idempotent schema statement (``CREATE ... IF NOT EXISTS``). Two processes that create the same
        index or constraint at once on a fresh database both pass the ``IF NOT EXISTS`` check, and the one that
        commits second is refused (``EquivalentSchemaRuleAlreadyExists``): the rule it wanted now exists, so the
        statement is run again, which finds it and does nothing. Any other refusal is raised."""
        for attempt in range(5):
            try:
                self.write(statement)
                return
            except StoreError as e:
                if getattr(e.__cause__, "code", None) not in SCHEMA_RACE_CODES or attempt == 4:
                    raise
                time.sleep(0.02 * (attempt + 1))

    def v1_kgs(self) -> list[str]:
        """KGs stored in isorag 0.1's format (labels without the Isorag prefix; ``isorag migrate`` converts them)."""
        return list(self.read_named("schema_v1_data")[0]["kgs"])

    def _drop_v1_schema(self) -> None:
        """Drop isorag 0.1's constraints and indexes once no data of that format is left: they are isorag's, and on
        the plain label ``Entity`` they would constrain a user's own nodes of that label."""
        mine = {name: label for label, names in _V1_SCHEMA.items() for name in names}
        found = [(r["name"], r["kind"]) for r in self.read_named("schema_objects")
                 if mine.get(r["name"]) in r["labels"]]
        if not found or self.v1_kgs():
            return
        for name, kind in sorted(found, key=lambda x: x[1] != "constraint"):  # an owned index goes with its constraint
            self.write(render("drop_constraint" if kind == "constraint" else "drop_index", name=identifier(name)))

    def relation_catalog(self, refresh: bool = False) -> dict[int, RelationInfo]:
        """rid -> relation info for this KG (cached while the KG's version stays: :attr:`watch`)."""
        return self._catalog.get(refresh)

    def _read_catalog(self) -> dict[int, RelationInfo]:
        rows = self.read_named("relation_catalog", kg=self.kg)
        return {r["rid"]: RelationInfo(r["rid"], r["name"], r["type"]) for r in rows}

    def relation_types(self) -> frozenset[str]:
        return frozenset(ri.type for ri in self.relation_catalog().values())

    # -- bulk writes (used by loaders.bulk) ----------------------------------------------------------
    def _write_rows(self, query: str, **params: Any) -> tuple[list[dict[str, Any]], neo4j.SummaryCounters]:
        res = self._run(query, params, write=True)
        return [r.data() for r in res.records], res.summary.counters

    def merge_entities(self, rows: Sequence[Mapping[str, Any]]) -> tuple[int, dict[int, str]]:
        """MERGE a batch of entities; returns (created, {eid: the text its vector is embedded from} of the entities
        that existed before: :func:`engine.stores.texts.entity_text` of their stored name and description).

        Every row's entity whose eid is not in the returned dict was created by this call, under the row's ``name``.
        """
        if not rows:
            return 0, {}
        rows = [{**r, "name_key": name_key(r["name"])} for r in rows]
        out, counters = self._write_rows(cypher("merge_entities"), rows=rows, kg=self.kg)
        return counters.nodes_created, {r["eid"]: entity_text(r["name"], r["description"]) for r in out}

    def update_entities(self, rows: Sequence[Mapping[str, Any]]) -> tuple[int, dict[int, str]]:
        """Entity records (``{eid, key, key_name, name, types, aliases}``): set the name (when the row has one; an
        entity created here is named ``key_name``, its key's default name), add types and aliases (``aliases``: a
        list, may be absent); creates an entity that is missing. Returns (created, {eid: the text its vector is
        embedded from})."""
        if not rows:
            return 0, {}
        rows = [{**r, "name_key": name_key(r.get("name")), "key_name_key": name_key(r["key_name"]),
                 "aliases": list(r.get("aliases") or ())} for r in rows]
        out, counters = self._write_rows(cypher("update_entities"), rows=rows, kg=self.kg)
        return counters.nodes_created, {r["eid"]: entity_text(r["name"], r["description"]) for r in out}

    def merge_entity_types(self, rows: Sequence[Mapping[str, Any]]) -> int:
        if not rows:
            return 0
        return self.write(cypher("merge_entity_types"), rows=list(rows), kg=self.kg).nodes_created

    def merge_relation_types(self, rows: Sequence[Mapping[str, Any]]) -> int:
        if not rows:
            return 0
        n = self.write(cypher("merge_relation_types"), rows=list(rows), kg=self.kg).nodes_created
        self.watch.forget()
        return n

    def merge_relationships(self, groups: Sequence[Mapping[str, Any]],
                            create: Sequence[Mapping[str, Any]] = ()) -> int:
        """Write a batch of triples in one statement, whatever their relationship types.

        ``groups`` (MERGEd) and ``create`` (CREATEd: the caller guarantees that none of these relationships
        exists and that none is listed twice): ``[{"h": head eid, "rels": [{"t": tail eid, "type": rel type,
        "name": relation}]}]``. Types are checked here (identifiers, never a reserved type) before they reach
        Cypher.
        """
        if not groups and not create:
            return 0
        seen: set[str] = set()
        for part in (groups, create):
            for g in part:
                for r in g["rels"]:
                    t = r["type"]
                    if t not in seen:
                        if not is_relation_type(t):
                            raise UnknownRelationError(f"not a valid relationship type: {t!r}")
                        seen.add(t)
        return self.write(cypher("merge_relationships"), merge=list(groups),
                          create=list(create)).relationships_created

    # -- reads --------------------------------------------------------------------------------------
    def stats(self) -> dict[str, int]:
        row = self.read_named("stats", kg=self.kg)[0]
        row["triples"] = self.read_named("count_triples", kg=self.kg)[0]["triples"] or 0
        return {k: int(v or 0) for k, v in row.items()}

    def entities(self, eids: Sequence[int]) -> dict[int, dict[str, Any]]:
        rows = self.read_named("entities_by_eid", eids=list(eids))
        return {r["eid"]: r for r in rows}

    def entities_by_key(self, keys: Sequence[str]) -> list[dict[str, Any]]:
        """``{key, eid, name}`` of the entities of this KG with these source keys (a look-up by eid)."""
        rows = [{"key": k, "eid": entity_id(self.kg, k)} for k in keys]
        return self.read_named("entities_by_key", rows=rows, kg=self.kg) if rows else []

    def entities_by_name(self, names: Sequence[str]) -> list[dict[str, Any]]:
        """``{name, eid, key}`` of the entities of this KG with these display names (several may share one)."""
        rows = [{"name": n, "name_key": name_key(n)} for n in names]
        return self.read_named("entities_by_name", rows=rows, kg=self.kg) if rows else []

    def search_entities(self, text: str, *, limit: int, skip: int = 0) -> list[dict[str, Any]]:
        """``{eid, name, key, degree}`` of this KG's entities whose name contains ``text`` (case folded): exact
        names first, then prefixes, then shorter names; one page."""
        return self.read_named("entity_search", kg=self.kg, text=text.lower(), limit=limit, skip=skip)

    def entity(self, eid: int) -> dict[str, Any] | None:
        """``{eid, name, key, degree}`` of an entity of this KG (degree: its KG triples), or None."""
        rows = self.read_named("entity_degree", kg=self.kg, eid=eid)
        return rows[0] if rows else None

    def neighbours(self, eid: int, *, limit: int, skip: int = 0) -> list[dict[str, Any]]:
        """One page of the KG triples around entity ``eid`` (``head_eid``, ``relation``, ``tail_eid`` and the
        neighbour's ``eid``, ``name``, ``key``), in a stable order."""
        return self.read_named("entity_neighbours", kg=self.kg, eid=eid, limit=limit, skip=skip)

    def list_kgs(self) -> list[dict[str, Any]]:
        """Every KG of this DBMS that has a version (``kg``, ``seq``, ``at``), by name."""
        return self.read_named("kg_list")

    def lock(self, purpose: str, ttl_s: float | None = None) -> KGLock:
        """The KG's writer lease (:class:`KGLock`), to hold while writing it."""
        return KGLock(self, purpose, ttl_s)

    def lock_holder(self) -> dict[str, Any] | None:
        """Who holds the KG's writer lease now (``info``: purpose, pid and host; ``expires_in_s``), or ``None``.
        A read: it never takes or waits for the lease."""
        rows = self.read_named("lock_holder", kg=self.kg)
        return rows[0] if rows else None

    def drop(self, batch: int = 10_000) -> int:
        """Remove this KG from Neo4j: exactly what isorag wrote for it (docs/security.md), other KGs untouched.

        The entities isorag created are deleted with their relationships; an adopted entity (a user's node, see
        :mod:`loaders.existing`) gets back to what it was before the adoption: isorag's label, ``isorag_*``
        properties, type links and the relationships isorag wrote are removed, the user's own are kept. Returns
        the number of nodes deleted or given back."""
        total = 0
        while self.write(cypher("drop_kg_rels_batch"), kg=self.kg, limit=5 * batch).relationships_deleted:
            pass
        while True:
            n = self.write(cypher("drop_kg_batch"), kg=self.kg, limit=batch).nodes_deleted
            total += n
            if n == 0:
                break
        while True:
            rows, _ = self._write_rows(cypher("drop_kg_release_batch"), kg=self.kg, limit=batch)
            n = int(rows[0]["released"]) if rows else 0
            total += n
            if n == 0:
                break
        self.watch.forget()
        return total


#: A writer's lease on a KG lasts this long unless renewed (every third of it, by a thread of the holder): a loader
#: killed with -9 stops renewing, and its KG is free again at most this long after.
LOCK_TTL_S = 60.0


class KGLock:
    """The writer's lease of one KG, held in Neo4j (``(:IsoragLock {kg})``), so that it covers every process and
    machine that writes the KG: loads, adoptions and drops take it; a second writer fails at once with
    :class:`~engine._errors.KGLockedError` naming the holder. Reads never wait for it.

    A context manager: ``with graph.lock("load FILE"): ...``. A daemon thread renews the lease while it is held.
    """

    def __init__(self, graph: "GraphStore", purpose: str, ttl_s: float | None = None) -> None:
        self.graph, self.purpose = graph, purpose
        self.ttl_s = float(ttl_s if ttl_s is not None else os.environ.get("ISORAG_LOCK_TTL_S") or LOCK_TTL_S)
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _acquire(self) -> dict[str, Any]:
        info = f"{self.purpose} (pid {os.getpid()} on {socket.gethostname()})"
        rows, _ = self.graph._write_rows(cypher("lock_acquire"), kg=self.graph.kg, holder=self.holder, info=info,
                                         ttl_ms=int(self.ttl_s * 1000))
        return rows[0]

    def __enter__(self) -> "KGLock":
        self.graph.ensure_schema()  # the lock's key constraint makes two first MERGEs one node
        row = self._acquire()
        if not row["free"]:
            since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime((row["since"] or 0) / 1000))
            raise KGLockedError(self.graph.kg, f"{row['info']} since {since}", (row["expires_in_ms"] or 0) / 1000)
        self._thread = threading.Thread(target=self._renew, name="isorag-kg-lock", daemon=True)
        self._thread.start()
        return self

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            try:
                if not self._acquire()["free"]:  # taken over after a stall longer than the lease: say so once
                    import warnings

                    warnings.warn(f"isorag lost the writer lease of KG {self.graph.kg!r}", RuntimeWarning,
                                  stacklevel=1)
                    return
            except (StoreError, DeadlineExceeded):
                pass  # the writer's own statements fail too and report it

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.graph.write(cypher("lock_release"), kg=self.graph.kg, holder=self.holder)
        except (StoreError, DeadlineExceeded):
            pass  # the lease expires by itself
