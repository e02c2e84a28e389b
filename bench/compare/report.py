"""The tables: per core (one Baton process against one PostGraphile process), every
measurement, the medians with the ratios, and the statement counts."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from .run import Outcome, Row
from .workloads import FREE, POOLED, SCALED, TARGETS

ORDER = ("baton", POOLED, SCALED, *TARGETS[1:])  # the targets' order in the tables

# Baton's throughput divided by each of these, per repetition and as the median.
RATIOS = (
    ("postgraphile", "PostGraphile"),
    (FREE, "PostGraphile, no authorization"),
    ("bare", "bare"),
    ("asyncpg", "asyncpg"),
)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def measurements(rows: list[Row]) -> str:
    headers = (
        "rep", "workload", "c", "target", "req/s", "p50 ms", "p99 ms",
        "server CPU ms/req", "PG CPU ms/req", "errors",
    )  # fmt: skip
    cells = [
        (
            str(r.repetition),
            r.workload,
            str(r.concurrency),
            r.target,
            f"{r.rate:.0f}",
            f"{r.p50_ms:.2f}",
            f"{r.p99_ms:.2f}",
            _ms(r.per_request_ms(r.server_cpu)),
            _ms(r.per_request_ms(r.pg_cpu)),
            str(r.errors),
        )
        for r in rows
    ]
    return table(headers, cells)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summary(rows: list[Row]) -> str:
    """Per workload and concurrency: each target's medians, then Baton ÷ each other target."""
    keys = list(dict.fromkeys((r.workload, r.concurrency) for r in rows))
    headers = (
        "workload", "c", "target", "req/s", "p50 ms", "p99 ms", "server CPU ms/req",
        "PG CPU ms/req", "errors",
    )  # fmt: skip
    cells = []
    for workload, concurrency in keys:
        mine = [r for r in rows if (r.workload, r.concurrency) == (workload, concurrency)]
        for target in ORDER:
            of = [r for r in mine if r.target == target]
            if not of:
                continue
            pg = [v for r in of if (v := r.per_request_ms(r.pg_cpu)) is not None]
            server = [v for r in of if (v := r.per_request_ms(r.server_cpu)) is not None]
            cells.append(
                (
                    workload,
                    str(concurrency),
                    target,
                    f"{_median([r.rate for r in of]) or 0:.0f}",
                    f"{_median([r.p50_ms for r in of]) or 0:.2f}",
                    f"{_median([r.p99_ms for r in of]) or 0:.2f}",
                    _ms(_median(server)),
                    _ms(_median(pg)),
                    str(sum(r.errors for r in of)),
                )
            )
    return table(headers, cells)


def _ratio(mine: list[Row], numerator: str, target: str) -> str:
    """`numerator`'s req/s ÷ `target`'s: the median in bold, then each repetition's."""
    baton = {r.repetition: r.rate for r in mine if r.target == numerator}
    other = {r.repetition: r.rate for r in mine if r.target == target}
    each = [baton[k] / other[k] for k in sorted(baton) if other.get(k)]
    if not each:
        return "-"
    listed = ", ".join(f"{x:.2f}" for x in each)
    return f"**{statistics.median(each):.2f}** ({listed})"


def ratios(rows: list[Row], numerator: str = "baton") -> str:
    """`numerator`'s (a Baton target's) req/s ÷ each other target's, per repetition (in
    order) and their median."""
    keys = list(dict.fromkeys((r.workload, r.concurrency) for r in rows))
    headers = ["workload", "c"] + [f"Baton ÷ {label}" for _, label in RATIOS]
    cells = []
    for workload, concurrency in keys:
        mine = [r for r in rows if (r.workload, r.concurrency) == (workload, concurrency)]
        cells.append([workload, str(concurrency), *(_ratio(mine, numerator, t) for t, _ in RATIOS)])
    return table(headers, cells)


def _cpu(rows: list[Row], which: str) -> float | None:
    """The median CPU ms per request of `rows`: the server's, PostgreSQL's, or both added."""
    values = []
    for r in rows:
        server, pg = r.per_request_ms(r.server_cpu), r.per_request_ms(r.pg_cpu)
        value = {"server": server, "pg": pg}.get(which)
        if which == "both":
            value = None if server is None or pg is None else server + pg
        if value is not None:
            values.append(value)
    return _median(values)


def per_core(rows: list[Row], against: str = "postgraphile") -> str:
    """One Baton process against one PostGraphile process (`against`: the equal-work one, or
    `FREE`), per workload and concurrency: Baton's req/s ÷ PostGraphile's, then each one's CPU
    per request (medians), in the Baton process and in PostgreSQL. Baton's figure in each
    pair comes first."""
    keys = list(dict.fromkeys((r.workload, r.concurrency) for r in rows))
    label = "PostGraphile" if against == "postgraphile" else "PostGraphile, no authorization"
    headers = (
        "workload", "c", f"Baton ÷ {label}", "req/s Baton / PostGraphile",
        "server CPU ms/req", "PostgreSQL CPU ms/req", "both ms/req", "PostgreSQL CPU ÷",
    )  # fmt: skip
    cells = []
    for workload, concurrency in keys:
        mine = [r for r in rows if (r.workload, r.concurrency) == (workload, concurrency)]
        baton = [r for r in mine if r.target == "baton"]
        other = [r for r in mine if r.target == against]
        if not baton or not other:
            continue

        rates = [_median([r.rate for r in side]) or 0.0 for side in (baton, other)]
        cpu = {
            which: f"{_ms(_cpu(baton, which))} / {_ms(_cpu(other, which))}"
            for which in ("server", "pg", "both")
        }
        pg = _cpu(baton, "pg"), _cpu(other, "pg")
        cells.append(
            (
                workload,
                str(concurrency),
                _ratio(mine, "baton", against),
                f"{rates[0]:.0f} / {rates[1]:.0f}",
                cpu["server"],
                cpu["pg"],
                cpu["both"],
                f"{pg[0] / pg[1]:.2f}" if pg[0] is not None and pg[1] else "-",
            )
        )
    return table(headers, cells)


def counts(outcome: Outcome, workloads: list[str], targets: list[str]) -> str:
    headers = ["workload", *(f"{t} stmts / round trips" for t in targets)]
    cells = []
    for name in workloads:
        row = [name]
        for target in targets:
            found = outcome.counts.get((name, target))
            row.append("-" if found is None else f"{found[0]:.1f} / {found[1]:.1f}")
        cells.append(row)
    return table(headers, cells)


def pooler(rows: list[Row]) -> str:
    """What PgBouncer in transaction mode costs Baton, per workload and concurrency: the
    one-process `baton` against the same server through the pooler (`POOLED`), medians. The
    cost per request is all the CPU the pooled setup spent (Baton, PgBouncer, PostgreSQL) less
    all that the direct one did."""
    keys = list(dict.fromkeys((r.workload, r.concurrency) for r in rows))
    headers = (
        "workload", "c", "req/s direct / pooled", "pooled ÷ direct", "p50 ms direct / pooled",
        "Baton CPU ms/req", "PgBouncer CPU ms/req", "PostgreSQL CPU ms/req",
        "all CPU ms/req", "pooler's cost ms/req",
    )  # fmt: skip
    cells = []
    for workload, concurrency in keys:
        mine = [r for r in rows if (r.workload, r.concurrency) == (workload, concurrency)]
        direct = [r for r in mine if r.target == "baton"]
        pooled = [r for r in mine if r.target == POOLED]
        if not direct or not pooled:
            continue
        rates = [_median([r.rate for r in side]) or 0.0 for side in (direct, pooled)]
        p50 = [_median([r.p50_ms for r in side]) for side in (direct, pooled)]
        bouncer = _median([v for r in pooled if (v := r.per_request_ms(r.pooler_cpu)) is not None])
        before, after = _cpu(direct, "both"), _cpu(pooled, "both")
        after = None if after is None or bouncer is None else after + bouncer
        cost = None if before is None or after is None else after - before
        cells.append(
            (
                workload,
                str(concurrency),
                f"{rates[0]:.0f} / {rates[1]:.0f}",
                _ratio(mine, POOLED, "baton"),
                f"{_ms(p50[0])} / {_ms(p50[1])}",
                f"{_ms(_cpu(direct, 'server'))} / {_ms(_cpu(pooled, 'server'))}",
                _ms(bouncer),
                f"{_ms(_cpu(direct, 'pg'))} / {_ms(_cpu(pooled, 'pg'))}",
                f"{_ms(before)} / {_ms(after)}",
                "-" if cost is None else f"{cost:+.2f}",
            )
        )
    return table(headers, cells)
