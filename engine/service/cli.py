"""The ``isorag serve`` and ``isorag keys`` commands (registered by :func:`add_commands`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable

from engine._errors import ConfigError
from engine.cli.arguments import float_type, int_type, kg_type, out_file, text_type

__all__ = ["add_commands", "cmd_keys", "cmd_serve"]


def _kg_or_all(text: str) -> str:
    """A KG name, or ``*`` for every KG."""
    return text if text == "*" else kg_type(text)


def _origin(text: str) -> str:
    """A browser origin: ``scheme://host[:port]``, no path."""
    from urllib.parse import urlsplit

    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") or parts.query:
        raise argparse.ArgumentTypeError(f"an origin is scheme://host[:port] (http or https, no path), got {text!r}")
    return f"{parts.scheme}://{parts.netloc}"


def _directory(text: str) -> str:
    """A folder that exists and can be written in, or can be made."""
    from pathlib import Path

    p = Path(text).expanduser()
    if not text.strip():
        raise argparse.ArgumentTypeError("empty path")
    if p.exists() and not p.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} exists and is not a directory")
    parent = p if p.exists() else p.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot write in {str(parent)!r} (permission denied)")
    return text


def add_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    """Add ``serve`` and ``keys`` to the ``isorag`` parser (``command(name, help=...)`` makes a subparser)."""
    s = command("serve", help="the engine as an HTTP service (API, evidence explorer at /), behind API keys")
    s.add_argument("--host", type=text_type, default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=int_type(0, 65535), default=8750, help="default 8750 (0: any free port)")
    s.add_argument("--workers", type=int_type(1, 64), default=1, help="worker processes (default 1)")
    s.add_argument("--no-auth", action="store_true",
                   help="no API keys: every request may do anything (refused unless --host is a loopback address)")
    s.add_argument("--keys", type=out_file,
                   help="the keys file (default $ISORAG_KEYS or $ISORAG_HOME/service/keys.json)")
    s.add_argument("--state-dir", type=_directory,
                   help="jobs and metrics shared by the workers (default $ISORAG_HOME/service)")
    s.add_argument("--cors-origin", type=_origin, action="append", default=[], metavar="ORIGIN",
                   help="a browser origin allowed to call the API (repeatable; default none: CORS off)")
    s.add_argument("--no-llm", action="store_true", help="do not use the LLM even when one is configured")
    s.add_argument("--concurrency", type=int_type(1, 1024), default=8,
                   help="engine calls at once per worker; more requests wait their turn (default 8)")
    s.add_argument("--job-concurrency", type=int_type(1, 64), default=2, help="claims verified at once per job")
    s.add_argument("--max-body", type=int_type(1, 1 << 30), help="largest JSON body in bytes (default 1 MiB)")
    s.add_argument("--max-upload", type=int_type(1, 1 << 34),
                   help="largest change set or claims file in bytes (default 64 MiB)")
    s.add_argument("--timeout", type=float_type(0, 86_400, lo_open=True),
                   help="seconds one request may work (default 60)")
    s.add_argument("--log-level", choices=["critical", "error", "warning", "info"], default="info")
    s.set_defaults(func=cmd_serve)

    s = command("keys", help="API keys of isorag serve: create, list, revoke")
    s.add_argument("action", choices=["create", "list", "revoke"])
    s.add_argument("key_id", nargs="?", type=text_type, help="revoke: the key's id (see list)")
    s.add_argument("--kg", action="append", type=_kg_or_all, default=[],
                   help="create: a KG the key may use (repeatable; '*' for every KG)")
    s.add_argument("--role", choices=["read", "write", "admin"], help="create: read, write or admin")
    s.add_argument("--name", type=text_type, help="create: a note saying whose key it is")
    s.add_argument("--keys", type=out_file,
                   help="the keys file (default $ISORAG_KEYS or $ISORAG_HOME/service/keys.json)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_keys)


def _settings(args: argparse.Namespace) -> Any:
    from engine.service.settings import Limits, ServiceSettings

    lim: dict[str, Any] = {}
    if args.max_body:
        lim["body_bytes"] = args.max_body
    if args.max_upload:
        lim["upload_bytes"] = args.max_upload
    if args.timeout:
        lim["timeout_s"] = args.timeout
    return ServiceSettings(host=args.host, port=args.port, workers=args.workers, auth=not args.no_auth,
                           keys=args.keys, state_dir=args.state_dir, cors_origins=tuple(args.cors_origin),
                           llm=not args.no_llm, job_concurrency=args.job_concurrency, concurrency=args.concurrency,
                           limits=Limits(**lim))


def cmd_serve(args: argparse.Namespace) -> int:
    """``isorag serve``: checks everything, then runs uvicorn until interrupted."""
    import uvicorn

    from engine.cli.common import done

    settings = _settings(args)  # --no-auth on a non-loopback address is refused here

    def say(msg: str) -> None:
        print(f"isorag serve: {msg}", file=sys.stderr, flush=True)

    if settings.auth:
        from engine.service.keys import KeyStore, key_from_env

        env_key = key_from_env()  # a bad ISORAG_API_KEY is refused here, before anything listens
        live = [k for k in KeyStore(settings.keys_path).list() if k.revoked is None]
        if env_key is not None:
            say(f"accepting the key of ISORAG_API_KEY ({env_key[1].role}, KGs {', '.join(env_key[1].kgs)})")
        elif not live:
            say(f"no API key in {settings.keys_path} yet: every request will be refused until you make one "
                "(isorag keys create --kg NAME --role read)")
    else:
        say("--no-auth: no API key is asked for (loopback only)")
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    say(f"http://{host}:{settings.port}/ (explorer), /docs (API), {settings.workers} worker(s)")
    common: dict[str, Any] = dict(host=settings.host, port=settings.port, log_level=args.log_level,
                                  timeout_keep_alive=5, server_header=False, access_log=args.log_level == "info")
    if settings.workers == 1:
        from engine.service.app import create_app

        uvicorn.run(create_app(settings), **common)
    else:
        from engine.service.settings import SETTINGS_ENV

        os.environ[SETTINGS_ENV] = settings.to_env()
        uvicorn.run("engine.service.app:create_app_from_env", factory=True, workers=settings.workers, **common)
    return done()


def cmd_keys(args: argparse.Namespace) -> int:
    """``isorag keys create|list|revoke``: the key is printed once, by create, on stdout."""
    from engine.cli.common import done
    from engine.service.keys import KeyStore

    store = KeyStore(args.keys) if args.keys else KeyStore()
    if args.action == "create":
        if not args.kg or not args.role:
            raise ConfigError("keys create needs --kg NAME (repeatable, or '*') and --role read|write|admin")
        if args.key_id:
            raise ConfigError("keys create takes no key id")
        key, entry = store.create(args.kg, args.role, args.name or "")
        if args.json:
            print(json.dumps({"key": key, **entry.to_dict()}))
        else:
            print(key)
            print(f"isorag keys: made key {entry.id} ({entry.role}, KGs {', '.join(entry.kgs)}) in {store.path}; "
                  "it is shown only now", file=sys.stderr)
        return done()
    if args.action == "revoke":
        if not args.key_id:
            raise ConfigError("keys revoke needs the key's id (see isorag keys list)")
        entry = store.revoke(args.key_id)
        print(json.dumps(entry.to_dict()) if args.json else f"revoked key {entry.id} ({entry.revoked})")
        return done()
    rows = store.list()
    if args.json:
        print(json.dumps([k.to_dict() for k in rows], indent=2))
    else:
        for k in rows:
            state = f"revoked {k.revoked}" if k.revoked else "active"
            print(f"{k.id}  {k.role:<5}  {','.join(k.kgs):<30}  {k.created}  {state}  {k.name}")
        if not rows:
            print(f"no keys in {store.path}")
    return done()
