"""The exception tree of isorag.

    IsoragError
    +-- ConfigError                 bad or missing configuration
    |   +-- OfflineImportError      an offline import that cannot run here (a database that is not empty, ...)
    |   +-- KGNotFoundError         a read of a KG that is not in the stores (names both, says which holds it)
    +-- StoreError                  Neo4j or Milvus
    |   +-- StoreUnavailableError   dead or unreachable server (names the URI)
    |   +-- SchemaMismatchError     e.g. embedding dimension vs an existing collection
    |   +-- LocalServerError        the embedded local Neo4j / Milvus failed to start or stop
    |   +-- KGLockedError           another process is writing this KG (names the holder)
    +-- InputError                  bad user input
    |   +-- MalformedInputError     a bad line in a source file (file:line: reason)
    |   +-- PatternError            a pattern that is not valid
    |   |   +-- PatternParseError   LLM or JSON text that is not a pattern (keeps the text)
    |   +-- UnknownRelationError    a relation that is not in the KG's schema
    +-- DeadlineExceeded            a per-query deadline ran out
    +-- LLMError                    the LLM endpoint failed or refused
    +-- CheckpointError             a scorer checkpoint that does not fit this KG / model

Callers can catch at any depth; driver errors are re-raised ``from`` the original. Messages never carry a
secret: every message (and the ``uri`` and ``text`` an error keeps) goes through :func:`engine._secrets.scrub`.
"""

from __future__ import annotations

from pathlib import Path

from engine._secrets import mask_uri, scrub


class IsoragError(Exception):
    """Root of every error raised by isorag."""

    def __init__(self, *args: object) -> None:
        # a driver's message may quote a URI with its password, or a key: none of it goes further
        super().__init__(*(scrub(a) for a in args))


class ConfigError(IsoragError):
    """Configuration is missing or invalid."""


class OfflineImportError(ConfigError):
    """The offline import cannot run here: the local Neo4j's database is not empty, or the engine uses a remote
    server (see :mod:`loaders.offline`)."""


class KGNotFoundError(ConfigError):
    """A read of a KG that does not exist: in neither store, or only in the one that the read does not need.

    ``in_neo4j`` / ``in_milvus`` say what each store holds of it; reads and change sets never create a KG, loads
    and syncs do.
    """

    def __init__(self, kg: str, neo4j_uri: str, milvus_uri: str, *, in_neo4j: bool = False,
                 in_milvus: bool = False) -> None:
        self.kg, self.neo4j_uri, self.milvus_uri = kg, neo4j_uri, milvus_uri
        self.in_neo4j, self.in_milvus = in_neo4j, in_milvus
        if in_neo4j:
            msg = (f"KG {kg!r} exists in Neo4j at {neo4j_uri} but has no vectors in Milvus at {milvus_uri}: "
                   "run its load again to embed it")
        elif in_milvus:
            msg = (f"KG {kg!r} has vectors in Milvus at {milvus_uri} but does not exist in Neo4j at {neo4j_uri}: "
                   f"drop it (isorag drop --kg {kg} --yes) and load it again")
        else:
            msg = (f"KG {kg!r} does not exist in Neo4j at {neo4j_uri} nor in Milvus at {milvus_uri}: "
                   f"load it first (isorag load --kg {kg} FILE)")
        super().__init__(msg)


class StoreError(IsoragError):
    """An error from one of the stores (Neo4j, Milvus)."""


class StoreUnavailableError(StoreError):
    """A server cannot be reached."""

    def __init__(self, what: str, uri: str, reason: str = "") -> None:
        self.what, self.uri, self.reason = what, mask_uri(uri), scrub(reason)
        msg = f"{what} is unavailable at {uri}"
        super().__init__(msg + (f": {reason}" if reason else ""))


class SchemaMismatchError(StoreError):
    """What is stored does not fit what the engine was configured with."""


class LocalServerError(StoreError):
    """The embedded local server could not be started, found or stopped."""


class KGLockedError(StoreError):
    """Another process holds the KG's writer lease (a load, an adoption, a drop): one writer per KG at a time."""

    def __init__(self, kg: str, holder: str, expires_in_s: float) -> None:
        self.kg, self.holder, self.expires_in_s = kg, holder, expires_in_s
        super().__init__(
            f"KG {kg!r} is being written by {holder}; wait for it to finish (if that process died, its lease "
            f"expires in {max(0.0, expires_in_s):.0f} s)")


class InputError(IsoragError):
    """Input that the engine cannot use."""


class MalformedInputError(InputError):
    """A malformed record in a source file, reported as ``file:line: reason``."""

    def __init__(self, path: str | Path, line: int, reason: str) -> None:
        self.path, self.line, self.reason = str(path), line, reason
        super().__init__(f"{self.path}:{line}: {reason}")


class PatternError(InputError):
    """A pattern that is not valid (empty, all-unknown and untyped, bad triple...)."""


class PatternParseError(PatternError):
    """Text (from an LLM or a user) that cannot be parsed into a pattern."""

    def __init__(self, message: str, text: str = "") -> None:
        self.text = scrub(text)
        super().__init__(message)


class UnknownRelationError(InputError):
    """A relation name or type that the KG's schema does not have."""


class DeadlineExceeded(IsoragError):
    """A per-query deadline expired before the work was done."""


class LLMError(IsoragError):
    """The LLM endpoint failed, timed out or refused."""

    def __init__(self, message: str, text: str = "") -> None:
        self.text = scrub(text)
        super().__init__(message)


class CheckpointError(IsoragError):
    """A scorer checkpoint that cannot be used with this KG or embedding model."""


__all__ = [
    "IsoragError",
    "ConfigError",
    "OfflineImportError",
    "KGNotFoundError",
    "StoreError",
    "StoreUnavailableError",
    "SchemaMismatchError",
    "LocalServerError",
    "KGLockedError",
    "InputError",
    "MalformedInputError",
    "PatternError",
    "PatternParseError",
    "UnknownRelationError",
    "DeadlineExceeded",
    "LLMError",
    "CheckpointError",
]
