"""When a failed webhook delivery is tried again: exponential backoff with jitter.

After the n-th failed attempt at a message the next waits `first * 4**(n-1)`, at most 6 hours,
each delay spread by ±20 % so that endpoints failing together do not retry together. With the
defaults (first retry after 5 s, 11 attempts) the retries come after about 5 s, 20 s, 80 s,
5 min, 21 min, 85 min, 5.7 h, then 6 h three times: the last attempt about 25.6 hours after the
first. After the last, the endpoint is disabled (its event stays at the head of its queue and is
tried again when an owner enables it).
"""

from __future__ import annotations

import random

FACTOR = 4.0
CAP_SECONDS = 6 * 3600.0
JITTER = 0.2


def delay(failures: int, first: float, *, rng: random.Random | None = None) -> float:
    """Seconds to wait after the `failures`-th failed attempt in a row (1 or more)."""
    base = min(CAP_SECONDS, first * FACTOR ** max(0, failures - 1))
    spread = (rng or random).uniform(-JITTER, JITTER)
    return base * (1.0 + spread)


def nominal(max_attempts: int, first: float) -> list[float]:
    """The delays between `max_attempts` attempts, without jitter (for the docs and tests)."""
    return [min(CAP_SECONDS, first * FACTOR**n) for n in range(max_attempts - 1)]
