"""The board: a web page for owners, served by `baton serve` at `/` and `/board`.

Everything it shows comes from the public GraphQL API on `/graphql` (HTTP for queries and
mutations, `graphql-transport-ws` for live events); this module only serves files. The page is
plain ES modules under `static/`, with pinned third-party code in `static/vendor/` (fetched by
`scripts/vendor-board`). Nothing is loaded from another origin, and the content security policy
says so.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"
STATIC_PREFIX = "/board/static"

# Same origin only; `connect-src 'self'` also admits ws:/wss: to this host (CSP level 3).
POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


@cache
def page() -> bytes:
    return (STATIC / "index.html").read_bytes()


async def index(request: Request) -> Response:
    return Response(
        page(),
        media_type="text/html",
        headers={
            "content-security-policy": POLICY,
            "cache-control": "no-cache",
            "x-content-type-options": "nosniff",
            "referrer-policy": "no-referrer",
        },
    )


def routes() -> list[BaseRoute]:
    """The page at `/` and `/board`, its files (gzip when asked) under `/board/static`."""
    files = StaticFiles(directory=STATIC)
    return [
        Route("/", index),
        Route("/board", index),
        Mount(STATIC_PREFIX, app=GZipMiddleware(files, minimum_size=512)),
    ]
