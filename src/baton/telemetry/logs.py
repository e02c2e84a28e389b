"""Log lines: text (the default), or one JSON object a line (`BATON_LOG_FORMAT=json`).

A JSON line holds `time` (UTC, ISO 8601 to the millisecond), `level`, `logger` and `message`,
then what is known of the request it belongs to (`baton.telemetry.requests`): `request_id`,
`principal` (a name such as `alice/reviewer`, never a token) and `operation`; an access line
(`baton serve --access-log`, one per request when it ends) adds `method`, `path` (never the
query string), `status`, `client` and `duration_ms`. While tracing, `trace_id` and `span_id`
name the span the line was written in, and a failure's traceback is under `exception`.

Baton logs no token, header or request body. As a second guard, every line, text or JSON, is
scrubbed of what has the shape of a secret: an API token keeps only the prefix that `baton
token list` shows, a webhook secret only `whsec_`, a URL's password becomes `***`.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import MutableMapping
from typing import IO, Any

import orjson

from baton.telemetry import requests, spans

TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
TRACE = 5  # BATON_LOG_LEVEL=trace
ACCESS = logging.getLogger("baton.access")
FIELDS = "baton_fields"  # an access record's own fields (`extra`)
# What a text access line adds to its message (which says the method, path, status and time).
TEXT_FIELDS = ("client", "request_id", "principal", "operation")

# An API token (`baton_` and 43 characters of base64url: `baton.access.tokens`), a webhook
# signing secret (`whsec_` and base64), and a password in a URL's user part.
_SECRETS = re.compile(
    r"(?P<token>baton_[A-Za-z0-9_-]{6})[A-Za-z0-9_-]{37}(?![A-Za-z0-9_-])"
    r"|(?P<whsec>whsec_)[A-Za-z0-9+/=]{8,}"
    r"|(?P<user>[a-z][a-z0-9+.-]*://[^\s:/@]*:)[^\s@/]+@"
)


def _hide(found: re.Match[str]) -> str:
    if found["token"]:
        return found["token"] + "…"
    if found["whsec"]:
        return "whsec_…"
    return found["user"] + "***@"


def scrub(text: str) -> str:
    """`text` with what looks like a token, a signing secret or a URL's password hidden."""
    return _SECRETS.sub(_hide, text)


def _level(record: logging.LogRecord) -> str:
    return "trace" if record.levelno == TRACE else record.levelname.lower()


class TextFormatter(logging.Formatter):
    """The text lines, scrubbed; an access line ends with its request's fields."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        own = getattr(record, FIELDS, None)
        if isinstance(own, dict):
            line += "".join(f" {key}={own[key]}" for key in TEXT_FIELDS if own.get(key))
        return scrub(line)


class JSONFormatter(logging.Formatter):
    """One JSON object a line (orjson escapes every newline inside a value)."""

    def format(self, record: logging.LogRecord) -> str:
        created = record.created
        line: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
            + f".{int(created * 1000) % 1000:03d}Z",
            "level": _level(record),
            "logger": record.name,
            "message": scrub(record.getMessage()),
        }
        request = requests.CURRENT.get()
        if request is not None:
            line["request_id"] = request.id
            if request.principal is not None:
                line["principal"] = request.principal
            if request.operation is not None:
                line["operation"] = request.operation
        own = getattr(record, FIELDS, None)
        if isinstance(own, dict):
            line.update((key, value) for key, value in own.items() if value is not None)
        traced = spans.ids()
        if traced is not None:
            line["trace_id"], line["span_id"] = traced
        if record.exc_info:
            line["exception"] = scrub(self.formatException(record.exc_info))
        if record.stack_info:
            line["stack"] = scrub(self.formatStack(record.stack_info))
        return orjson.dumps(line, default=str).decode()


def configure(level: str, format: str, stream: IO[str] | None = None) -> None:
    """The process's log lines: `level` (BATON_LOG_LEVEL) in `format` (BATON_LOG_FORMAT)."""
    logging.addLevelName(TRACE, "TRACE")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JSONFormatter() if format == "json" else TextFormatter(TEXT))
    logging.basicConfig(level=TRACE if level == "trace" else level.upper(), handlers=[handler])
    if format == "json":
        requests.wanted = True  # background work is a request of its own, for its lines
        logging.captureWarnings(True)  # a warning is a line like any other, not raw text


def access(request: requests.Request, scope: MutableMapping[str, Any], status: int | None) -> None:
    """The access line of a request that has ended (`baton serve --access-log`)."""
    if not ACCESS.isEnabledFor(logging.INFO):
        return
    duration = round((time.perf_counter() - request.started) * 1000, 3)
    method = scope.get("method") or "WS"  # a WebSocket's scope has no method
    path = scope.get("path", "")
    client = scope.get("client")
    fields = {
        "request_id": request.id,
        "principal": request.principal,
        "operation": request.operation,
        "method": method,
        "path": path,
        "status": status,
        "client": f"{client[0]}:{client[1]}" if client else None,
        "duration_ms": duration,
    }
    ACCESS.info("%s %s %s %.1f ms", method, path, status or "-", duration, extra={FIELDS: fields})
