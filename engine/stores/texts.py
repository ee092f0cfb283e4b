"""What a vector is embedded from, and the digest that proves it.

Every vector row in Milvus records :func:`text_digest` of the exact text it was embedded from (an entity: its name
and description, :func:`entity_text`; a relation or a type: its name). A row's digest compared with the digest of
the text Neo4j holds now says, without embedding anything, whether the vector is current: ``isorag check`` reads both
stores' digests and embeds again only what differs. The digest is of the text, whatever the text is, so any new kind
of vector (an alias's, say) carries its own the same way.
"""

from __future__ import annotations

import hashlib


def entity_text(name: str | None, description: str | None) -> str:
    """What an entity's vector is embedded from: its name, and its description when it has one."""
    name = name or ""
    return f"{name}: {description}" if description else name


def text_digest(text: str) -> int:
    """A signed 64-bit digest of ``text`` (Milvus' INT64): equal texts give equal digests in every run."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big", signed=True)


__all__ = ["entity_text", "text_digest"]
