"""The KG in Neo4j: one driver per process, read routing for retrieval, typed relationships.

Every statement comes from ``cypher/`` (see :mod:`engine._cypher`); every value is a parameter.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from engine._config import Neo4jSettings, check_kg_name
from engine._cypher import cypher
from engine._errors import ConfigError, StoreError, StoreUnavailableError, UnknownRelationError

_DRIVERS: dict[tuple[str, str, str], Any] = {}
_DRIVERS_LOCK = threading.Lock()
_SANITIZE = re.compile(r"[^A-Za-z0-9_]+")
_REL_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Relationship types the engine uses for its own bookkeeping; never a KG relation.
RESERVED_TYPES = frozenset({"IS_A"})


def stable_id(*parts: str) -> int:
    """A 63-bit id that is the same in every run: entities, relations and types are keyed by it in both stores."""
    h = hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(h, "big") & 0x7FFF_FFFF_FFFF_FFFF


def entity_id(kg: str, key: str) -> int:
    return stable_id("e", kg, key)


def relation_id(kg: str, name: str) -> int:
    return stable_id("r", kg, name)


def type_id(kg: str, name: str) -> int:
    return stable_id("t", kg, name)


def sanitize_relation(name: str) -> str:
    """A relationship type for a relation name: letters, digits and '_' (the original stays in ``r.name``).

    Names that sanitize to the same text get a short hash suffix, so distinct names stay distinct types.
    """
    base = _SANITIZE.sub("_", name.strip()).strip("_") or "rel"
    if base[0].isdigit():
        base = "r_" + base
    if base in RESERVED_TYPES:
        base = base + "_"
    if base == name:
        return base
    return f"{base}__{hashlib.blake2b(name.encode('utf-8'), digest_size=3).hexdigest()}"


@dataclass(frozen=True)
class RelationInfo:
    rid: int
    name: str
    type: str


def get_driver(settings: Neo4jSettings, uri: str) -> Any:
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
                    # the server's hints (e.g. "relationship type IS_A does not exist yet") are not errors
                    notifications_min_severity="OFF",
                )
            except (neo4j.exceptions.ConfigurationError, ValueError) as e:
                # its message quotes the URI, password included: ConfigError masks it, and no chained cause
                # carries it into a traceback
                raise ConfigError(f"Neo4j URI {uri}: {e}") from None
            _DRIVERS[key] = drv
        return drv


def close_drivers() -> None:
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
            from engine.local_neo4j import ensure_local_neo4j

            self.uri = ensure_local_neo4j()
        else:
            from engine.local_neo4j import LocalNeo4j

            self.uri = LocalNeo4j().uri
        self._driver = get_driver(self.settings, self.uri)
        self._catalog: dict[int, RelationInfo] | None = None
        self._checked = False

    # -- low level ---------------------------------------------------------------------------------
    def _run(self, query: str, params: Mapping[str, Any], *, write: bool) -> Any:
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

    def _translate(self, e: BaseException) -> StoreError:
        """A driver error as the engine's typed error, naming the server."""
        from neo4j import exceptions as nex

        if isinstance(e, (nex.ServiceUnavailable, nex.SessionExpired, OSError)):
            return StoreUnavailableError("Neo4j", self.uri, str(e))
        if isinstance(e, nex.AuthError):
            return StoreUnavailableError("Neo4j", self.uri, f"authentication failed: {e}")
        if isinstance(e, nex.ClientError):
            return StoreError(f"Neo4j at {self.uri} rejected a statement: {e.message}")
        return StoreError(f"Neo4j at {self.uri}: {e}")

    def read(self, query: Any, **params: Any) -> list[dict[str, Any]]:
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
                if attempt == 3 or isinstance(e, nex.TransientError) and "Terminated" in str(e.code or ""):
                    raise self._translate(e) from e
                time.sleep(delay)
                delay *= 4
            except (nex.Neo4jError, nex.DriverError, OSError) as e:
                raise self._translate(e) from e
        raise AssertionError("unreachable")

    def read_named(self, name: str, **params: Any) -> list[dict[str, Any]]:
        return self.read(cypher(name), **params)

    def write(self, query: str, **params: Any) -> Any:
        """Run a statement in a write transaction; returns the summary counters."""
        res = self._run(query, params, write=True)
        return res.summary.counters

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
                self.write(stmt.strip())
        self.write("CALL db.awaitIndexes(300)")
        self._checked = True

    def relation_catalog(self, refresh: bool = False) -> dict[int, RelationInfo]:
        """rid -> relation info for this KG (cached; refreshed after loads)."""
        if self._catalog is None or refresh:
            rows = self.read_named("relation_catalog", kg=self.kg)
            self._catalog = {r["rid"]: RelationInfo(r["rid"], r["name"], r["type"]) for r in rows}
        return self._catalog

    def relation_types(self) -> frozenset[str]:
        return frozenset(ri.type for ri in self.relation_catalog().values())

    def check_types(self, types: Iterable[str]) -> list[str]:
        """Validate relationship types against this KG's catalog."""
        allowed = self.relation_types()
        out = []
        for t in types:
            if t not in allowed:
                raise UnknownRelationError(f"relationship type {t!r} is not in the schema of KG {self.kg!r}")
            out.append(t)
        return out

    # -- bulk writes (used by loaders.bulk) ----------------------------------------------------------
    def _write_rows(self, query: str, **params: Any) -> tuple[list[dict[str, Any]], Any]:
        res = self._run(query, params, write=True)
        return [r.data() for r in res.records], res.summary.counters

    def merge_entities(self, rows: Sequence[Mapping[str, Any]]) -> tuple[int, dict[int, str]]:
        """MERGE a batch of entities; returns (created, {eid: stored name} of the entities that existed before).

        Every row's entity whose eid is not in the returned dict was created by this call, under the row's ``name``.
        """
        if not rows:
            return 0, {}
        out, counters = self._write_rows(cypher("merge_entities"), rows=list(rows), kg=self.kg)
        return counters.nodes_created, {r["eid"]: r["name"] for r in out}

    def update_entities(self, rows: Sequence[Mapping[str, Any]]) -> tuple[int, dict[int, str]]:
        if not rows:
            return 0, {}
        out, counters = self._write_rows(cypher("update_entities"), rows=list(rows), kg=self.kg)
        return counters.nodes_created, {r["eid"]: r["name"] for r in out}

    def merge_entity_types(self, rows: Sequence[Mapping[str, Any]]) -> int:
        if not rows:
            return 0
        return self.write(cypher("merge_entity_types"), rows=list(rows), kg=self.kg).nodes_created

    def merge_relation_types(self, rows: Sequence[Mapping[str, Any]]) -> int:
        if not rows:
            return 0
        n = self.write(cypher("merge_relation_types"), rows=list(rows), kg=self.kg).nodes_created
        self._catalog = None
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
                        if not _REL_TYPE.fullmatch(t) or t in RESERVED_TYPES:
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

    def drop(self, batch: int = 10_000) -> int:
        """Delete this KG's nodes and relationships (other KGs untouched)."""
        total = 0
        while self.write(cypher("drop_kg_rels_batch"), kg=self.kg, limit=5 * batch).relationships_deleted:
            pass
        while True:
            n = self.write(cypher("drop_kg_batch"), kg=self.kg, limit=batch).nodes_deleted
            total += n
            if n == 0:
                break
        self._catalog = None
        return total

