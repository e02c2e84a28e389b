"""The GraphiQL page served to a browser at GET /graphql, and its assets, from the package.

Nothing comes from a CDN: GraphiQL, React and ReactDOM are vendored at pinned versions in
`static/graphiql/` (with their licences; `scripts/vendor-graphiql` fetches them from npm) and
served under `/graphiql/`, so the page works offline. The headers pane starts with an
`Authorization` template, since every request needs a token.
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
    "react.production.min.js",
    "react-dom.production.min.js",
    "graphiql.min.js",
    "start.js",
)

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Baton · GraphiQL</title>
<link rel="stylesheet" href="{base}/graphiql.min.css">
<style>html, body, #graphiql {{ height: 100%; margin: 0; }}</style>
</head>
<body>
<div id="graphiql">Loading GraphiQL…</div>
{scripts}
</body>
</html>
"""


def _asset(name: str) -> bytes:
    return resources.files("baton.web").joinpath("static", "graphiql", name).read_bytes()


@cache
def graphiql_page() -> bytes:
    scripts = "\n".join(
        f'<script src="{ASSET_PATH}/{name}"></script>' for name in ASSETS if name.endswith(".js")
    )
    return PAGE.format(base=ASSET_PATH, scripts=scripts).encode()


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
        headers={"Cache-Control": "public, max-age=86400"},
    )


def asset_routes() -> list[Route]:
    return [Route(ASSET_PATH + "/{name}", _serve_asset, methods=["GET", "HEAD"])]
