"""Prometheus metrics, on a registry of our own so tests can read them in isolation."""

from __future__ import annotations

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
