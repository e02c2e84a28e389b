"""Records built from rows: the fast construction (`baton.store.records._made`) makes what the
dataclass's own `__init__` makes, every field set; JSON read as text is decoded when first
read and still spent from the request's budget."""

from __future__ import annotations

from dataclasses import asdict, fields
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from baton.budget import request_budget
from baton.errors import TooMuchWork
from baton.protocol.handoff import MoveName, TaskState, Verification, WaitingOn
from baton.store import tasks
from baton.store.db import Database
from baton.store.records import LAZY_JSON, EventRecord, TaskRecord, Unread
from tests.helpers import World

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

ROW: dict[str, Any] = {
    "id": "t1",
    "project": "web",
    "state": "waiting",
    "waiting_on": "agent",
    "requester": "alice/a",
    "assignee": "bob/b",
    "packet": {"task": "x", "depends_on": []},
    "result": None,
    "latest_checkpoint": {"progress": "half"},
    "verification": "AUTO",
    "version": 3,
    "input_digest": "d",
    "created_at": NOW,
    "updated_at": NOW,
    "event_id": 7,
    "event_kind": "moved",
    "event_name": "HOLD",
    "event_from": "requested",
    "event_actor": "system",
    "event_reason": None,
}


def test_a_task_record_from_a_row_equals_the_constructed_one() -> None:
    made = TaskRecord.from_mapping(ROW)
    expected = TaskRecord(
        id="t1",
        project="web",
        state=TaskState("waiting"),
        waiting_on=WaitingOn("agent"),
        requester="alice/a",
        assignee="bob/b",
        packet={"task": "x", "depends_on": []},
        result=None,
        latest_checkpoint={"progress": "half"},
        verification=Verification("AUTO"),
        version=3,
        input_digest="d",
        created_at=NOW,
        updated_at=NOW,
    )
    assert made == expected and asdict(made) == asdict(expected)
    assert set(vars(made)) == {f.name for f in fields(TaskRecord)}


def test_an_event_record_from_a_row_sets_every_field() -> None:
    made = EventRecord.from_row(ROW)
    assert set(vars(made)) == {f.name for f in fields(EventRecord)}
    assert (made.id, made.move, made.from_state, made.to_state) == (
        7,
        MoveName("HOLD"),
        TaskState("requested"),
        TaskState("waiting"),
    )
    assert made.task == TaskRecord.from_mapping(ROW) and made.at == NOW


def test_a_record_stays_frozen() -> None:
    made = TaskRecord.from_mapping(ROW)
    try:
        made.version = 4  # type: ignore[misc]
    except AttributeError:
        return
    raise AssertionError("a record from a row could be changed")


async def test_a_listing_decodes_json_when_read_and_spends_its_bytes(
    db: Database, world: World
) -> None:
    """Tasks and events read with their JSON as text answer the same JSON as the record read
    whole, and the text counts against the request's budget of loaded bytes as it did when
    the connection decoded it: a budget below one packet refuses the page."""
    task = await world.task_in(TaskState.working)
    owner = world.roles["requester_owner"]
    query = tasks.TaskQuery(projects=[world.project])
    async with db.connection() as conn:
        whole = await tasks.load(conn, task.id)
        [listed], _ = await tasks.page(conn, owner, query, 10, None)
        pages = await tasks.events_of_many(conn, [task.id], 10, None)
        assert whole is not None and "packet" not in vars(listed)  # not decoded yet
        assert listed == whole and listed.packet == whole.packet  # decoded on first read
        events, _ = pages[task.id]
        assert events and events[-1].task == whole
        size = len(orjson.dumps(whole.packet))
        for read in (
            lambda: tasks.page(conn, owner, query, 10, None),
            lambda: tasks.events_of_many(conn, [task.id], 10, None),
        ):
            with request_budget(1000, size - 1), pytest.raises(TooMuchWork):
                await read()
            with request_budget(1000, 10 * size * len(events)):
                await read()


async def test_a_read_of_scalars_leaves_the_json_out_and_says_so_when_it_is_read(
    db: Database, world: World
) -> None:
    """A listing read with `SCALARS` answers every scalar as the whole read does, takes
    `depends_on` from the row's column when asked, spends nothing of the budget of loaded
    bytes (no JSON came), and refuses a JSON field rather than answer it wrong; events read
    without their task answer their own fields as the whole read does, and refuse the task."""
    task = await world.task_in(TaskState.working)
    owner = world.roles["requester_owner"]
    query = tasks.TaskQuery(projects=[world.project])
    reads = tasks.TaskReads(json=False, depends_on=True)
    async with db.connection() as conn:
        whole = await tasks.load(conn, task.id)
        with request_budget(1000, 1):  # one byte: a packet would not fit
            [listed], _ = await tasks.page(conn, owner, query, 10, None, reads)
            pages = await tasks.events_of_many(conn, [task.id], 10, None, tasks.SCALARS)
            bare = await tasks.events_of_many(conn, [task.id], 10, None, None)
        full = await tasks.events_of_many(conn, [task.id], 10, None)
    assert whole is not None
    own = [f.name for f in fields(EventRecord) if f.name != "task"]
    [(bare_events, bare_more)], [(full_events, full_more)] = bare.values(), full.values()
    assert bare_more == full_more and len(bare_events) == len(full_events) > 1
    for short, long in zip(bare_events, full_events, strict=True):
        assert [getattr(short, n) for n in own] == [getattr(long, n) for n in own]
        with pytest.raises(Unread):
            _ = short.task
    scalars = [f.name for f in fields(TaskRecord) if f.name not in LAZY_JSON]
    assert [getattr(listed, n) for n in scalars] == [getattr(whole, n) for n in scalars]
    assert listed.depends_on == whole.packet["depends_on"] == whole.depends_on
    events, _ = pages[task.id]
    assert events and events[-1].task.version == whole.version
    for record in (listed, events[-1].task):
        for name in LAZY_JSON:
            with pytest.raises(Unread):
                getattr(record, name)


async def test_a_read_of_some_packet_keys_answers_those_and_refuses_the_rest(
    db: Database, world: World
) -> None:
    """A listing that reads two of the packet's keys and one scalar answers those as the whole
    read does, spends the (smaller) packet it read, and refuses every other field."""
    task = await world.task_in(TaskState.working)
    owner = world.roles["requester_owner"]
    query = tasks.TaskQuery(projects=[world.project])
    reads = tasks.TaskReads(
        json=False, scalars=frozenset({"state"}), packet_keys=frozenset({"task", "files"})
    )
    async with db.connection() as conn:
        whole = await tasks.load(conn, task.id)
        assert whole is not None
        [listed], _ = await tasks.page(conn, owner, query, 10, None, reads)
        small = len(orjson.dumps({"files": whole.packet["files"], "task": whole.packet["task"]}))
        with request_budget(1000, small // 2), pytest.raises(TooMuchWork):
            await tasks.page(conn, owner, query, 10, None, reads)
    assert listed.packet == {"task": whole.packet["task"], "files": whole.packet["files"]}
    assert (listed.id, listed.state) == (whole.id, whole.state)
    for name in ("result", "latest_checkpoint", "assignee", "version", "created_at", "updated_at"):
        with pytest.raises(Unread):
            getattr(listed, name)


async def test_some_packet_keys_read_as_text_are_the_object_of_those_keys(db: Database) -> None:
    """The JSON text a read of some packet keys builds is the object of exactly those keys
    (null for one the packet lacks), whatever their values hold: quotes, backslashes, other
    scripts, nesting; and `{}` for no key at all."""
    packet = {
        "task": 'say "hi" \\ then \u00e9t\u00e9 \U0001f600 \n done',
        "files": ['a"b', {"nested": [1, 2.5, None, True]}],
        "context": "",
    }
    keys = frozenset({"task", "files", "context", "depends_on"})
    async with db.connection() as conn:
        text = await conn.fetchval(
            f"SELECT {tasks._packet_object('t', keys)} FROM (SELECT $1::jsonb AS packet) t",
            packet,
        )
        empty = await conn.fetchval(f"SELECT {tasks._packet_object('t', frozenset())}")
    assert orjson.loads(text) == {**packet, "depends_on": None}
    assert orjson.loads(empty) == {}


async def test_string_packet_keys_are_each_read_as_their_own_text(db: Database) -> None:
    """A read of only the packet's string keys takes each one's text from the database as it
    is (`->>`), no JSON written there and decoded here: the record's packet holds exactly those
    keys, their strings whatever they hold (quotes, backslashes, other scripts, a newline, an
    empty one), null for one the packet lacks; and their bytes are spent from the budget."""
    packet = {"task": 'say "hi" \\ then \u00e9t\u00e9 \U0001f600 \n done', "context": ""}
    keys = frozenset({"task", "context", "deliverable_type"})
    assert keys <= tasks.STRING_PACKET_KEYS
    reads = tasks.TaskReads(json=False, scalars=frozenset(), packet_keys=keys)
    sql = (
        f"SELECT {tasks._columns('t', reads)} FROM (SELECT 'x'::text AS id, $1::jsonb AS packet) t"
    )
    async with db.connection() as conn:
        row = await conn.fetchrow(sql, packet)
    assert row is not None
    assert sorted(row.keys()) == ["id", "packet_context", "packet_deliverable_type", "packet_task"]
    [record] = tasks._records([row], reads)
    assert record.packet == {**packet, "deliverable_type": None}
    with request_budget(1000, len(packet["task"]) // 2), pytest.raises(TooMuchWork):
        tasks._records([row], reads)
    with pytest.raises(Unread):
        _ = record.result


async def test_a_read_of_some_scalars_leaves_updated_at_out_unless_asked(
    db: Database, world: World
) -> None:
    """Reads that select neither `updated_at` nor the JSON leave the timestamp out (decoding
    it was a fifth of a graph listing's cost) and refuse it when read; a page of a listing
    orders by it all the same, and one that takes it (for cursors) answers it."""
    first = await world.task_in(TaskState.working)
    second = await world.task_in(TaskState.working)
    owner = world.roles["requester_owner"]
    reads = tasks.TaskReads(json=False, scalars=frozenset({"state"}))
    query = tasks.TaskQuery(projects=[world.project])
    async with db.connection() as conn:
        whole = await tasks.load(conn, second.id)
        [by_id] = await tasks.visible_by_ids(conn, owner, [second.id], reads)
        short, _ = await tasks.page(conn, owner, query, 10, None, reads)
        dated, _ = await tasks.page(conn, owner, query, 10, None, reads.taking("updated_at"))
    assert whole is not None and (by_id.id, by_id.state) == (whole.id, whole.state)
    assert [t.id for t in short] == [t.id for t in dated] == [second.id, first.id]  # newest first
    for record in (by_id, short[0]):
        with pytest.raises(Unread):
            _ = record.updated_at
    assert dated[0].updated_at == whole.updated_at
    assert tasks.encode_cursor(dated[0]) == tasks.encode_cursor(whole)


async def test_a_page_of_events_reads_the_row_past_it_only_when_asked_whether_more_follow(
    db: Database, world: World
) -> None:
    """Without `peek`, a page of events reads `first` rows per task and says no more follow;
    with it (the default), one more, which answers that more do."""
    task = await world.task_in(TaskState.working)
    async with db.connection() as conn:
        [(peeked, more)] = (await tasks.events_of_many(conn, [task.id], 1, None)).values()
        [(blind, unknown)] = (
            await tasks.events_of_many(conn, [task.id], 1, None, None, peek=False)
        ).values()
        [(everything, _)] = (await tasks.events_of_many(conn, [task.id], 50, None)).values()
    assert len(everything) > 1
    assert [e.id for e in peeked] == [e.id for e in blind] == [everything[0].id]
    assert more is True and unknown is False
