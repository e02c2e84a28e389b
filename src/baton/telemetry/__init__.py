"""What an operator reads of a running Baton besides /metrics: logs and traces.

- `requests`: the request each log line belongs to (its id, principal and operation), read
  from a context variable the doors fill in as they learn them;
- `logs`: text or JSON lines (`BATON_LOG_FORMAT`), with tokens and secrets scrubbed, and the
  access line of each request;
- `spans`: Baton's own spans (GraphQL's parse, validate and execute, the gate, a move, a
  webhook delivery), a shared do-nothing context manager while tracing is off;
- `tracing`: OpenTelemetry's SDK, OTLP exporter and instrumentations, set up when `OTEL_*`
  configures traces and imported only then.
"""
