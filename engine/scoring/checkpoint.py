"""Scorer checkpoints: one file with the model and what it was trained for (KG, embedding model, relations).

A checkpoint is a ``torch.save`` of plain data (loaded back with ``weights_only=True``)::

    {"format": "isorag-scorer/1", "model_class": "DDEMLP" | "QRGAT", "config": {...constructor args...},
     "state_dict": {...}, "kg": "metaqa", "embedding_model": "all-MiniLM-L6-v2", "embedding_slug": "...",
     "emb_dim": 384, "relation_types": [...], "relation_fingerprint": "...", "hops": 3, "max_edges": 10000,
     "extra_stopwords": ["movie", ...], "info": {...training figures...}}

``extra_stopwords`` are the KG's domain words that entity linking skips besides the engine's generic ones
(:mod:`engine.scoring.service`). A file written before they were a setting has no such key: it gets
:data:`LEGACY_EXTRA_STOPWORDS`, the words the engine's own list held then, so it links as it did. Model classes
are recorded by name, never pickled, so moving a class between modules does not affect the files.

Loading checks it against the engine: another KG or another embedding model (its vectors would mean something
else) is a :class:`~engine._errors.CheckpointError` saying what differs and how to proceed.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from engine._errors import CheckpointError, ConfigError

__all__ = ["FORMAT", "MODELS", "LEGACY_EXTRA_STOPWORDS", "ScorerCheckpoint", "check_model_config", "make_model",
           "relation_fingerprint", "save_checkpoint", "load_checkpoint"]

FORMAT = "isorag-scorer/1"
#: CLI names of the models -> class names
MODELS = {"dde_mlp": "DDEMLP", "qrgat": "QRGAT"}
#: the extra stopwords of a checkpoint written before they were recorded: the domain words (MetaQA's) that the
#: engine's stopword list held until then, which such a checkpoint was always used with
LEGACY_EXTRA_STOPWORDS = ("film", "films", "movie", "movies")


def relation_fingerprint(relation_types: Sequence[str]) -> str:
    """A short hash of the sorted relation vocabulary (relationship types)."""
    text = "\n".join(sorted(set(relation_types)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _model_class(name: str) -> Any:
    from engine.scoring.models.dde_mlp import DDEMLP
    from engine.scoring.models.qrgat import QRGAT

    classes = {"DDEMLP": DDEMLP, "QRGAT": QRGAT}
    cls_name = MODELS.get(name.lower(), name) if isinstance(name, str) else name
    if cls_name not in classes:
        raise CheckpointError(f"unknown scorer model {name!r}: use one of {', '.join(MODELS)}")
    return classes[cls_name]


def check_model_config(name: str, config: dict[str, Any]) -> None:
    """A ConfigError for a setting that ``name``'s constructor does not take, or a value of the wrong kind
    (judged by the default: a bool, an int, a finite number, a string), before any data is prepared."""
    import inspect
    import math

    cls = _model_class(name)
    params = {n: p for n, p in list(inspect.signature(cls.__init__).parameters.items())[2:]
              if p.kind is p.POSITIONAL_OR_KEYWORD or p.kind is p.KEYWORD_ONLY}
    for key, value in config.items():
        if key not in params:
            raise ConfigError(f"{cls.__name__} has no setting {key!r}; its settings: {', '.join(params)}")
        default = shown = params[key].default
        if default is None:  # judged by the annotation instead ("int | None": an integer or null)
            kinds = {t.strip() for t in str(params[key].annotation).split("|")}
            plain = {"int": 0, "float": 0.0, "bool": False, "str": ""}
            if value is None or "None" not in kinds or not kinds - {"None"} <= plain.keys() or len(kinds) != 2:
                continue
            default = plain[(kinds - {"None"}).pop()]
        if default is inspect.Parameter.empty:
            continue
        if isinstance(default, bool):
            ok, kind = isinstance(value, bool), "true or false"
        elif isinstance(default, int):
            ok, kind = isinstance(value, int) and not isinstance(value, bool), "an integer"
        elif isinstance(default, float):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            kind = "a finite number"
        else:
            ok, kind = isinstance(value, type(default)), f"a {type(default).__name__}"
        if not ok:
            raise ConfigError(f"{cls.__name__} setting {key}={value!r}: must be {kind} (default {shown!r})")


def make_model(name: str, dim: int, **config: Any) -> Any:
    """A fresh scorer: ``name`` is ``dde_mlp`` / ``qrgat`` (or the class name ``DDEMLP`` / ``QRGAT``)."""
    cls = _model_class(name)
    config = {k: v for k, v in config.items() if k != "emb_dim"}
    check_model_config(name, config)
    try:
        return cls(dim, **config)
    except (TypeError, ValueError) as e:  # a value its constructor refuses (e.g. heads not dividing hidden)
        raise ConfigError(f"{cls.__name__} settings {config}: {e}") from e


@dataclass
class ScorerCheckpoint:
    """A loaded checkpoint: the model (eval mode) and its provenance."""

    model: Any
    model_class: str
    config: dict[str, Any]
    kg: str
    embedding_model: str
    embedding_slug: str
    emb_dim: int
    relation_types: list[str]
    relation_fingerprint: str
    hops: int
    max_edges: int
    info: dict[str, Any] = field(default_factory=dict)
    path: str = ""
    #: the KG's domain words that entity linking skips besides the engine's stopwords (lower case)
    extra_stopwords: list[str] = field(default_factory=list)
    #: the identity of the KG it was trained on (engine.stores.graph.GraphStore.identity; None: not recorded)
    kg_id: str | None = None


def save_checkpoint(path: str | Path, model: Any, *, kg: str, embedding_model: str, embedding_slug: str,
                    relation_types: Sequence[str], hops: int, max_edges: int,
                    info: dict[str, Any] | None = None, extra_stopwords: Iterable[str] = (),
                    kg_id: str | None = None) -> Path:
    """Write ``model`` and its provenance to ``path`` (atomically: a temporary file, then a rename).
    ``extra_stopwords``: the KG's domain words for entity linking (module docstring); ``kg_id``: the KG's identity
    (a KG of the same name made again later has another, and refuses the file)."""
    import torch

    words = None if isinstance(extra_stopwords, str) else list(extra_stopwords)
    if words is None or not all(isinstance(w, str) for w in words):
        raise ConfigError(f"extra_stopwords must be a list of words, got {extra_stopwords!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    config = model.config
    payload = {
        "format": FORMAT,
        "model_class": type(model).__name__,
        "config": config,
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "kg": kg,
        "kg_id": kg_id,
        "embedding_model": embedding_model,
        "embedding_slug": embedding_slug,
        "emb_dim": int(config["emb_dim"]),
        "relation_types": sorted(set(relation_types)),
        "relation_fingerprint": relation_fingerprint(relation_types),
        "hops": int(hops),
        "max_edges": int(max_edges),
        "extra_stopwords": sorted({w.lower() for w in words}),
        "info": {"saved_at": time.strftime("%Y-%m-%dT%H:%M:%S"), **(info or {})},
    }
    tmp = path.with_name(path.name + ".tmp")
    torch.save(payload, tmp)
    tmp.replace(path)
    return path


def load_checkpoint(path: str | Path, *, kg: str | None = None, embedding_slug: str | None = None,
                    emb_dim: int | None = None, relation_types: Sequence[str] | None = None,
                    allow_other_kg: bool = False, device: Any = "cpu", kg_id: str | None = None) -> ScorerCheckpoint:
    """Read a checkpoint and check it fits: ``kg`` and ``kg_id`` (the engine's KG name and identity: a file made for
    another KG of the same name, dropped and made again since, is refused), ``embedding_slug`` / ``emb_dim``
    (the engine's embedder) and ``relation_types`` (the KG's relation vocabulary). A check whose argument is
    None is skipped. ``allow_other_kg=True`` accepts a checkpoint trained on another KG (transfer; the
    embedding model must still be the same).
    """
    import torch

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no scorer checkpoint at {path}: train one with `isorag train-scorer --qa FILE "
                              f"--out {path}`")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # any unreadable file is the same error for the caller
        raise CheckpointError(f"{path} is not a readable scorer checkpoint: {type(e).__name__}: {e}") from e
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        got = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise CheckpointError(f"{path} is not an isorag scorer checkpoint (format {got!r}, expected {FORMAT!r})")
    if embedding_slug is not None and payload["embedding_slug"] != embedding_slug:
        raise CheckpointError(
            f"scorer checkpoint {path} was trained with embedding model {payload['embedding_model']!r} "
            f"(vectors {payload['embedding_slug']!r}), but this engine embeds with {embedding_slug!r}: its features "
            f"would mean something else. Use ISORAG_EMBEDDING_MODEL={payload['embedding_model']} or retrain "
            "with `isorag train-scorer`")
    if emb_dim is not None and int(payload["emb_dim"]) != int(emb_dim):
        raise CheckpointError(f"scorer checkpoint {path} expects {payload['emb_dim']}-d embeddings, "
                              f"this engine's are {emb_dim}-d")
    if kg is not None and payload["kg"] != kg and not allow_other_kg:
        raise CheckpointError(
            f"scorer checkpoint {path} was trained on KG {payload['kg']!r}, not on {kg!r}: retrain it on this KG "
            "with `isorag train-scorer --kg ...`, or load it with allow_other_kg=True to transfer it on purpose")
    if kg_id is not None and payload.get("kg_id") not in (None, kg_id) and not allow_other_kg:
        raise CheckpointError(
            f"scorer checkpoint {path} was trained on another KG named {payload['kg']!r} (identity "
            f"{payload['kg_id']}; this KG's is {kg_id}: it was dropped and made again since): retrain it on this KG "
            "with `isorag train-scorer`, or load it with allow_other_kg=True to transfer it on purpose")
    if relation_types is not None and not allow_other_kg:
        fp = relation_fingerprint(relation_types)
        if fp != payload["relation_fingerprint"]:
            ours, theirs = set(relation_types), set(payload["relation_types"])
            raise CheckpointError(
                f"scorer checkpoint {path} was trained on KG {payload['kg']!r} with another relation vocabulary "
                f"(fingerprint {payload['relation_fingerprint']} vs {fp}: {len(theirs - ours)} relation(s) gone, "
                f"{len(ours - theirs)} new): the KG was reloaded with other data; retrain the scorer, or pass "
                "allow_other_kg=True")
    try:
        model = make_model(payload["model_class"], int(payload["emb_dim"]), **payload["config"])
        model.load_state_dict(payload["state_dict"])
    except CheckpointError:
        raise
    except Exception as e:
        raise CheckpointError(f"scorer checkpoint {path} does not rebuild its {payload['model_class']}: {e}") from e
    model.eval()
    model.to(device)
    return ScorerCheckpoint(model, payload["model_class"], dict(payload["config"]), payload["kg"],
                            payload["embedding_model"], payload["embedding_slug"], int(payload["emb_dim"]),
                            list(payload["relation_types"]), payload["relation_fingerprint"], int(payload["hops"]),
                            int(payload["max_edges"]), dict(payload.get("info") or {}), str(path),
                            list(payload.get("extra_stopwords", LEGACY_EXTRA_STOPWORDS)), payload.get("kg_id"))
