"""Who may call what: the API key of a request (``Authorization: Bearer KEY`` or ``X-API-Key: KEY``), checked
against the keys file for the route's KG and role. Without ``auth`` (``--no-auth``, loopback only) every request
acts as an anonymous admin of every KG."""

from __future__ import annotations

from fastapi import Request
from fastapi.security import APIKeyHeader, HTTPBearer

from engine.service.keys import ALL_KGS, ApiKey, KeyStore
from engine.service.problems import Problem

__all__ = ["ANONYMOUS", "Guard", "bearer", "header_key"]

ANONYMOUS = ApiKey("anonymous", (ALL_KGS,), "admin", "")
# for the OpenAPI page (/docs): the two ways a key may be sent; the check itself is Guard's
bearer = HTTPBearer(auto_error=False, description="an API key made by `isorag keys create`")
header_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="the same key, in its own header")


def _key_of(request: Request) -> str | None:
    auth = request.headers.get("authorization")
    if auth:
        scheme, _, value = auth.partition(" ")
        return value.strip() if scheme.lower() == "bearer" and value.strip() else ""
    given = request.headers.get("x-api-key")
    return given.strip() if given is not None else None


class Guard:
    """Checks a request's key: 401 without a key or with a wrong or revoked one, 403 for a key of other KGs or
    of a lower role. The messages say which, never the key."""

    def __init__(self, store: KeyStore | None) -> None:
        self.store = store

    def principal(self, request: Request) -> ApiKey:
        if self.store is None:
            return ANONYMOUS
        key = _key_of(request)
        if key is None:
            raise Problem(401, "Unauthorized", "no API key: send 'Authorization: Bearer KEY' (or 'X-API-Key: KEY'); "
                          "make one with `isorag keys create`", headers={"WWW-Authenticate": "Bearer"})
        found = self.store.check(key)
        if found is None:
            raise Problem(401, "Unauthorized", "the API key is not valid (wrong, malformed or revoked)",
                          headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
        return found

    def require(self, request: Request, kg: str | None, role: str) -> ApiKey:
        who = self.principal(request)
        if kg is not None and not who.allows(kg, "read"):
            raise Problem(403, "Forbidden", f"key {who.id} is not for KG {kg!r} (its KGs: {', '.join(who.kgs)})")
        if not who.allows(kg, role):
            raise Problem(403, "Forbidden", f"key {who.id} has role {who.role!r}; this route needs {role!r}")
        return who
