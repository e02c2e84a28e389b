"""`python -m bench.a2a`, tiny: every door's hand-off and every stream is measured on a real
`baton serve` of its own (on a fresh database of the test server), each stream receiving every
checkpoint, and the two tables name every door with its ratio to GraphQL's."""

from __future__ import annotations

import pytest
from bench.a2a import HAND_OFF_DOORS, LABELS, STREAM_DOORS, arguments, main_async


async def test_the_bench_measures_every_door_and_prints_its_ratio_to_graphql(
    server_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--calls", "3", "--events", "3", "--subscribers", "2", "--rounds", "1"]
    assert await main_async(arguments([*argv, "--database-url", server_url])) == 0
    out = capsys.readouterr().out
    hand_offs, streams = out.split("A streamed event")
    assert "CPU µs/call / GraphQL HTTP" in hand_offs
    assert "CPU µs/event / GraphQL SSE" in streams
    for door in HAND_OFF_DOORS:
        assert LABELS[door] in hand_offs, door
    for door in STREAM_DOORS:
        assert LABELS[door] in streams, door
    # Each stream got each of the 3 checkpoints: a missed one fails the measurement itself.
    rows = [line for line in streams.splitlines() if line.strip().startswith("A2A")]
    assert len(rows) == 2 and all(" 3.0 " in row for row in rows), rows
