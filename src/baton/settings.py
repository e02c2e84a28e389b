"""Configuration, read once from the environment and checked before anything starts.

Every variable is declared once in `VARIABLES`: its name, default, meaning and parser. The
parsers raise `ConfigError` naming the variable, so a bad value ends the command with one line
(`baton: BATON_X: what is wrong`, exit code 2); `baton serve --help` and the README's
configuration table are generated from the same list.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from baton.numbers import ascii_int

DEFAULT_DATA_DIR = ".baton"
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
DATABASE_SCHEMES = ("postgresql", "postgres", "postgresql+asyncpg")
BROADCAST_SCHEMES = ("postgresql", "postgres", "redis", "rediss", "memory")
LOG_FORMATS = ("text", "json")
SPAN_EXPORTERS = ("otlp", "console", "none")
OTLP_PROTOCOL = "http/protobuf"
# pg_ctl hands the socket directory to a shell unquoted (see store/embedded.py).
_SHELL_UNSAFE = re.compile(r"[\s'\"\\$`;&|<>()*?\[\]{}!#]")


class ConfigError(Exception):
    """A configuration variable with a value Baton cannot use."""

    def __init__(self, variable: str, problem: str) -> None:
        super().__init__(f"{variable}: {problem}")
        self.variable = variable
        self.problem = problem


@dataclass(frozen=True)
class Settings:
    database_url: str | None = None
    # The same database without the pooler BATON_DATABASE_URL may go through: LISTEN, migrations.
    database_direct_url: str | None = None
    data_dir: Path = Path(DEFAULT_DATA_DIR)
    broadcast_url: str | None = None
    log_level: str = "info"
    poll_seconds: float = 1.0
    max_body_bytes: int = 1024 * 1024
    run_lease_seconds: float = 60.0
    ws_init_timeout: float = 10.0
    max_unauthenticated_sockets: int = 1000
    token_check_seconds: float = 5.0
    # WebSocket hardening: what one socket or one token may hold.
    ws_max_queued_bytes: int = 4 * 1024 * 1024
    ws_send_timeout: float = 30.0
    max_sockets_per_token: int = 20
    max_sockets: int = 20_000
    # Bytes waiting for clients, every door (baton.web.outbound): per token and per process.
    max_queued_bytes_per_token: int = 64 * 1024 * 1024
    max_queued_bytes: int = 256 * 1024 * 1024
    database_pool_size: int = 16
    metrics_token: str | None = None
    metrics_address: tuple[str, int] | None = None
    # Retention of finished work (baton.services.retention); None: everything is kept.
    retention_seconds: float | None = None
    # How long the process removing finished work holds its turn without a batch: another
    # process takes over a sweep this long after its sweeper died.
    retention_lease_seconds: float = 60.0
    # Webhooks (baton.webhooks): kept together.
    webhook_allow_private: bool = False
    webhook_allow_http: bool = False
    webhook_secret_key: str | None = None
    webhook_timeout_seconds: float = 10.0
    webhook_retry_seconds: float = 5.0
    webhook_max_attempts: int = 11
    webhook_concurrency: int = 16
    # The MCP door (baton.mcp): kept together.
    mcp_max_sessions: int = 1000
    mcp_max_sessions_per_token: int = 20
    mcp_max_subscriptions: int = 100
    mcp_session_idle_seconds: float = 1800.0
    # For `baton mcp` (a client of a running server): where it is, and the token to use.
    url: str = "http://127.0.0.1:8000"
    token: str | None = None
    # GraphQL over Server-Sent Events (baton.web.graphql_sse): kept together.
    sse_keep_alive_seconds: float = 15.0
    sse_max_streams: int = 10_000
    sse_max_streams_per_token: int = 100
    sse_max_queued_bytes: int = 1024 * 1024
    # The A2A door (baton.a2a); its streams are held to the SSE bounds above.
    a2a_blocking_seconds: float = 10.0
    # Logs and traces (baton.telemetry): kept together. Tracing is off unless OTEL_* say.
    log_format: str = "text"
    otel_sdk_disabled: bool = False
    otel_traces_exporter: tuple[str, ...] | None = None
    otel_endpoint: str | None = None
    otel_traces_endpoint: str | None = None
    otel_protocol: str | None = None
    otel_traces_protocol: str | None = None
    # Where `data_dir` came from: the variable, a `.baton` found above the working
    # directory, or the default. Said on stderr by the commands that use the database.
    data_dir_source: str = field(default="default", compare=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings in `environ` (default: the process environment); raises
        `ConfigErrors` listing every variable with an unusable value."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        problems: list[ConfigError] = []
        for variable in VARIABLES:
            raw = env.get(variable.name)
            if raw is None or raw == "":
                continue
            try:
                values[variable.field] = variable.parse(variable.name, raw)
            except ConfigError as exc:
                problems.append(exc)
        if "data_dir" in values:
            values["data_dir_source"] = "BATON_DATA_DIR"
        else:
            try:
                found = find_data_dir(Path.cwd())
            except OSError:  # the working directory was removed
                found = None
            if found is not None:
                values["data_dir"], values["data_dir_source"] = found, "found"
        settings = cls(**values)
        if settings.database_url is None and not problems:
            try:
                check_data_dir(settings.data_dir)
            except ConfigError as exc:
                problems.append(exc)
        if settings.traces and not problems:
            problems += _tracing_problems(settings)
        if problems:
            raise ConfigErrors(problems)
        return settings

    @property
    def embedded(self) -> bool:
        return self.database_url is None

    @property
    def traces(self) -> tuple[str, ...]:
        """The span exporters in use; none, tracing off, unless OTEL_TRACES_EXPORTER names one
        or, unset, an OTLP endpoint is set. OTEL_SDK_DISABLED=true turns it off whatever else."""
        if self.otel_sdk_disabled:
            return ()
        if self.otel_traces_exporter is not None:
            return tuple(name for name in self.otel_traces_exporter if name != "none")
        return ("otlp",) if self.otel_endpoint or self.otel_traces_endpoint else ()

    @property
    def otlp_traces_url(self) -> str:
        """Where OTLP/HTTP spans are sent, as OpenTelemetry's SDK reads the variables."""
        if self.otel_traces_endpoint:
            return self.otel_traces_endpoint
        base = self.otel_endpoint or "http://localhost:4318"
        return base.rstrip("/") + "/v1/traces"


class ConfigErrors(Exception):
    def __init__(self, errors: list[ConfigError]) -> None:
        super().__init__("; ".join(map(str, errors)))
        self.errors = errors


# --- parsers -----------------------------------------------------------------------------


def _url(name: str, raw: str, schemes: tuple[str, ...]) -> str:
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError as exc:
        raise ConfigError(name, f"not a valid URL ({exc})") from None
    if parts.scheme not in schemes:
        got = f"scheme {parts.scheme!r}" if parts.scheme else "no scheme"
        raise ConfigError(name, f"must be a {' or '.join(s + '://' for s in schemes)} URL ({got})")
    return raw


def database_url(name: str, raw: str) -> str:
    url = _url(name, raw, DATABASE_SCHEMES)
    parts = urlsplit(url)
    if not parts.path.strip("/") and "host=" not in parts.query and not parts.hostname:
        raise ConfigError(name, "names no server and no database")
    return url


def web_url(name: str, raw: str) -> str:
    url = _url(name, raw, ("http", "https"))
    if not urlsplit(url).hostname:
        raise ConfigError(name, "names no host")
    return url


def broadcast_url(name: str, raw: str) -> str:
    return _url(name, raw, BROADCAST_SCHEMES)


def number(
    kind: type[int] | type[float], low: float, high: float
) -> Callable[[str, str], int | float]:
    def parse(name: str, raw: str) -> int | float:
        try:
            value = kind(raw.strip())
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise ConfigError(name, f"must be {what} (got {raw[:40]!r})") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise ConfigError(name, f"must be between {low:g} and {high:g} (got {raw[:40]})")
        return value

    return parse


def log_level(name: str, raw: str) -> str:
    level = raw.strip().lower()
    if level not in LOG_LEVELS:
        raise ConfigError(name, f"must be one of {', '.join(LOG_LEVELS)} (got {raw[:40]!r})")
    return level


def path(name: str, raw: str) -> Path:
    return Path(raw).expanduser()


def text(name: str, raw: str) -> str:
    return raw


def address(name: str, raw: str) -> tuple[str, int]:
    host, sep, port = raw.strip().rpartition(":")
    host = host.strip("[]")
    number = ascii_int(port, 65535)
    if not sep or not host or number is None:
        raise ConfigError(name, f"must be HOST:PORT, e.g. 127.0.0.1:9100 (got {raw[:60]!r})")
    return host, number


PERIOD_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_PERIOD = re.compile(r"(?:\d{1,9}[smhdw])+")


def period(name: str, raw: str) -> float:
    """A period such as `90d`, `12h` or `1d12h`, in seconds (at least 1 s, at most 100 years)."""
    value = raw.strip().lower()
    if not _PERIOD.fullmatch(value):
        raise ConfigError(
            name, f"must be a period such as 90d, 12h, 30m or 1d12h (got {raw[:40]!r})"
        )
    seconds = sum(
        int(count) * PERIOD_UNITS[unit] for count, unit in re.findall(r"(\d+)([smhdw])", value)
    )
    if not 1 <= seconds <= 100 * 365 * 86_400:
        raise ConfigError(name, f"must be between 1s and 100 years (got {raw[:40]})")
    return float(seconds)


def flag(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigError(name, f"must be true or false (got {raw[:40]!r})")


def secret_key(name: str, raw: str) -> str:
    if len(raw) < 32:
        raise ConfigError(name, "must be at least 32 characters (e.g. `openssl rand -base64 32`)")
    return raw


def log_format(name: str, raw: str) -> str:
    value = raw.strip().lower()
    if value not in LOG_FORMATS:
        raise ConfigError(name, f"must be {' or '.join(LOG_FORMATS)} (got {raw[:40]!r})")
    return value


def span_exporters(name: str, raw: str) -> tuple[str, ...]:
    names = tuple(part.strip().lower() for part in raw.split(",") if part.strip())
    unknown = [n for n in names if n not in SPAN_EXPORTERS]
    if unknown or not names:
        raise ConfigError(
            name, f"must name {', '.join(SPAN_EXPORTERS)} (comma-separated; got {raw[:40]!r})"
        )
    return names


def _tracing_problems(settings: Settings) -> list[ConfigError]:
    """What stops traces configured by OTEL_* from being exported as asked."""
    if "otlp" not in settings.traces:
        return []
    name = (
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
        if settings.otel_traces_protocol
        else "OTEL_EXPORTER_OTLP_PROTOCOL"
    )
    protocol = settings.otel_traces_protocol or settings.otel_protocol or OTLP_PROTOCOL
    if protocol.strip().lower() != OTLP_PROTOCOL:
        return [
            ConfigError(name, f"Baton exports OTLP as {OTLP_PROTOCOL} only (got {protocol[:40]!r})")
        ]
    return []


def find_data_dir(start: Path) -> Path | None:
    """The nearest `.baton` holding an embedded database, in `start` or above it: a command
    run from a subdirectory uses the project's database instead of starting a second one."""
    for directory in (start, *start.parents):
        candidate = directory / DEFAULT_DATA_DIR
        if (candidate / "pgdata").is_dir():
            return candidate
    return None


def check_data_dir(data_dir: Path) -> None:
    """Raise `ConfigError` unless the embedded PostgreSQL can live in `data_dir`."""
    name = "BATON_DATA_DIR"
    resolved = data_dir.expanduser().resolve()
    if _SHELL_UNSAFE.search(str(resolved)):
        raise ConfigError(name, f"{resolved} contains whitespace or shell metacharacters")
    if resolved.exists() and not resolved.is_dir():
        raise ConfigError(name, f"{resolved} exists and is not a directory")
    existing = resolved
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(name, f"{existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(name, f"{existing} is not writable")
    for home in _root_homes():
        if resolved.is_relative_to(home):
            raise ConfigError(
                name,
                f"{resolved} is inside {home}, which the embedded PostgreSQL would make "
                "readable by every user; use a directory outside it (e.g. /var/lib/baton)",
            )


def _root_homes() -> set[Path]:
    from baton.store.embedded import _root_homes as homes

    return homes()


@dataclass(frozen=True)
class Variable:
    name: str
    field: str
    default: str
    help: str
    parse: Callable[[str, str], Any]


VARIABLES = (
    Variable(
        "BATON_DATABASE_URL",
        "database_url",
        "unset: embedded",
        "postgresql://USER@HOST:PORT/DB; unset: an embedded PostgreSQL in BATON_DATA_DIR",
        database_url,
    ),
    Variable(
        "BATON_DATABASE_DIRECT_URL",
        "database_direct_url",
        "unset: BATON_DATABASE_URL",
        "postgresql://… to the same database, not through a pooler; needed when "
        "BATON_DATABASE_URL goes through one (PgBouncer in transaction mode) and the "
        "broadcaster is the database: LISTEN/NOTIFY and migrations use it",
        database_url,
    ),
    Variable(
        "BATON_DATA_DIR",
        "data_dir",
        "./.baton",
        "where the embedded PostgreSQL lives; unset: the nearest .baton holding one in the "
        "working directory or above it, else ./.baton",
        path,
    ),
    Variable(
        "BATON_BROADCAST_URL",
        "broadcast_url",
        "the database",
        "postgres://… (LISTEN/NOTIFY on the database), redis://…, or memory:// (one process)",
        broadcast_url,
    ),
    Variable(
        "BATON_LOG_LEVEL", "log_level", "info", "critical, error, warning, info or debug", log_level
    ),
    Variable(
        "BATON_POLL_SECONDS",
        "poll_seconds",
        "1",
        "how often each process re-reads the event log without a wake-up",
        number(float, 0.01, 3600),
    ),
    Variable(
        "BATON_RUN_LEASE_SECONDS",
        "run_lease_seconds",
        "60",
        "how long a claimed pipeline run stays claimed without a heartbeat",
        number(float, 0.1, 86_400),
    ),
    Variable(
        "BATON_MAX_BODY_BYTES",
        "max_body_bytes",
        "1048576",
        "largest request body and WebSocket message (413 / close 1009 past it)",
        number(int, 1024, 64 * 1024 * 1024),
    ),
    Variable(
        "BATON_WS_INIT_TIMEOUT",
        "ws_init_timeout",
        "10",
        "seconds a WebSocket may take to send connection_init (then close 4408)",
        number(float, 0.1, 3600),
    ),
    Variable(
        "BATON_MAX_UNAUTHENTICATED_SOCKETS",
        "max_unauthenticated_sockets",
        "1000",
        "WebSockets per process not yet acknowledged (more are closed with 1013)",
        number(int, 1, 1_000_000),
    ),
    Variable(
        "BATON_TOKEN_CHECK_SECONDS",
        "token_check_seconds",
        "5",
        "a revoked or expired token stops working within this many seconds (HTTP, open "
        "WebSockets, which are closed with 4403, event streams and MCP sessions)",
        number(float, 0.1, 300),
    ),
    # WebSocket hardening: what one socket or one token may hold (see baton.web.graphql_ws).
    Variable(
        "BATON_WS_MAX_QUEUED_BYTES",
        "ws_max_queued_bytes",
        "4194304",
        "bytes waiting to be sent to one WebSocket's peer; past it the socket is closed (1008)",
        number(int, 64 * 1024, 1024 * 1024 * 1024),
    ),
    Variable(
        "BATON_WS_SEND_TIMEOUT",
        "ws_send_timeout",
        "30",
        "seconds a WebSocket's peer may take none of what waits to be sent to it (then the "
        "socket is closed with 1008)",
        number(float, 0.5, 3600),
    ),
    Variable(
        "BATON_MAX_SOCKETS_PER_TOKEN",
        "max_sockets_per_token",
        "20",
        "WebSockets one token may hold open per process (past it `connection_init` is refused "
        "with close 1008)",
        number(int, 1, 1_000_000),
    ),
    Variable(
        "BATON_MAX_SOCKETS",
        "max_sockets",
        "20000",
        "WebSockets open at once per process (past it the oldest not yet initialised makes "
        "room, else the new one is closed with 1013, try again later)",
        number(int, 1, 10_000_000),
    ),
    Variable(
        "BATON_MAX_QUEUED_BYTES_PER_TOKEN",
        "max_queued_bytes_per_token",
        "67108864",
        "bytes one token's answers, events and frames may hold in a process while its clients "
        "have not taken them (every door); a request that finds no room in it for the largest "
        "answer (16 MiB) is refused with 429 before it runs, and an event or frame past it "
        "resets the token's connection holding the most",
        number(int, 64 * 1024, 64 * 1024 * 1024 * 1024),
    ),
    Variable(
        "BATON_MAX_QUEUED_BYTES",
        "max_queued_bytes",
        "268435456",
        "bytes all clients' answers, events and frames may hold in a process while not taken "
        "(unauthenticated requests included); past it the connection holding the most is "
        "reset, and a query's answer that still does not fit is refused with 503",
        number(int, 1024 * 1024, 64 * 1024 * 1024 * 1024),
    ),
    Variable(
        "BATON_DATABASE_POOL_SIZE",
        "database_pool_size",
        "16",
        "database connections one server opens at most, shared by its `--workers` processes "
        "(each gets at least 2)",
        number(int, 2, 1000),
    ),
    Variable(
        "BATON_METRICS_TOKEN",
        "metrics_token",
        "unset: admin API tokens only",
        "GET /metrics always needs a bearer token: an admin API token, or this value when set "
        "(a token for the scraper alone)",
        text,
    ),
    Variable(
        "BATON_METRICS_ADDRESS",
        "metrics_address",
        "unset: the main port",
        "HOST:PORT to serve /metrics on instead of the main address (the token is still "
        "needed there)",
        address,
    ),
    Variable(
        "BATON_RETENTION",
        "retention_seconds",
        "unset: keep everything",
        "remove a task or run this long after it finished (completed, rejected, cancelled; a "
        "run: completed), with its events, checkpoints and webhook deliveries, e.g. 90d or "
        "12h; open work is never removed, and a stream cursor older than what is kept is "
        "refused (cursor_expired)",
        period,
    ),
    Variable(
        "BATON_RETENTION_LEASE_SECONDS",
        "retention_lease_seconds",
        "60",
        "how long the one process removing finished work keeps its turn after its last batch: "
        "if it dies mid-sweep, another process takes the removal over this long after",
        number(float, 1, 3600),
    ),
    # --- webhooks ---
    Variable(
        "BATON_WEBHOOK_ALLOW_PRIVATE",
        "webhook_allow_private",
        "false",
        "true: webhook URLs may resolve to loopback, private or link-local addresses (tests, "
        "local development)",
        flag,
    ),
    Variable(
        "BATON_WEBHOOK_ALLOW_HTTP",
        "webhook_allow_http",
        "false",
        "true: webhook URLs may be plain http:// (otherwise https:// only)",
        flag,
    ),
    Variable(
        "BATON_WEBHOOK_SECRET_KEY",
        "webhook_secret_key",
        "unset: stored as given",
        "when set (32+ characters), webhook signing secrets are stored encrypted with it "
        "(AES-256-GCM); unset, they are stored in plain text in the database",
        secret_key,
    ),
    Variable(
        "BATON_WEBHOOK_TIMEOUT_SECONDS",
        "webhook_timeout_seconds",
        "10",
        "the most one webhook attempt may take (connect, send, read the answer)",
        number(float, 0.1, 120),
    ),
    Variable(
        "BATON_WEBHOOK_RETRY_SECONDS",
        "webhook_retry_seconds",
        "5",
        "the first webhook retry's delay; each later one waits 4 times longer, at most 6 h, "
        "with ±20 % jitter",
        number(float, 0.01, 3600),
    ),
    Variable(
        "BATON_WEBHOOK_MAX_ATTEMPTS",
        "webhook_max_attempts",
        "11",
        "attempts at one event before its endpoint is disabled (11 at the default delays: "
        "about 25 h)",
        number(int, 1, 100),
    ),
    Variable(
        "BATON_WEBHOOK_CONCURRENCY",
        "webhook_concurrency",
        "16",
        "webhook endpoints one process delivers to at once",
        number(int, 1, 1000),
    ),
    # --- the MCP door ---
    Variable(
        "BATON_MCP_MAX_SESSIONS",
        "mcp_max_sessions",
        "1000",
        "MCP sessions and subscriptions/listen streams one process holds at once on /mcp (a "
        "new one past it: 503)",
        number(int, 1, 1_000_000),
    ),
    Variable(
        "BATON_MCP_MAX_SESSIONS_PER_TOKEN",
        "mcp_max_sessions_per_token",
        "20",
        "MCP sessions and subscriptions/listen streams one token holds open at once per "
        "process (a new one past it: 429)",
        number(int, 1, 100_000),
    ),
    Variable(
        "BATON_MCP_MAX_SUBSCRIPTIONS",
        "mcp_max_subscriptions",
        "100",
        "resources one MCP session (or listen stream) may subscribe to",
        number(int, 1, 10_000),
    ),
    Variable(
        "BATON_MCP_SESSION_IDLE_SECONDS",
        "mcp_session_idle_seconds",
        "1800",
        "an MCP session with no request in flight (and no open stream) for this long is ended",
        number(float, 1, 86_400),
    ),
    Variable(
        "BATON_URL",
        "url",
        "http://127.0.0.1:8000",
        "for `baton mcp`: the running Baton it talks to (its /mcp)",
        web_url,
    ),
    Variable(
        "BATON_TOKEN",
        "token",
        "unset",
        "for `baton mcp`: the API token it acts with (`baton token create`); required there",
        text,
    ),
    # --- GraphQL over Server-Sent Events ---
    Variable(
        "BATON_SSE_KEEP_ALIVE_SECONDS",
        "sse_keep_alive_seconds",
        "15",
        "an event stream that has sent nothing for this long gets a comment line (within "
        "half as long again), so proxies keep it open",
        number(float, 0.1, 3600),
    ),
    Variable(
        "BATON_SSE_MAX_STREAMS",
        "sse_max_streams",
        "10000",
        "event streams one process keeps open at once (past it 503 with Retry-After)",
        number(int, 1, 1_000_000),
    ),
    Variable(
        "BATON_SSE_MAX_STREAMS_PER_TOKEN",
        "sse_max_streams_per_token",
        "100",
        "event streams one token may have open at once on one process (past it 429)",
        number(int, 1, 1_000_000),
    ),
    Variable(
        "BATON_SSE_MAX_QUEUED_BYTES",
        "sse_max_queued_bytes",
        "1048576",
        "bytes of events one stream may hold for a client that does not read them fast "
        "enough (besides the one being sent); past it the stream is dropped",
        number(int, 1024, 1024 * 1024 * 1024),
    ),
    # --- the A2A door ---
    Variable(
        "BATON_A2A_BLOCKING_SECONDS",
        "a2a_blocking_seconds",
        "10",
        "the longest an A2A SendMessage without `returnImmediately` waits for its task to be "
        "final or interrupted (then it answers with the task as it is); 0: it answers at once",
        number(float, 0, 60),
    ),
    # --- logs and traces (baton.telemetry) ---
    Variable(
        "BATON_LOG_FORMAT",
        "log_format",
        "text",
        "json: one JSON object a line (time, level, logger, message, and the request's id, "
        "principal and operation); text: one line of text",
        log_format,
    ),
    Variable(
        "OTEL_TRACES_EXPORTER",
        "otel_traces_exporter",
        "unset: otlp if an OTLP endpoint is set, else no traces",
        "otlp (OTLP over HTTP/protobuf), console (stdout) or none; comma-separated for several. "
        "Traces are off unless this or an endpoint below is set; the other OTEL_* variables "
        "(service name, sampler, headers, batching) are read as OpenTelemetry's SDK reads them",
        span_exporters,
    ),
    Variable(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "otel_endpoint",
        "unset: http://localhost:4318",
        "the OTLP/HTTP collector; spans go to its /v1/traces",
        web_url,
    ),
    Variable(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "otel_traces_endpoint",
        "unset: from OTEL_EXPORTER_OTLP_ENDPOINT",
        "the full URL spans are posted to",
        web_url,
    ),
    Variable(
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "otel_protocol",
        "http/protobuf",
        "http/protobuf is the only one Baton exports (the gRPC exporter is not installed)",
        text,
    ),
    Variable(
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "otel_traces_protocol",
        "unset: OTEL_EXPORTER_OTLP_PROTOCOL",
        "the same, for traces alone",
        text,
    ),
    Variable(
        "OTEL_SDK_DISABLED",
        "otel_sdk_disabled",
        "false",
        "true: no traces, whatever the other OTEL_* variables say",
        flag,
    ),
)

assert {v.field for v in VARIABLES} == {f.name for f in fields(Settings)} - {"data_dir_source"}
