"""`python -m bench.doors`, tiny: on one real `baton serve` every door's operations and every
way of delivering an event are measured (each stream and webhook endpoint receiving every
checkpoint, or the sitting fails), and the one table has a row for each, with its ratio to
GraphQL over HTTP or to a WebSocket delivery."""

from __future__ import annotations

import pytest
from bench.doors import ROWS, arguments, main_async


async def test_one_sitting_prints_every_door_in_one_table_with_its_ratio_to_its_base(
    server_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--calls", "5", "--events", "3", "--subscribers", "2", "--endpoints", "2"]
    assert await main_async(arguments([*argv, "--rounds", "1", "--database-url", server_url])) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    head, rule, *body = lines
    assert [c.strip() for c in head.strip("|").split("|")] == [
        "door",
        "per",
        "server CPU µs",
        "min-max",
        "ratio",
        "to",
    ]
    assert set(rule) <= {"|", "-", " "}
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in body]
    assert [(c[0], c[1], c[5]) for c in cells] == [
        (row.door, row.what, next(r.door for r in ROWS if r.key == row.base)) for row in ROWS
    ]
    for c in cells:
        float(c[2])  # a figure for every row
        assert c[4] == "n/a" or float(c[4]) >= 0, c


def test_a_sitting_with_nothing_to_count_is_refused_at_once() -> None:
    for flag in ("--events", "--calls", "--subscribers"):
        with pytest.raises(SystemExit):
            arguments([flag, "0"])
