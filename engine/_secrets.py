"""Keeping secrets out of reprs, messages and logs (docs/security.md).

Settings that hold a secret (a password, a token, an API key) register it here when they are made
(:func:`register`); every :class:`~engine._errors.IsoragError` message goes through :func:`scrub`, which
replaces registered secrets (distinctive ones: see :func:`_distinctive`) with ``***`` and the password of any
URL (``scheme://user:***@host``), so a driver's message that quotes a URI or a key does not pass it on. Reprs
show ``'***'`` for a secret that is set.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Iterable, TypeGuard

MASK = "***"

_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^\s/@:?#]*)(?P<pw>:[^\s/@?#]*)?@")
_QUERY_SECRET = re.compile(r"(?i)(?P<key>[?&](?:api[_-]?key|key|token|access[_-]?token|password|passwd|secret)=)"
                           r"[^&#\s'\"]*")

_known: set[str] = set()
_lock = threading.Lock()


def _distinctive(value: Any) -> TypeGuard[str]:
    """Worth searching for in text: a short or plain word ("Milvus", "password") would mask ordinary words of
    every message, so those are masked in reprs and URIs only."""
    return isinstance(value, str) and len(value) >= 8 and (len(value) >= 16 or not value.isalpha())


def register(*values: str | None) -> None:
    """Remember secret values so that :func:`scrub` removes them from any message."""
    with _lock:
        for v in values:
            if _distinctive(v):
                _known.add(v)
            if isinstance(v, str) and ":" in v and _distinctive(v.split(":", 1)[1]):
                _known.add(v.split(":", 1)[1])  # a user:password token: its password alone too


def mask_uri(uri: Any) -> Any:
    """``scheme://user:***@host/...`` for a URI with user info (and ``***`` for secret query values)."""
    if not isinstance(uri, str):
        return uri

    def userinfo(m: re.Match[str]) -> str:
        if m.group("user") and m.group("pw") is not None:
            return f"{m.group('scheme')}{m.group('user')}:{MASK}@"
        return f"{m.group('scheme')}{MASK}@"  # a user name alone may be a token (https://TOKEN@host)

    return _QUERY_SECRET.sub(lambda m: m.group("key") + MASK, _URL_USERINFO.sub(userinfo, uri))


def scrub(text: Any, extra: Iterable[str | None] = ()) -> Any:
    """``text`` with URL passwords and every registered (or ``extra``) secret replaced by ``***``."""
    if not isinstance(text, str) or not text:
        return text
    text = mask_uri(text)
    with _lock:
        values = set(_known)
    values.update(v for v in extra if _distinctive(v))
    for v in sorted(values, key=len, reverse=True):  # longest first: a token before the password inside it
        if v in text:
            text = text.replace(v, MASK)
    return text


def masked(value: Any) -> str:
    """The repr of a secret field: ``'***'`` when set, else the repr of the empty value."""
    return repr(MASK) if value else repr(value)


def masked_repr(obj: Any, secret: Iterable[str] = (), uris: Iterable[str] = ()) -> str:
    """A dataclass' repr with its ``secret`` fields masked and the user info of its ``uris`` fields hidden."""
    from dataclasses import fields

    secret, uris = set(secret), set(uris)
    parts = []
    for f in fields(obj):
        if not f.repr:
            continue
        v = getattr(obj, f.name)
        text = masked(v) if f.name in secret else repr(mask_uri(v)) if f.name in uris else repr(v)
        parts.append(f"{f.name}={text}")
    return f"{type(obj).__name__}({', '.join(parts)})"
