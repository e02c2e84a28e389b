"""A PgBouncer of our own, in transaction mode, in front of a PostgreSQL server.

The kind of pooler managed PostgreSQL services put in front of the database: a client's
transactions each get whichever server session is free, so nothing a client leaves in a
session (a named prepared statement, a setting, a LISTEN) is there for its next transaction,
and another client may find it instead. Used by `bench.compare --pooler` and by the tests that
run Baton through it (tests/store/test_pgbouncer.py, tests/live/test_pooler.py).

Debian's `pgbouncer` (1.18 on Debian 12) is what this starts: it does not track prepared
statements in transaction mode (`max_prepared_statements` came in 1.21) and refuses startup
parameters it does not know (`ignore_startup_parameters` is left empty here, as by default).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

from bench.server import _free_port

INSTALL = "apt-get install pgbouncer"
READY_SECONDS = 10.0


def pgbouncer_program() -> str | None:
    """The `pgbouncer` program, also where Debian puts it outside a user's PATH."""
    return shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/sbin")


@dataclass
class PgBouncer:
    """`pgbouncer` on 127.0.0.1:`port` in `pool_mode = transaction`, with at most `pool_size`
    server sessions per database and user, logging in to `server_url`'s server as its user
    (its clients' names and passwords are not checked: `auth_type = any`)."""

    server_url: str
    pool_size: int = 4
    port: int = field(default_factory=_free_port)
    program: str | None = field(default_factory=pgbouncer_program)
    process: subprocess.Popen[bytes] | None = None
    folder: Path | None = None

    def url(self, database_url: str) -> str:
        """`database_url`'s database, through this pooler."""
        parts = urlsplit(database_url)
        database = parts.path.lstrip("/") or "postgres"
        return f"postgresql://baton@127.0.0.1:{self.port}/{quote(database, safe='')}"

    @property
    def admin_url(self) -> str:
        """PgBouncer's own console (`SHOW STATS`, `SHOW POOLS`), in the simple query protocol."""
        return f"postgresql://baton@127.0.0.1:{self.port}/pgbouncer"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def show(self, what: str) -> list[dict[str, str]]:
        """`SHOW what` on PgBouncer's console (`STATS`, `POOLS`, …): its rows by column name.
        The console speaks only the simple query protocol, which asyncpg cannot read rows
        from, so this speaks it itself."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            startup = b"user\0baton\0database\0pgbouncer\0\0"
            sock.sendall(struct.pack("!ii", 8 + len(startup), 196608) + startup)
            _messages_until_ready(sock)
            query = f"SHOW {what}".encode() + b"\0"
            sock.sendall(b"Q" + struct.pack("!i", 4 + len(query)) + query)
            names: list[str] = []
            rows: list[dict[str, str]] = []
            for kind, body in _messages_until_ready(sock):
                if kind == b"T":
                    names = _field_names(body)
                elif kind == b"D":
                    rows.append(dict(zip(names, _values(body), strict=True)))
            sock.sendall(b"X" + struct.pack("!i", 4))
        return rows

    def transactions(self, database: str) -> int:
        """Transactions PgBouncer has passed on for `database` since it started."""
        found = [row for row in self.show("STATS") if row["database"] == database]
        return int(found[0]["total_xact_count"]) if found else 0

    @property
    def _host(self) -> str:
        parts = urlsplit(self.server_url)
        return parts.hostname or parse_qs(parts.query).get("host", ["/tmp"])[0]

    def _run_as(self) -> str:
        """Who it runs as when started by root (it refuses root): whoever owns the server's
        Unix socket directory (an embedded PostgreSQL's may be closed to others), else
        `nobody`."""
        if self._host.startswith("/"):
            owner = pwd.getpwuid(os.stat(self._host).st_uid).pw_name
            if owner != "root":
                return owner
        return "nobody"

    def config(self) -> str:
        parts = urlsplit(self.server_url)
        host = self._host
        port = parts.port or int(parse_qs(parts.query).get("port", ["5432"])[0])
        login = f"host={host} port={port} user={parts.username or 'postgres'}"
        if parts.password:
            login += f" password={parts.password}"
        return "\n".join(
            [
                "[databases]",
                f"* = {login}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {self.port}",
                "unix_socket_dir =",
                "auth_type = any",
                "pool_mode = transaction",
                f"default_pool_size = {self.pool_size}",
                "max_client_conn = 2000",
                "logfile =",
                "pidfile =",
                "log_connections = 0",
                "log_disconnections = 0",
                "",
            ]
        )

    def start(self, log: Path | None = None) -> None:
        """Start it and wait until it accepts connections; RuntimeError if it does not."""
        if self.program is None:
            raise RuntimeError(f"pgbouncer is not installed ({INSTALL})")
        # Readable by the user it runs as: it refuses to run as root.
        self.folder = Path(tempfile.mkdtemp(prefix="baton-pgbouncer-", dir="/tmp"))
        self.folder.chmod(0o755)
        ini = self.folder / "pgbouncer.ini"
        ini.write_text(self.config())
        ini.chmod(0o644)
        command = [self.program, str(ini)]
        if os.geteuid() == 0:
            command[1:1] = ["-u", self._run_as()]
        log = log or self.folder / "pgbouncer.log"
        with log.open("wb") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"pgbouncer exited: {log.read_text(errors='replace')}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"pgbouncer did not listen on {self.port}: {log.read_text()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


# --- the simple query protocol, as much of it as `PgBouncer.show` needs -----------------------


def _messages_until_ready(sock: socket.socket) -> list[tuple[bytes, bytes]]:
    """The server's messages up to ReadyForQuery; RuntimeError on an ErrorResponse."""
    messages: list[tuple[bytes, bytes]] = []
    while True:
        head = _read(sock, 5)
        kind, size = head[:1], struct.unpack("!i", head[1:])[0]
        body = _read(sock, size - 4)
        if kind == b"E":
            raise RuntimeError(f"pgbouncer console: {body!r}")
        if kind == b"Z":
            return messages
        messages.append((kind, body))


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise RuntimeError("pgbouncer console closed the connection")
        data += chunk
    return data


def _field_names(body: bytes) -> list[str]:
    (count,), at, names = struct.unpack("!h", body[:2]), 2, []
    for _ in range(count):
        end = body.index(b"\0", at)
        names.append(body[at:end].decode())
        at = end + 1 + 18  # table oid, column, type oid, size, modifier, format
    return names


def _values(body: bytes) -> list[str]:
    (count,), at, values = struct.unpack("!h", body[:2]), 2, []
    for _ in range(count):
        (size,) = struct.unpack("!i", body[at : at + 4])
        at += 4
        values.append("" if size < 0 else body[at : at + size].decode())
        at += max(size, 0)
    return values
