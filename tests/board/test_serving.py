"""The board's files as `baton serve` serves them, and as the package ships them."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import httpx

from baton.board import STATIC
from tests.conftest import LiveServer

MODULES = STATIC / "js"
VENDOR = STATIC / "vendor"


async def test_page_at_root_and_board(live_server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=live_server.url) as http:
        for path in ("/", "/board"):
            response = await http.get(path)
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/html")
            policy = response.headers["content-security-policy"]
            assert "default-src 'self'" in policy and "connect-src 'self'" in policy
            assert '<script type="module" src="/board/static/js/main.js">' in response.text
        # GraphiQL stays where it was.
        graphiql = await http.get("/graphql", headers={"accept": "text/html"})
        assert graphiql.status_code == 200 and "graphiql" in graphiql.text.lower()


async def test_static_files_are_javascript_and_compressed(live_server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=live_server.url) as http:
        response = await http.get("/board/static/js/main.js", headers={"accept-encoding": "gzip"})
        assert response.status_code == 200
        assert "javascript" in response.headers["content-type"]
        assert response.headers["content-encoding"] == "gzip"
        assert (await http.get("/board/static/js/nothing.js")).status_code == 404
        assert (await http.get("/board/static/../__init__.py")).status_code == 404


def test_every_relative_import_names_a_shipped_file() -> None:
    """The page has no build step: each `import … from "./x.js"` must resolve to a file."""
    pattern = re.compile(r"""(?:from|import)\s*\(?\s*["'](\.{1,2}/[^"']+)["']""")
    checked = 0
    for module in MODULES.rglob("*.js"):
        for target in pattern.findall(module.read_text()):
            assert (module.parent / target).resolve().is_file(), f"{module.name} imports {target}"
            checked += 1
    assert checked > 10


def test_vendored_files_match_their_checksums() -> None:
    """`scripts/vendor-board` wrote SHA256SUMS; the committed files are what it fetched."""
    lines = (VENDOR / "SHA256SUMS").read_text().splitlines()
    assert lines
    for line in lines:
        digest, name = line.split(maxsplit=1)
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest, name
    for folder in VENDOR.iterdir():
        if folder.is_dir():
            assert any(p.name.startswith("LICENSE") for p in folder.iterdir()), folder.name


def test_no_asset_comes_from_another_origin() -> None:
    """No CDN: nothing is loaded by an absolute URL (links, styles, scripts, imports)."""
    remote = re.compile(r"""(?:src=|href=|url\(|from\s|import\()\s*["']?(?:https?:)?//""")
    for path in Path(STATIC).rglob("*"):
        if path.suffix in (".html", ".css", ".js"):
            assert not remote.search(path.read_text()), path.name
