"""How a process's delivery slots are shared between owners.

A slot is one endpoint being worked on; a process has `BATON_WEBHOOK_CONCURRENCY` of them. A
hanging receiver holds its slot for up to the attempt timeout, so one owner's hanging
endpoints could fill every slot and make every other owner's messages wait. They do not:

- An owner holding fewer than its `share` of the slots (a quarter, at least one) may take any
  free slot.
- An owner holding its share or more may take another only while a share of the slots stays
  free: those are kept for owners under their share, so the next owner's message starts at
  once, unless as many owners as there are shares each hold theirs.
- Free slots go round-robin: to the owner holding the fewest first, then to the owner whose
  endpoint was worked on least recently.

An owner alone with work due thus uses all but a share of the slots. An owner over its share
keeps what it holds (a turn is never cut short for this). Slots are per process: each process
shares its own.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping, Sequence

SHARE_DIVISOR = 4


def share(concurrency: int) -> int:
    """The slots an owner may take whenever they are free, whatever others hold."""
    return max(1, concurrency // SHARE_DIVISOR)


def pick(
    candidates: Sequence[tuple[str, str]],
    held: Mapping[str, int],
    free: int,
    concurrency: int,
) -> list[str]:
    """Which of `candidates` (endpoint id, owner: endpoints with work due, each owner's in the
    order they should go) to start now, given the slots each owner `held` and the `free` ones."""
    queues: dict[str, deque[str]] = {}
    for endpoint_id, owner in candidates:
        queues.setdefault(owner, deque()).append(endpoint_id)
    order = {owner: n for n, owner in enumerate(queues)}
    count = Counter(held)
    total = sum(count.values())
    own, kept = share(concurrency), concurrency - share(concurrency)
    picked: list[str] = []
    while len(picked) < free:
        eligible = [o for o, queue in queues.items() if queue and (count[o] < own or total < kept)]
        if not eligible:
            break
        owner = min(eligible, key=lambda o: (count[o], order[o]))
        picked.append(queues[owner].popleft())
        count[owner] += 1
        total += 1
    return picked
