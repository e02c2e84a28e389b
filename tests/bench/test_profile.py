"""bench.profile runs whole, briefly: each workload it offers is measured, the moves on a task or
run of their own each time (a repeated one would be refused and the run would stop)."""

from __future__ import annotations

import os
import subprocess
import sys


def test_every_repeatable_workload_gets_a_row_and_moves_never_reuse_a_subject() -> None:
    database = os.environ.get("BATON_TEST_DATABASE_URL")
    workloads = ("W1", "W2", "W3", "W4", "W5", "W6")
    done = subprocess.run(
        [sys.executable, "-m", "bench.profile", "--workloads", ",".join(workloads)]
        + ["--requests", "40", "--rounds", "2", "--tasks", "500"]
        + (["--database-url", database] if database else []),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {
        cells[0]: cells
        for line in done.stdout.splitlines()
        if len(cells := [cell.strip() for cell in line.strip("|").split("|")]) == 4
    }
    for name in workloads:
        assert name in rows, done.stdout
        assert rows[name][1] == "40"
        assert float(rows[name][2].split()[0]) > 0
