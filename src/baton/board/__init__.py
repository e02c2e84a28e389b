"""The board: a web page for owners, served by `baton serve` at `/` and `/board`.

Everything it shows comes from the public GraphQL API on `/graphql` (HTTP for queries and
mutations, `graphql-transport-ws` for live events); this module only serves files. The page is
plain ES modules under `static/`, with pinned third-party code in `static/vendor/` (fetched by
`scripts/vendor-board`). Nothing is loaded from another origin, and the content security policy
says so.

The files are few and small (about 160 KB, 55 KB compressed), so they are read and
gzip-compressed once, on the first request, and answered from memory with an ETag.
"""

from __future__ import annotations

import gzip
import hashlib
import mimetypes
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import Receive, Scope, Send

STATIC = Path(__file__).parent / "static"
STATIC_PREFIX = "/board/static"
TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".ico": "image/x-icon"}

# Same origin only; `connect-src 'self'` also admits ws:/wss: to this host (CSP level 3).
# Never framed (clickjacking): `frame-ancestors 'none'`, and X-Frame-Options for browsers that
# predate it (see PAGE_HEADERS).
POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "content-security-policy": POLICY,
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}
HEADERS = {
    "cache-control": "no-cache",  # always revalidated (ETag), so an upgrade shows at once
    "x-content-type-options": "nosniff",
}


@dataclass(frozen=True)
class Asset:
    body: bytes
    packed: bytes
    media_type: str
    etag: str


def load(path: Path) -> Asset:
    body = path.read_bytes()
    media_type = TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or "text/plain"
    etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
    return Asset(body, gzip.compress(body, 9, mtime=0), media_type, etag)


@cache
def assets() -> dict[str, Asset]:
    """Every file under `static/` by its path there; nothing else can be asked for."""
    return {p.relative_to(STATIC).as_posix(): load(p) for p in STATIC.rglob("*") if p.is_file()}


def answer(request: Request, found: Asset, headers: dict[str, str]) -> Response:
    headers = {**HEADERS, **headers, "etag": found.etag, "vary": "accept-encoding"}
    if request.headers.get("if-none-match") == found.etag:
        return Response(status_code=304, headers=headers)
    if "gzip" in request.headers.get("accept-encoding", "") and len(found.packed) < len(found.body):
        headers["content-encoding"] = "gzip"
        return Response(found.packed, media_type=found.media_type, headers=headers)
    return Response(found.body, media_type=found.media_type, headers=headers)


async def index(request: Request) -> Response:
    return answer(request, assets()["index.html"], PAGE_HEADERS)


async def favicon(request: Request) -> Response:
    """The icon browsers ask for on every origin (the board and GraphiQL name it too)."""
    return answer(request, assets()["favicon.ico"], {})


async def files(scope: Scope, receive: Receive, send: Send) -> None:
    request = Request(scope, receive)
    relative = scope["path"].removeprefix(scope.get("root_path", "")).lstrip("/")
    found = assets().get(relative) if request.method in ("GET", "HEAD") else None
    response = answer(request, found, {}) if found else Response("Not found", 404)
    await response(scope, receive, send)


def routes() -> list[BaseRoute]:
    """The page at `/` and `/board`, its files under `/board/static`, and `/favicon.ico`."""
    return [
        Route("/", index),
        Route("/board", index),
        Route("/favicon.ico", favicon),
        Mount(STATIC_PREFIX, app=files),
    ]
