"""The GraphiQL page served to a browser at GET /graphql, and its assets, from the package.

Nothing comes from a CDN: GraphiQL, React and ReactDOM are vendored at pinned versions in
`static/graphiql/` (with their licences; `scripts/vendor-graphiql` fetches them from npm) and
served under `/graphiql/`, so the page works offline. `start.js` opens it ready to use: it takes
the token the board keeps for the tab or asks for one, and fetches the schema again when the
headers change. The page is served with a strict content security policy (its own origin
only) and may not be framed.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

ASSET_PATH = "/graphiql"
MEDIA_TYPES = {".js": "text/javascript", ".css": "text/css"}
# The page's assets, in the order the page loads them (the CSS first).
ASSETS = (
    "graphiql.min.css",
    "page.css",
    "react.production.min.js",
    "react-dom.production.min.js",
    "graphiql.min.js",
    "start.js",
)

# Only this origin. GraphiQL's stylesheet carries its fonts and a few images as data: URLs;
# `connect-src 'self'` also admits ws:/wss: to this host (CSP level 3), for subscriptions.
# Not `'unsafe-eval'`: the bundle's one `new Function` is a fallback that modern browsers
# never reach (globalThis exists). Not `'unsafe-inline'` for styles either: the only inline
# style the bundle makes is the scroll lock its dialogs add to <body>, which this full-height
# page does not need (the dialogs work without it). The page may not be framed
# (clickjacking): both the CSP `frame-ancestors` and X-Frame-Options for older browsers.
POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = [
    (b"content-security-policy", POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-cache"),
]

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Baton · GraphiQL</title>
<link rel="icon" href="/favicon.ico">
{styles}
</head>
<body>
<div id="graphiql">Loading GraphiQL…</div>
<noscript>GraphiQL needs JavaScript.</noscript>
{scripts}
</body>
</html>
"""


def _asset(name: str) -> bytes:
    return resources.files("baton.web").joinpath("static", "graphiql", name).read_bytes()


@cache
def graphiql_page() -> bytes:
    styles = "\n".join(
        f'<link rel="stylesheet" href="{ASSET_PATH}/{name}">'
        for name in ASSETS
        if name.endswith(".css")
    )
    scripts = "\n".join(
        f'<script src="{ASSET_PATH}/{name}"></script>' for name in ASSETS if name.endswith(".js")
    )
    return PAGE.format(styles=styles, scripts=scripts).encode()


@cache
def _loaded(name: str) -> bytes:
    return _asset(name)


async def _serve_asset(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in ASSETS:
        return Response("not found\n", 404, media_type="text/plain")
    media_type = MEDIA_TYPES[name[name.rindex(".") :]]
    return Response(
        _loaded(name),
        media_type=media_type,
        headers={"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"},
    )


def asset_routes() -> list[Route]:
    return [Route(ASSET_PATH + "/{name}", _serve_asset, methods=["GET", "HEAD"])]
