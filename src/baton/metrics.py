"""Prometheus metrics, on a registry of our own so tests can read them in isolation."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry()

HTTP_REQUESTS = Counter(
    "baton_http_requests",
    "HTTP requests answered, by path and status.",
    ["path", "status"],
    registry=REGISTRY,
)
MOVES = Counter(
    "baton_moves",
    "Mutations that change a task, by mutation and outcome (ok or an error code).",
    ["mutation", "outcome"],
    registry=REGISTRY,
)
LIVE_SUBSCRIPTIONS = Gauge(
    "baton_live_subscriptions", "Subscriptions open on this process.", registry=REGISTRY
)
EVENTS_DELIVERED = Counter(
    "baton_events_delivered", "Events sent to subscribers.", registry=REGISTRY
)
DELIVERY_LAG = Histogram(
    "baton_event_delivery_lag_seconds",
    "From an event's commit to its send to a subscriber.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=REGISTRY,
)
DB_STATEMENTS = Counter(
    "baton_db_statements",
    "SQL statements sent to PostgreSQL (each one round trip; BEGIN and COMMIT included).",
    registry=REGISTRY,
)


# Labelled children by (metric, label values): prometheus_client's `labels` validates, locks
# and looks up on every call, a cost on every request; the values counted here are few.
_CHILDREN: dict[tuple[Counter, tuple[str, ...]], Any] = {}


def count(metric: Counter, *values: str) -> None:
    """`metric.labels(*values).inc()`, the child looked up once per label values."""
    key = (metric, values)
    child = _CHILDREN.get(key)
    if child is None:
        child = _CHILDREN[key] = metric.labels(*values)
    child.inc()
