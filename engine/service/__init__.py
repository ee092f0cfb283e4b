"""The engine as a shared HTTP service: ``isorag serve`` (FastAPI on uvicorn) and ``isorag keys``.

- ``app``: :func:`create_app`, the application (middleware, problems, ``/healthz``, ``/metrics``, the explorer);
- ``core``: :class:`Service`, what the routes of one worker process share;
- ``routes``: the ``/v1`` API (ask with server-sent events, retrieve, verify, jobs, change sets, search, browse);
- ``auth`` and ``keys``: API keys (hashed in a 0600 file, scoped to KGs and a role) and their check per request;
- ``settings``: :class:`ServiceSettings` and :class:`Limits`;
- ``engines``: one Engine per KG and worker process, reused;
- ``jobs``: verification jobs sent over HTTP, resumable, readable from any worker;
- ``metrics``: Prometheus text, added up over the workers; ``sse``: the events of a streamed ask;
- ``problems``: errors as ``application/problem+json``; ``cli``: the two commands;
- ``static/``: the evidence explorer (HTML, CSS, JS) and its vendored drawing library.

Importing this package loads FastAPI only when :func:`create_app` is imported from ``engine.service.app``.
"""

from __future__ import annotations

__all__: list[str] = []
