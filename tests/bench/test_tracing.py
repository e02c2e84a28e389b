"""bench.tracing runs whole, briefly: every configuration answers both requests, and only the
traced one's spans reach its receiver."""

from __future__ import annotations

import os
import subprocess
import sys


def test_a_short_sitting_measures_every_configuration_and_counts_only_traced_spans() -> None:
    database = os.environ.get("BATON_TEST_DATABASE_URL")
    done = subprocess.run(
        [sys.executable, "-m", "bench.tracing", "--requests", "20", "--concurrency", "2"]
        + ["--repetitions", "1"]
        + (["--database-url", database] if database else []),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # The table's rows: the configuration's words, then the request and 7 figures.
    rows = [line.split() for line in done.stdout.splitlines()]
    spans = {
        (" ".join(row[:-8]), row[-8]): int(row[-2])
        for row in rows
        if len(row) > 8 and row[-8] in ("query", "move")
    }
    assert set(spans) == {
        (configuration, request)
        for configuration in ("off", "json logs", "traces, sampled out", "traces")
        for request in ("query", "move")
    }
    for (configuration, _), count in spans.items():
        assert (count > 0) is (configuration == "traces"), (configuration, count)


def test_the_front_door_and_a_span_are_measured_apart() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.tracing", "--front", "--requests", "20"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "µs per request" in done.stdout and "a Baton span, tracing off" in done.stdout
