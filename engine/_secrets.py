"""Keeping secrets out of reprs, messages and logs (DESIGN §11).

Settings that hold a secret (a password, a token, an API key) register it here when they are made
(:func:`register`); every :class:`~engine._errors.IsoragError` message goes through :func:`scrub`, which
replaces registered secrets with ``***`` and the password of any URL (``scheme://user:***@host``), so a
driver's message that quotes a URI or a key does not pass it on. Reprs show ``'***'`` for a secret that is set.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Iterable

MASK = "***"
#: shorter values are masked in reprs but not searched for in text ("a" would mask every "a")
MIN_SCRUB_LEN = 6

_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^\s/@:?#]*)(?P<pw>:[^\s/@?#]*)?@")
_QUERY_SECRET = re.compile(r"(?i)(?P<key>[?&](?:api[_-]?key|key|token|access[_-]?token|password|passwd|secret)=)"
                           r"[^&#\s'\"]*")

_known: set[str] = set()
_lock = threading.Lock()


def register(*values: str | None) -> None:
    """Remember secret values so that :func:`scrub` removes them from any message."""
    with _lock:
        for v in values:
            if isinstance(v, str) and len(v) >= MIN_SCRUB_LEN:
                _known.add(v)
                if ":" in v:  # a user:password token: its password alone too
                    password = v.split(":", 1)[1]
                    if len(password) >= MIN_SCRUB_LEN:
                        _known.add(password)


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
    values.update(v for v in extra if isinstance(v, str) and len(v) >= MIN_SCRUB_LEN)
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
