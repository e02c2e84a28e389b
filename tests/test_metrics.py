"""The delivery metrics, counted in plain attributes, read as Prometheus histograms are."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from baton.metrics import Deliveries


def test_a_lag_is_counted_in_the_first_bucket_whose_bound_holds_it() -> None:
    registry = CollectorRegistry()
    deliveries = Deliveries()
    registry.register(deliveries)
    for lag in (0.0, 0.001, 0.0011, 0.3, 11.0):  # 0.001: on a bound, which holds it
        deliveries.sent(lag)

    def bucket(le: str) -> float | None:
        return registry.get_sample_value("baton_event_delivery_lag_seconds_bucket", {"le": le})

    assert [bucket(le) for le in ("0.001", "0.0025", "0.25", "0.5", "10.0", "+Inf")] == [
        2.0,
        3.0,
        3.0,
        4.0,
        4.0,
        5.0,
    ]
    assert registry.get_sample_value("baton_event_delivery_lag_seconds_count") == 5.0
    lags = registry.get_sample_value("baton_event_delivery_lag_seconds_sum")
    assert lags == pytest.approx(11.3021)
    assert registry.get_sample_value("baton_events_delivered_total") == 5.0
