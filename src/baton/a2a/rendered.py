"""GetTask's answers as JSON, kept for the next read of the same task at the same version.

A client following a task by polling GetTask reads it unchanged many times: its answer is
rendered once (`mapping.task_of`, then `MessageToDict` and orjson) and kept, keyed by everything
it is made from. A task's row changes only with its version (the database's guard raises it by
one on every update), events are never changed once appended, and the task's A2A context and
the history asked for are in the key; the event ids and `updated_at` tell apart a task removed
and handed off again under the same id. A bounded cache keeps the newest.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Final

from baton.store.records import EventRecord, TaskRecord

# What the cache holds at most: answers, and bytes of their JSON.
CACHED_ANSWERS: Final = 1024
CACHED_BYTES: Final = 16 * 1024 * 1024

Key = tuple[str, int, datetime, str, str | None, int, tuple[int, ...]]

_ANSWERS: OrderedDict[Key, bytes] = OrderedDict()
_answer_bytes = 0


def task_json(
    task: TaskRecord,
    context_id: str,
    message_id: str | None,
    history: int,
    newest: Sequence[EventRecord],
    render: Callable[[], bytes],
) -> bytes:
    """The task's answer: the one kept for these inputs, or `render()`'s, then kept."""
    global _answer_bytes
    key = (
        task.id,
        task.version,
        task.updated_at,
        context_id,
        message_id,
        history,
        tuple(event.id for event in newest),
    )
    found = _ANSWERS.get(key)
    if found is not None:
        _ANSWERS.move_to_end(key)
        return found
    made = render()
    if len(made) <= CACHED_BYTES:
        _ANSWERS[key] = made
        _answer_bytes += len(made)
    while len(_ANSWERS) > CACHED_ANSWERS or _answer_bytes > CACHED_BYTES:
        _, dropped = _ANSWERS.popitem(last=False)
        _answer_bytes -= len(dropped)
    return made
