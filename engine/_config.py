"""Engine configuration: small immutable objects with named defaults, read from arguments or the environment."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from engine._errors import ConfigError
from engine._secrets import mask_uri, masked_repr, register

DEFAULT_KG = "default"
DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
#: SimGRAG's MetaQA defaults: k(n) = k(r) = 16 candidates, k = 3 subgraphs.
DEFAULT_K_NODE = 16
DEFAULT_K_REL = 16
DEFAULT_K_TYPE = 16
DEFAULT_K = 3
#: Few-shot examples: the bundled ones for the demo KG, 12 shots as in SimGRAG.
DEFAULT_FEWSHOT = "demo"
DEFAULT_SHOTS = 12
#: The longest question or claim taken (characters): a question is a sentence or a few; far longer text is no
#: question, and every stage's work grows with it (linking reads every span).
DEFAULT_MAX_QUESTION_CHARS = 2_000
#: The in-process graph read replica's memory guard, per KG (engine.retrieval.replica): about 40 MB holds a
#: KG of a million relationships.
DEFAULT_GRAPH_CACHE_MB = 512
#: The memory guard of the in-process table of name vectors kept beside the replica (engine.retrieval.name_vectors),
#: per KG: MetaQA's 43k entities at 384 dimensions take 66 MB.
DEFAULT_NAME_VECTOR_CACHE_MB = 256
#: Which path serves a query's graph stage (engine.retrieval.graph_paths).
GRAPH_PATHS = ("auto", "replica", "statement", "expand")

#: A letter, then letters and digits in words joined by single underscores: such a name is its own Milvus
#: collection prefix (``<kg>__<model>__<kind>``, engine.stores.vectors.collection_name), and since it never holds ``__``
#: nor ends with ``_``, two KGs can never share a collection (``a_`` and ``a``, ``a__b`` and ``a_b`` would).
_KG_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*")
KG_NAME_MAX = 64
#: URI schemes the drivers speak: Bolt for Neo4j (the engine's statements need it; the driver's HTTP preview
#: fails inside with a KeyError), gRPC over http(s)/tcp/unix for Milvus.
NEO4J_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")
MILVUS_SCHEMES = ("http", "https", "tcp", "unix")
_DEVICE = re.compile(r"auto|cpu|mps|cuda(:\d+)?")


def isorag_home() -> Path:
    """Where local servers keep their data (``$ISORAG_HOME``, default ``~/.isorag``)."""
    return Path(os.environ.get("ISORAG_HOME") or Path.home() / ".isorag").expanduser()


def _check_uri(uri: Any, what: str, var: str, schemes: tuple[str, ...], example: str) -> None:
    from urllib.parse import urlsplit

    why = ""
    if not isinstance(uri, str):
        why = f"not a string but {type(uri).__name__}"
    else:
        try:
            parts = urlsplit(uri)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number in 0-65535
        except ValueError as e:
            why = str(e)
        else:
            if parts.scheme.lower() not in schemes:
                why = f"scheme {parts.scheme!r} is not supported" if parts.scheme else "no scheme"
            elif not (parts.hostname or parts.scheme.lower() == "unix" and parts.path):
                why = "no host"
    if why:
        shown = mask_uri(uri) if isinstance(uri, str) else uri
        raise ConfigError(f"bad {what} URI {shown!r} ({var}): {why}; use {', '.join(s + '://' for s in schemes)}"
                          f", e.g. {example}")


def check_neo4j_uri(uri: str) -> str:
    _check_uri(uri, "Neo4j", "NEO4J_URI", NEO4J_SCHEMES, "bolt://127.0.0.1:7687")
    return uri


def check_milvus_uri(uri: str) -> str:
    """A Milvus server's URI, or the path of a Milvus Lite file (``*.db``)."""
    if isinstance(uri, str) and uri.endswith(".db") and "://" not in uri:
        return uri
    _check_uri(uri, "Milvus", "MILVUS_URI", MILVUS_SCHEMES, "http://127.0.0.1:19530 (or a Milvus Lite file *.db)")
    return uri


def check_kg_name(kg: str) -> str:
    """``kg`` if it is a valid KG name (see ``_KG_NAME``), else a ConfigError saying why."""
    if not isinstance(kg, str) or len(kg) > KG_NAME_MAX or not _KG_NAME.fullmatch(kg):
        raise ConfigError(
            f"invalid KG name {kg!r}: use a letter, then letters and digits, single '_' between words "
            f"(no '__', no '_' at the end; at most {KG_NAME_MAX} characters)"
        )
    return kg


@dataclass(frozen=True)
class Neo4jSettings:
    """Where the KG lives. ``uri=None`` means the embedded local server (started on demand)."""

    uri: str | None = None
    user: str = "neo4j"
    password: str = ""
    database: str | None = None
    #: Recycle pooled connections before idle load balancers cut them (Aura closes idle ones after ~60 min).
    max_connection_lifetime: float = 1800.0
    liveness_check_timeout: float = 30.0
    connection_timeout: float = 10.0

    def __post_init__(self) -> None:
        register(self.password)
        if self.uri is not None:
            check_neo4j_uri(self.uri)

    def __repr__(self) -> str:
        return masked_repr(self, secret=("password",), uris=("uri",))

    @classmethod
    def from_env(cls, **overrides: Any) -> "Neo4jSettings":
        env: dict[str, Any] = {
            "uri": os.environ.get("NEO4J_URI") or None,
            "user": os.environ.get("NEO4J_USER", os.environ.get("NEO4J_USERNAME", "neo4j")),
            "password": os.environ.get("NEO4J_PASSWORD", ""),
            "database": os.environ.get("NEO4J_DATABASE") or None,
        }
        env.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**env)


@dataclass(frozen=True)
class MilvusSettings:
    """Where the embeddings live. ``uri=None`` means the embedded local Milvus standalone server."""

    uri: str | None = None
    #: ``user:password`` or an API key; empty for the local server (its secret is found, see local_token)
    token: str = ""

    def __post_init__(self) -> None:
        register(self.token)
        if self.uri is not None:
            check_milvus_uri(self.uri)

    def __repr__(self) -> str:
        return masked_repr(self, secret=("token",), uris=("uri",))

    @classmethod
    def from_env(cls, **overrides: Any) -> "MilvusSettings":
        env: dict[str, Any] = {"uri": os.environ.get("MILVUS_URI") or None, "token": os.environ.get("MILVUS_TOKEN", "")}
        env.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**env)


@dataclass(frozen=True)
class MatchSettings:
    """Candidate sizes and bounds on the work of one retrieval (docs/architecture.md)."""

    k_node: int = DEFAULT_K_NODE
    k_rel: int = DEFAULT_K_REL
    k_type: int = DEFAULT_K_TYPE
    k: int = DEFAULT_K
    #: which pattern items must map to distinct KG items: ``True`` or ``"nodes"`` (subgraph isomorphism:
    #: distinct nodes, hence distinct relationships; SimGRAG's definition), ``"edges"`` (distinct relationships,
    #: Cypher's own pattern semantics, and unknowns apart from the named entities: an unknown may bind the entity
    #: of another unknown when a different relationship leads there, as MetaQA's answers do), ``False`` or
    #: ``"none"`` (homomorphism)
    injective: bool | str = True
    #: ``False``: a pattern edge matches a relationship in either direction; among subgraphs of equal GSD those
    #: with fewer edges against the pattern's direction come first (a tie-break, never a change of GSD)
    directed: bool = False
    deadline_s: float = 30.0
    #: wildcard expansions (unknown relation AND unknown node) return at most this many neighbours per KG node
    degree_cap: int = 10_000
    #: states popped from the queue and expanded by one Cypher query
    batch_size: int = 256
    #: narrow an unknown node with two or more named neighbours to the entities adjacent to all of them
    #: (one query per pattern; exact, and the search of conjunctions and stars starts from the intersection)
    narrow: bool = True
    #: the graph stage's path (engine.retrieval.graph_paths): ``"auto"`` (the in-process replica when it is fresh,
    #: else one statement per query while it is built), ``"replica"`` (wait for the replica), ``"statement"`` (one
    #: statement per query and cost tier) or ``"expand"`` (one statement per batch of expansions); the same top-k
    graph: str = "auto"

    def __post_init__(self) -> None:
        for name in ("k_node", "k_rel", "k_type", "k", "degree_cap", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name} must be a positive integer, got {v!r}")
        if self.k_node > 16384 or self.k_rel > 16384 or self.k_type > 16384:
            raise ConfigError("k_node, k_rel and k_type are at most 16384 (Milvus' topk limit)")
        d = self.deadline_s
        # nan passes a "<= 0" test and inf never expires: both refused
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not math.isfinite(d) or d <= 0:
            raise ConfigError(f"deadline_s must be a finite number of seconds > 0, got {d!r}")
        if self.injective not in (True, False, "nodes", "edges", "none"):
            raise ConfigError(f"injective must be True, False, 'nodes', 'edges' or 'none', got {self.injective!r}")
        if self.graph not in GRAPH_PATHS:
            raise ConfigError(f"graph must be one of {', '.join(GRAPH_PATHS)}, got {self.graph!r}")

    @property
    def distinct(self) -> str:
        """``"nodes"``, ``"edges"`` or ``"none"``: what :attr:`injective` asks to be distinct."""
        return injective_mode(self.injective)


def injective_mode(value: bool | str) -> str:
    """Normalize an ``injective`` setting to ``"nodes"``, ``"edges"`` or ``"none"``."""
    if value is True or value == "nodes":
        return "nodes"
    if value is False or value == "none":
        return "none"
    if value == "edges":
        return "edges"
    raise ConfigError(f"injective must be True, False, 'nodes', 'edges' or 'none', got {value!r}")


@dataclass(frozen=True)
class VerifySettings:
    """How a claim is judged without an LLM (see :mod:`engine.answering`).

    A known element of the claim (an entity, a relation) is *matched* by a KG item when that item is the nearest
    one to the element's text (within ``tie``) and no farther than ``threshold`` (entities) or
    ``relation_threshold`` (relations). Distances are Euclidean between normalized embeddings, in [0, 2].

    Defaults, measured with all-MiniLM-L6-v2 (an uncased model) on the demo KG: case and spacing variants are
    0 apart, "The Ritz" / "Ritz" 0.41, while different entities are rarely closer than 0.55 ("Thomas Mann" /
    "Michael Mann" 0.67, nearest other director p5 0.76); so ``threshold=0.5`` tells "the KG has this entity"
    from "it only has something that looks like it". Adjacent years can be only 0.40 apart, which no absolute
    threshold separates: hence the nearest-item rule. Relations are paraphrased more ("in language" /
    "in_language" 0.87, "director" / "directed_by" 0.99) while unrelated relations are 1.17 apart on average:
    ``relation_threshold=1.0``, the nearest-item rule again choosing among close ones.
    """

    threshold: float = 0.5
    relation_threshold: float = 1.0
    tie: float = 0.02

    def __post_init__(self) -> None:
        for name in ("threshold", "relation_threshold", "tie"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 2:
                raise ConfigError(f"verify {name} must be a distance in [0, 2], got {v!r}")


@dataclass(frozen=True)
class ScoringSettings:
    """How a trained triple scorer (``EngineConfig.scorer``) is used by :meth:`Engine.ask` (docs/triple-scorer.md).

    ``hops`` / ``max_edges``: the neighbourhood fetched around the anchors (None: what the checkpoint was trained
    with). ``p``, ``tau``, ``k_min``, ``k_max``: QSRAG's adaptive top-p selection of the evidence triples
    (p = 0.9, [50, 200] as in the paper's main text; ``tau`` the optional sigmoid pre-filter). Entity linking
    (no pattern matched): word n-grams up to ``link_max_ngram`` words, hits within ``link_threshold``
    (Euclidean distance of normalized embeddings), at most ``max_anchors`` anchors.
    """

    hops: int | None = None
    max_edges: int | None = None
    p: float = 0.9
    tau: float | None = None
    k_min: int = 50
    k_max: int = 200
    link_threshold: float = 0.45
    link_max_ngram: int = 5
    max_anchors: int = 3
    max_answers: int = 20
    #: entity vectors cached per process (LRU)
    cache_entities: int = 200_000

    def __post_init__(self) -> None:
        if self.hops is not None and (not isinstance(self.hops, int) or self.hops < 0):
            raise ConfigError(f"scoring hops must be an int >= 0, got {self.hops!r}")
        if self.max_edges is not None and (not isinstance(self.max_edges, int) or self.max_edges < 1):
            raise ConfigError(f"scoring max_edges must be a positive int, got {self.max_edges!r}")
        if not 0 < self.p <= 1:
            raise ConfigError(f"scoring p must lie in (0, 1], got {self.p!r}")
        if not (isinstance(self.k_min, int) and isinstance(self.k_max, int) and 0 <= self.k_min <= self.k_max):
            raise ConfigError(f"scoring needs 0 <= k_min <= k_max, got {self.k_min!r}, {self.k_max!r}")
        if not 0 <= self.link_threshold <= 2:
            raise ConfigError(f"link_threshold must be a distance in [0, 2], got {self.link_threshold!r}")
        for name in ("link_max_ngram", "max_anchors", "max_answers", "cache_entities"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ConfigError(f"scoring {name} must be a positive int, got {v!r}")


@dataclass(frozen=True)
class EngineConfig:
    kg: str = DEFAULT_KG
    neo4j: Neo4jSettings = field(default_factory=Neo4jSettings)
    milvus: MilvusSettings = field(default_factory=MilvusSettings)
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    device: str = "auto"
    match: MatchSettings = field(default_factory=MatchSettings)
    #: few-shot examples for the LLM prompts: a bundled name ("demo"), a directory holding
    #: ``pattern.jsonl``, ``claim.jsonl``, ``answer.jsonl``, ``verify.jsonl`` (or ``<name>_<kind>.jsonl``),
    #: or None for zero-shot prompts
    fewshot: str | None = DEFAULT_FEWSHOT
    shots: int = DEFAULT_SHOTS
    verify: VerifySettings = field(default_factory=VerifySettings)
    #: a triple-scorer checkpoint (``isorag train-scorer``); None: no scorer
    scorer: str | None = None
    scoring: ScoringSettings = field(default_factory=ScoringSettings)
    #: a pattern-generator file (``isorag train-generator``); None: the KG's default file when it exists
    #: (``$ISORAG_HOME/generators/<kg>.pt``), else no generator
    generator: str | None = None
    #: who writes a question's pattern when none is given: "auto" (the learned generator without an LLM, or
    #: when sure enough), "llm" or "learned" (:mod:`engine.learned.router`)
    route: str = "auto"
    #: the longest question or claim (characters) that ask, verify and propose take; a longer one is an InputError
    max_question_chars: int = DEFAULT_MAX_QUESTION_CHARS
    #: the memory guard of the in-process graph read replica, in MB per KG (0: no replica; queries then take the
    #: one-statement path)
    graph_cache_mb: int = DEFAULT_GRAPH_CACHE_MB
    #: the memory guard of the table of name vectors kept beside the replica, in MB per KG (0: no table; named
    #: nodes then read their entities' stored vectors from Milvus, one round trip a query)
    name_vector_cache_mb: int = DEFAULT_NAME_VECTOR_CACHE_MB

    def __post_init__(self) -> None:
        check_kg_name(self.kg)
        if isinstance(self.max_question_chars, bool) or not isinstance(self.max_question_chars, int) \
                or not 1 <= self.max_question_chars <= 1_000_000:
            raise ConfigError(f"max_question_chars must be an int in [1, 1000000], got {self.max_question_chars!r}")
        if self.route not in ("auto", "llm", "learned"):
            raise ConfigError(f"route must be auto, llm or learned, got {self.route!r}")
        if not isinstance(self.device, str) or not _DEVICE.fullmatch(self.device.strip().lower()):
            raise ConfigError(f"device must be auto, cpu, mps, cuda or cuda:N, got {self.device!r}")
        if isinstance(self.shots, bool) or not isinstance(self.shots, int) or self.shots < 0:
            raise ConfigError(f"shots must be an int >= 0, got {self.shots!r}")
        g = self.graph_cache_mb
        if isinstance(g, bool) or not isinstance(g, int) or g < 0:
            raise ConfigError(f"graph_cache_mb must be an int >= 0 (0: no replica), got {g!r}")
        nv = self.name_vector_cache_mb
        if isinstance(nv, bool) or not isinstance(nv, int) or nv < 0:
            raise ConfigError(f"name_vector_cache_mb must be an int >= 0 (0: no table of name vectors), got {nv!r}")

    @classmethod
    def from_env(cls, **overrides: Any) -> "EngineConfig":
        """From ``ISORAG_KG``, ``NEO4J_*``, ``MILVUS_*``, ``ISORAG_EMBEDDING_MODEL``, ``ISORAG_DEVICE``,
        ``ISORAG_FEWSHOT``, ``ISORAG_SHOTS``, ``ISORAG_VERIFY_THRESHOLD``, ``ISORAG_SCORER``, ``ISORAG_GENERATOR``,
        ``ISORAG_ROUTE``, ``ISORAG_MAX_QUESTION_CHARS``, ``ISORAG_GRAPH_CACHE_MB``, ``ISORAG_NAME_VECTOR_CACHE_MB`` and
        ``ISORAG_GRAPH`` (the graph stage's path); keyword
        ``overrides`` win. A bad value is a ConfigError naming its variable."""
        env = os.environ
        kw: dict[str, Any] = {}

        def setting(var: str, key: str, make: Any, empty_is_unset: bool = True) -> None:
            raw = env.get(var)
            if raw is None or empty_is_unset and not raw.strip() or overrides.get(key) is not None:
                return
            try:
                kw[key] = make(raw)
            except (ConfigError, ValueError) as e:
                raise ConfigError(f"{var}={raw!r}: {e}") from None

        kw["kg"] = DEFAULT_KG
        setting("ISORAG_KG", "kg", check_kg_name)
        if overrides.get("neo4j") is None:
            kw["neo4j"] = Neo4jSettings.from_env()  # (a bad NEO4J_URI / MILVUS_URI is named by the check)
        if overrides.get("milvus") is None:
            kw["milvus"] = MilvusSettings.from_env()
        setting("ISORAG_EMBEDDING_MODEL", "embedding_model", str.strip)
        setting("ISORAG_DEVICE", "device", _check_device)
        setting("ISORAG_FEWSHOT", "fewshot", lambda v: v.strip() or None, empty_is_unset=False)
        setting("ISORAG_SHOTS", "shots", _int_at_least(0))
        setting("ISORAG_VERIFY_THRESHOLD", "verify", lambda v: VerifySettings(threshold=float(v)))
        setting("ISORAG_SCORER", "scorer", str.strip)
        setting("ISORAG_GENERATOR", "generator", str.strip)
        setting("ISORAG_ROUTE", "route", _check_route)
        setting("ISORAG_MAX_QUESTION_CHARS", "max_question_chars", _int_at_least(1))
        setting("ISORAG_GRAPH_CACHE_MB", "graph_cache_mb", _int_at_least(0))
        setting("ISORAG_NAME_VECTOR_CACHE_MB", "name_vector_cache_mb", _int_at_least(0))
        if overrides.get("match") is None:
            setting("ISORAG_GRAPH", "match", lambda v: MatchSettings(graph=v.strip()))
        kw.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**kw)

    def with_(self, **changes: Any) -> "EngineConfig":
        return replace(self, **changes)


def _check_route(value: str) -> str:
    if value.strip() not in ("auto", "llm", "learned"):
        raise ConfigError("use auto, llm or learned")
    return value.strip()


def _check_device(value: str) -> str:
    if not _DEVICE.fullmatch(value.strip().lower()):
        raise ConfigError("use auto, cpu, mps, cuda or cuda:N")
    return value.strip()


def _int_at_least(lo: int) -> Any:
    def parse(value: str) -> int:
        try:
            n = int(value.strip())
        except ValueError:
            raise ConfigError("not an integer") from None
        if n < lo:
            raise ConfigError(f"must be at least {lo}")
        return n
    return parse


_MEMORY = re.compile(r"\s*\d+\s*[kmgt]?i?b?\s*", re.IGNORECASE)
_LOG_LEVELS = ("debug", "info", "warn", "error", "fatal")


def check_environment() -> None:
    """Check the variables that the local servers read (``ISORAG_HOME``, ``ISORAG_NEO4J_*``,
    ``ISORAG_MILVUS_*``), the engine's own (:meth:`EngineConfig.from_env`) and the LLM's
    (:meth:`engine.llm.LLMConfig.from_env`), before anything starts.

    Raises a ConfigError naming the first bad variable."""
    env = os.environ
    for var in ("ISORAG_NEO4J_PORT", "ISORAG_MILVUS_PORT"):
        raw = env.get(var, "").strip()
        if raw and not (raw.isdigit() and 1 <= int(raw) <= 65535):
            raise ConfigError(f"{var}={raw!r}: not a port number (1-65535)")
    for var in ("ISORAG_NEO4J_HEAP", "ISORAG_NEO4J_PAGECACHE"):
        raw = env.get(var, "")
        if raw and not _MEMORY.fullmatch(raw):
            raise ConfigError(f"{var}={raw!r}: not a memory size (use e.g. 512m, 2g)")
    for var in ("ISORAG_HOME", "ISORAG_NEO4J_HOME"):
        raw = env.get(var, "")
        if raw and Path(raw).expanduser().exists() and not Path(raw).expanduser().is_dir():
            raise ConfigError(f"{var}={raw!r}: exists and is not a directory")
    raw = env.get("ISORAG_MILVUS_LOG_LEVEL", "")
    if raw and raw.strip().lower() not in _LOG_LEVELS:
        raise ConfigError(f"ISORAG_MILVUS_LOG_LEVEL={raw!r}: use one of {', '.join(_LOG_LEVELS)}")
    EngineConfig.from_env()
    from engine.llm.config import LLMConfig

    LLMConfig.from_env()  # ISORAG_LLM_*, OPENAI_*
