"""The bounds every request is held to before and while it runs."""

from __future__ import annotations

from dataclasses import dataclass

from baton.inputs import MAX_VALUES

MIB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    max_depth: int = 12
    max_aliases: int = 20
    max_tokens: int = 5000
    # Checked before validation, whose cost grows faster than the document (see
    # `baton.engine.documents`): fields nested, or fragment spreads chained, this deep at most;
    # one response name selected this many times at most in one selection set.
    max_nesting: int = 32
    max_same_name: int = 30
    # Values in one request's variables (each scalar, list and object counts one), counted
    # before they are coerced: the bound every door's input is held to (`baton.inputs`).
    max_variable_values: int = MAX_VALUES
    # The most values an operation's response can hold, worst case (see `baton.engine.cost`).
    max_cost: int = 50_000
    # At run time, as a second line of defence: rows one request may load, and its duration.
    max_rows: int = 100_000
    max_seconds: float = 30.0
    # Bytes: of JSON one request may load from the database (task packets, results,
    # checkpoints, events' copies of them), and of one response (or one subscription event),
    # counted as it is built: text, JSON and keys. Past either, the request stops with
    # `too_expensive`.
    max_loaded_bytes: int = 16 * MIB
    max_response_bytes: int = 16 * MIB


DEFAULT_LIMITS = Limits()
