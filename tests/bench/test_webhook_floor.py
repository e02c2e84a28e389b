"""`python -m bench.webhook_floor`, tiny: both ways of sending, at each concurrency, against a
receiver of its own, every message answered 200 (or it fails), in one table."""

from __future__ import annotations

import pytest
from bench.webhook_floor import main


def test_the_client_and_the_attempt_are_measured_at_each_concurrency(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--messages", "60", "--concurrency", "1,3", "--repetitions", "1"]) == 0
    head, *rows = capsys.readouterr().out.splitlines()
    assert head.split() == ["mode", "concurrency", "CPU", "µs/message", "min-max", "messages/s"]
    cells = [row.split() for row in rows]
    assert [(c[0], c[1]) for c in cells] == [
        ("client", "1"),
        ("attempt", "1"),
        ("client", "3"),
        ("attempt", "3"),
    ]
    assert all(float(c[2]) > 0 and int(c[4]) > 0 for c in cells)


def test_fewer_messages_than_senders_is_refused() -> None:
    with pytest.raises(SystemExit):
        main(["--messages", "2", "--concurrency", "3"])
