"""Prometheus metrics, on a registry of our own so tests can read them in isolation."""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

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
QUEUED_BYTES = Gauge(
    "baton_queued_bytes",
    "Bytes this process holds for clients that have not taken them yet (answers, events and "
    "frames on their way, and what the connections buffer).",
    registry=REGISTRY,
)
QUEUED_BYTES_LIMITED = Counter(
    "baton_queued_bytes_limited",
    "Answers refused, and connections reset, to keep the bytes waiting for clients within a "
    "budget: by action (refused or cut) and budget (token or process).",
    ["action", "budget"],
    registry=REGISTRY,
)


class Deliveries(Collector):
    """Events sent to subscribers (`baton_events_delivered`) and the time from each one's
    commit to its send (`baton_event_delivery_lag_seconds`), counted in plain attributes and
    read at scrape time. The live fan-out counts each of thousands of deliveries of an event:
    prometheus_client's checks and lock per call cost about 2 of the 34 µs of CPU per delivery
    at 10,000 subscribers (bench.live_delivery). Only the event loop counts, so no two counts
    run at once."""

    BOUNDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

    def __init__(self) -> None:
        self.created = time.time()
        self.count = 0
        self.lag_sum = 0.0
        self.buckets = [0] * (len(self.BOUNDS) + 1)  # the last: past every bound

    def sent(self, lag: float, subscribers: int = 1) -> None:
        """One event sent to `subscribers` subscribers, `lag` seconds after its commit."""
        self.count += subscribers
        self.lag_sum += lag * subscribers
        self.buckets[bisect_left(self.BOUNDS, lag)] += subscribers  # the first bound >= lag

    def collect(self) -> Iterator[Metric]:
        counter = CounterMetricFamily("baton_events_delivered", "Events sent to subscribers.")
        counter.add_metric([], self.count, created=self.created)
        yield counter
        cumulative, buckets = 0, []
        for bound, n in zip(
            (*map(floatToGoString, self.BOUNDS), "+Inf"), self.buckets, strict=True
        ):
            cumulative += n
            buckets.append((bound, float(cumulative)))
        yield HistogramMetricFamily(
            "baton_event_delivery_lag_seconds",
            "From an event's commit to its send to a subscriber.",
            buckets=buckets,
            sum_value=self.lag_sum,
        )


DELIVERIES = Deliveries()
REGISTRY.register(DELIVERIES)
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
