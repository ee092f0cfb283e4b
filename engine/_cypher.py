"""Every Cypher statement lives in ``cypher/<name>.cypher``; this loads them by name.

Relationship types cannot be parameters, so a few statements carry a ``{rel_types}`` or ``{rel_type}``
slot that is filled only with types validated against the KG's catalog and backtick-escaped here.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

from engine._errors import ConfigError, UnknownRelationError

if TYPE_CHECKING:
    from importlib.abc import Traversable


def _cypher_dir() -> "Path | Traversable":
    """``engine/cypher`` in an installed wheel; the repository's top-level ``cypher/`` in a checkout."""
    packaged = files("engine").joinpath("cypher")
    if packaged.is_dir():
        return packaged
    # a checkout or an editable install: the folder stays at the top level (DESIGN section 8)
    return Path(__file__).resolve().parent.parent / "cypher"


CYPHER_DIR = _cypher_dir()
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@lru_cache(maxsize=None)
def cypher(name: str) -> str:
    """The text of ``cypher/<name>.cypher``."""
    path = CYPHER_DIR / f"{name}.cypher"
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise ConfigError(f"no Cypher statement named {name!r} (looked for {path})") from e


def escape_identifier(name: str) -> str:
    """Quote an identifier (a relationship type or label) so that Neo4j reads it as exactly ``name``.

    Backticks are doubled, and every backslash is written ``\\u005c``: Neo4j's parser turns ``\\uXXXX`` into its
    character anywhere in a statement (as Java source does), so ``\\u0060`` in a name would otherwise close the
    quotes; a backslash that itself comes from an escape never starts one. Checked against the real server for
    generated names (tests: quotes, backticks, backslashes, ``\\u0060``, newlines, any Unicode).
    """
    if not isinstance(name, str) or not name:
        raise UnknownRelationError(f"not a relationship type or label: {name!r}")
    if "\x00" in name:
        raise UnknownRelationError(f"a relationship type or label cannot hold NUL: {name!r}")
    return "`" + name.replace("\\", "\\u005c").replace("`", "``") + "`"


def rel_type_alternation(types: "list[str] | tuple[str, ...] | set[str]", allowed: "set[str] | frozenset[str]") -> str:
    """``:`A`|`B``` for a relationship pattern, after checking every type is in the schema."""
    bad = [t for t in types if t not in allowed]
    if bad:
        raise UnknownRelationError(f"relationship type(s) not in the KG schema: {sorted(bad)!r}")
    if not types:
        return ""
    return ":" + "|".join(escape_identifier(t) for t in sorted(types))


def render(name: str, **slots: str) -> str:
    """A statement with its identifier slots filled (values must already be escaped)."""
    text = cypher(name)
    for key, value in slots.items():
        text = text.replace("{" + key + "}", value)
    return text
