"""A real OTLP/HTTP receiver for the tests: what a collector's `otlphttp` receiver does.

It listens on 127.0.0.1, takes `POST /v1/traces` bodies (protobuf `ExportTraceServiceRequest`,
gzip when the exporter compresses), answers an empty `ExportTraceServiceResponse`, and keeps
every span, flattened, and every raw body (to look for secrets in what was sent).
"""

from __future__ import annotations

import asyncio
import gzip
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

SERVER = ProtoSpan.SPAN_KIND_SERVER
CLIENT = ProtoSpan.SPAN_KIND_CLIENT


@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    parent_id: str  # "" for a trace's root
    name: str
    kind: int
    attributes: dict[str, Any]
    scope: str  # the instrumentation scope that made it
    resource: dict[str, Any]


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


class Collector:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()
        self.url = ""

    def take(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        found = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(
                        Span(
                            span.trace_id.hex(),
                            span.span_id.hex(),
                            span.parent_span_id.hex(),
                            span.name,
                            span.kind,
                            {a.key: _value(a.value) for a in span.attributes},
                            scope_spans.scope.name,
                            resource,
                        )
                    )
        with self.lock:
            self.bodies.append(body)
            self.spans.extend(found)

    def snapshot(self) -> list[Span]:
        with self.lock:
            return list(self.spans)

    async def wait(self, found: Callable[[list[Span]], Any], seconds: float = 20.0) -> Any:
        """The first truthy `found(spans)` over the spans received so far, waiting for more."""
        deadline = time.monotonic() + seconds
        while True:
            answer = found(self.snapshot())
            if answer:
                return answer
            if time.monotonic() > deadline:
                names = sorted({s.name for s in self.snapshot()})
                raise AssertionError(f"not received within {seconds} s; span names: {names}")
            await asyncio.sleep(0.05)

    def trace(self, trace_id: str) -> list[Span]:
        return [s for s in self.snapshot() if s.trace_id == trace_id]


def ancestors(span: Span, spans: list[Span]) -> list[Span]:
    """`span`'s parent, its parent's parent, … as far as `spans` hold them."""
    by_id = {s.span_id: s for s in spans}
    chain = []
    while span.parent_id in by_id:
        span = by_id[span.parent_id]
        chain.append(span)
    return chain


@contextmanager
def collecting() -> Iterator[Collector]:
    collector = Collector()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            if self.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            collector.take(body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            return  # quiet

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    collector.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield collector
    finally:
        server.shutdown()
        server.server_close()
