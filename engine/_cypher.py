"""Every Cypher statement lives in ``cypher/<name>.cypher``; this loads them by name.

Identifiers (relationship types, labels) and a relationship's direction cannot be parameters, so some statements
are templates with named slots (``{{rel_types}}``, ``{{arrow_in}}``...). :func:`render` is the one function that
fills them, and it takes only :class:`Fragment` values, which only this module makes: identifiers validated
against the KG's catalog and backtick-escaped (:func:`rel_types`, :func:`rel_type`, :func:`label`), directions
from a fixed set (:func:`direction`), variables named by code (:func:`variable`), and other rendered templates.
Raw user or LLM text never reaches a slot; values stay Cypher parameters.

A statement whose every pattern begins at a node found by a uniqueness constraint's key (one node, whatever the
statistics say) starts with ``CYPHER replan=skip``: Neo4j keeps its cached plan when a load changes the statistics,
instead of planning it again at its next run (0.05-0.3 s a statement on 2 cores: the first change set after a load
paid about 0.5 s of it). Statements that walk between nodes or use another index are left to the planner
(tests/unit/test_cypher.py checks the rule).
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

from engine._errors import ConfigError, UnknownRelationError

if TYPE_CHECKING:
    from collections.abc import Container, Iterable
    from importlib.abc import Traversable


def _cypher_dir() -> "Path | Traversable":
    """``engine/cypher``: a folder in an installed wheel; in a checkout, a link to the repository's top-level
    ``cypher/``, where the statements live beside the code that runs them (the top-level folder itself when the
    link is missing, as on a file system without links)."""
    packaged = files("engine").joinpath("cypher")
    if packaged.is_dir():
        return packaged
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


def rel_type_alternation(types: "list[str] | tuple[str, ...] | set[str]", allowed: "Container[str]") -> str:
    """``:`A`|`B``` for a relationship pattern, after checking every type is in the schema."""
    bad = [t for t in types if t not in allowed]
    if bad:
        raise UnknownRelationError(f"relationship type(s) not in the KG schema: {sorted(bad)!r}")
    if not types:
        return ""
    return ":" + "|".join(escape_identifier(t) for t in sorted(types))


class Fragment(str):
    """Text for a template slot, made only by this module (escaped identifiers, fixed directions, rendered
    templates): :func:`render` refuses any other value."""

    __slots__ = ()


_SLOT = re.compile(r"\{\{([a-z_][a-z0-9_]*)\}\}")
#: a relationship's direction as seen from its first node: the arrow's two halves
_DIRECTIONS = {"out": ("", ">"), "in": ("<", ""), "both": ("", "")}


@lru_cache(maxsize=None)
def _template(name: str) -> tuple[str, frozenset[str]]:
    """The statement of ``cypher/<name>.cypher`` without its header comment and final newline, and its slots."""
    lines = cypher(name).split("\n")
    while lines and lines[0].lstrip().startswith("//"):
        lines.pop(0)
    text = "\n".join(lines)
    if text.endswith("\n"):
        text = text[:-1]
    return text, frozenset(_SLOT.findall(text))


def render(name: str, /, **slots: Fragment) -> Fragment:
    """The template ``cypher/<name>.cypher`` with its ``{{slot}}`` slots filled; every slot must be given, each
    value a :class:`Fragment` made by this module (never raw text)."""
    text, wanted = _template(name)
    if set(slots) != wanted:
        raise ConfigError(f"Cypher template {name!r} has slots {sorted(wanted)}, given {sorted(slots)}")
    for key, value in slots.items():
        if not isinstance(value, Fragment):
            raise TypeError(f"slot {key!r} of Cypher template {name!r} takes a Fragment, not {type(value).__name__}")
    if not wanted:
        return Fragment(text)
    return Fragment(_SLOT.sub(lambda m: slots[m.group(1)], text))


def rel_types(types: "Iterable[str]", allowed: "Container[str]") -> Fragment:
    """``:`A`|`B``` (sorted) for a relationship pattern, or nothing for no types, after checking every type is
    in the KG's catalog (``allowed``)."""
    return Fragment(rel_type_alternation(list(types), allowed))


def rel_type(name: str, allowed: "Container[str]") -> Fragment:
    """``:`A``` for one relationship type of the KG's catalog (``allowed``)."""
    if name not in allowed:
        raise UnknownRelationError(f"relationship type not in the KG schema: {name!r}")
    return Fragment(":" + escape_identifier(name))


def label(name: str) -> Fragment:
    """``:`L``` for a node label (escaped; any text is a valid label once quoted)."""
    return Fragment(":" + escape_identifier(name))


def identifier(name: str) -> Fragment:
    """A schema object's name (an index, a constraint), escaped."""
    return Fragment(escape_identifier(name))


def direction(which: str) -> dict[str, Fragment]:
    """The ``arrow_in`` and ``arrow_out`` slots of a relationship pattern: ``"out"`` (``-[]->``), ``"in"``
    (``<-[]-``) or ``"both"`` (``-[]-``)."""
    try:
        left, right = _DIRECTIONS[which]
    except KeyError:
        raise ValueError(f"direction must be one of {sorted(_DIRECTIONS)}, not {which!r}") from None
    return {"arrow_in": Fragment(left), "arrow_out": Fragment(right)}


def variable(prefix: str, index: int) -> Fragment:
    """A variable named by code: a fixed prefix and a number (``n0``, ``r3``)."""
    if not _IDENT.fullmatch(prefix) or not isinstance(index, int) or index < 0:
        raise ValueError(f"not a variable: {prefix!r}, {index!r}")
    return Fragment(f"{prefix}{index}")


def joined(parts: "Iterable[Fragment]", sep: str) -> Fragment:
    """Fragments joined by a separator of punctuation and spaces (``", "``, ``" + "``, a newline)."""
    if sep not in _SEPARATORS:
        raise ValueError(f"not a separator: {sep!r}")
    items = list(parts)
    for p in items:
        if not isinstance(p, Fragment):
            raise TypeError(f"joined takes Fragments, not {type(p).__name__}")
    return Fragment(sep.join(items))


_SEPARATORS = frozenset({", ", " + ", " AND ", "\n", "|", "\nUNION ALL\n"})
