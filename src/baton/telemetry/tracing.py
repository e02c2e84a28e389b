"""Traces over OpenTelemetry, set up when `OTEL_*` configures them (`Settings.traces`).

This module is imported only then: while tracing is off, no part of OpenTelemetry's SDK,
exporters or instrumentations is loaded, and Baton's spans cost a function call
(`baton.telemetry.spans`).

Once `start` has run, the process has one tracer provider (set as OpenTelemetry's global
one, so the MCP SDK's spans join Baton's), sampling as `OTEL_TRACES_SAMPLER` says (every trace
by default, or the parent's decision), with a batch processor (`OTEL_BSP_*`) per exporter:
OTLP over HTTP/protobuf to `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else
`OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces` (headers, timeout, compression and certificates
from the other `OTEL_EXPORTER_OTLP_*` variables), and/or `console` (stdout). Each request
is one trace: the ASGI instrumentation's server span (continuing a client's `traceparent`),
with Baton's spans and asyncpg's statement spans under it. Its `send`/`receive` spans per ASGI
message are left out (an event stream would have thousands), and credentials never become
attributes: headers are recorded only as `OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_*` ask,
with `Authorization`, `Cookie` and the like always sanitized, and statements without their
parameters. Attribute values are cut at `DEFAULT_ATTRIBUTE_LENGTH` characters unless
`OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT` says otherwise.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context as OtelContext
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware, get_default_span_details
from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider, sampling
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes
from starlette.types import ASGIApp

from baton.settings import Settings
from baton.telemetry import requests, spans

SERVICE = "baton"
DEFAULT_ATTRIBUTE_LENGTH = 4096
# Header names (searched, any case) whose values a span never holds, if asked to record them.
SANITIZED_HEADERS = ["authorization", "cookie", "token", "secret", "api-key", "apikey"]
SANITIZE_VARIABLE = "OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SANITIZE_FIELDS"


class RequestsOnly(Sampler):
    """`inner`'s decisions, except that a statement run outside any request starts no trace:
    the hubs and the webhook worker poll the database every second, and a trace of one
    statement each would bury the requests. Statements of a request or a delivery are under
    its span and sampled with it."""

    def __init__(self, inner: Sampler) -> None:
        self.inner = inner

    def should_sample(
        self,
        parent_context: OtelContext | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        if (
            kind is SpanKind.CLIENT
            and not trace.get_current_span(parent_context).get_span_context().is_valid
        ):
            return SamplingResult(Decision.DROP)
        return self.inner.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )

    def get_description(self) -> str:
        return f"RequestsOnly{{{self.inner.get_description()}}}"


@dataclass
class Tracing:
    """The process's tracing: its provider, and the ASGI middleware that starts each trace."""

    provider: TracerProvider

    def middleware(self, app: ASGIApp) -> ASGIApp:
        own = [h.strip() for h in os.environ.get(SANITIZE_VARIABLE, "").split(",") if h.strip()]
        traced: Any = OpenTelemetryMiddleware(
            app,
            default_span_details=_span_details,
            tracer_provider=self.provider,
            exclude_spans=["receive", "send"],
            http_capture_headers_sanitize_fields=[*SANITIZED_HEADERS, *own],
        )
        return traced  # type: ignore[no-any-return]

    def flush(self, seconds: float = 5.0) -> bool:
        return self.provider.force_flush(int(seconds * 1000))


_started: Tracing | None = None


def _span_details(scope: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A server span's name: the method and path (`POST /graphql`), `WS` for a WebSocket's
    (the instrumentation's own would say `HTTP`)."""
    if scope.get("type") == "websocket":
        return f"WS {scope.get('path', '')}", {}
    return get_default_span_details(scope)


def _resource() -> Resource:
    """What OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES say, with `baton` and its version
    where they do not name a service."""
    resource = Resource.create()
    own: dict[str, str] = {}
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        own[SERVICE_NAME] = SERVICE
    if SERVICE_VERSION not in resource.attributes:
        # A source tree that was never installed has no version to give.
        with contextlib.suppress(PackageNotFoundError):
            own[SERVICE_VERSION] = version("baton")
    return resource.merge(Resource(own)) if own else resource


def _exporters(settings: Settings) -> list[SpanExporter]:
    found: list[SpanExporter] = []
    for name in settings.traces:
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            found.append(OTLPSpanExporter(endpoint=settings.otlp_traces_url))
        elif name == "console":
            found.append(ConsoleSpanExporter())
    return found


def start(settings: Settings, extra: Sequence[SpanExporter] = ()) -> Tracing:
    """Tracing for this process, as `settings` configure it (and to `extra` exporters too);
    once per process: a second call returns the first's."""
    global _started
    if _started is not None:
        return _started
    limits = None
    if not os.environ.get("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"):
        limits = SpanLimits(max_attribute_length=DEFAULT_ATTRIBUTE_LENGTH)
    # The sampler OTEL_TRACES_SAMPLER names (every trace, or the parent's decision, by default).
    sampler = RequestsOnly(sampling._get_from_env_or_default())
    provider = TracerProvider(resource=_resource(), sampler=sampler, span_limits=limits)
    for exporter in [*_exporters(settings), *extra]:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    # Statements become spans under the request's (their text, never their parameters). The
    # instrumentation is not annotated.
    instrumentor = AsyncPGInstrumentor(capture_parameters=False)  # type: ignore[no-untyped-call]
    instrumentor.instrument(tracer_provider=provider)
    spans.install(provider.get_tracer("baton"))
    requests.wanted = True
    _started = Tracing(provider)
    return _started
