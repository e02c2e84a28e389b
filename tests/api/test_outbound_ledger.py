"""The ledger of bytes waiting for clients (`baton.web.outbound`), on its own: who is refused,
who is cut, and that every byte leaves it. The live tests (`test_queued_bytes.py`,
`tests/sse/test_queued_bytes.py`, `tests/live/test_unread_frames.py`) drive it through real
connections."""

from __future__ import annotations

from typing import Any

from baton.web.outbound import Account, Ledger, carry


class Connection:
    """A transport whose unsent bytes the test sets."""

    def __init__(self) -> None:
        self.unsent = 0
        self.aborted = False

    def get_write_buffer_size(self) -> int:
        return self.unsent

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def abort(self) -> None:
        self.aborted = True


def account(ledger: Ledger, token: str | None) -> tuple[Account, Connection]:
    connection = Connection()
    acc = Account(connection)
    ledger.attach(acc)
    ledger.assign(acc, token)
    return acc, connection


def waiting(acc: Account, connection: Connection, n: int) -> None:
    """`n` bytes written to `acc`'s connection and not taken."""
    connection.unsent = n
    acc.measure()


def test_an_answer_past_its_token_s_budget_is_refused_and_another_token_s_fits() -> None:
    ledger = Ledger(per_token=100, limit=1000)
    a, ca = account(ledger, "a")
    waiting(a, ca, 80)
    newcomer, _ = account(ledger, "a")
    refusal = ledger.admit(newcomer, 30)
    assert refusal is not None and (refusal.status, refusal.code) == (429, "too_much_unread")
    other, _ = account(ledger, "b")
    assert ledger.admit(other, 30) is None
    assert not ca.aborted


def test_at_the_process_budget_the_fullest_connection_gives_way_to_a_smaller_answer() -> None:
    ledger = Ledger(per_token=1000, limit=100)
    big, cbig = account(ledger, "a")
    small, csmall = account(ledger, "b")
    waiting(big, cbig, 60)
    waiting(small, csmall, 35)
    newcomer, _ = account(ledger, None)
    assert ledger.admit(newcomer, 20) is None  # 115 > 100: the one holding 60 is cut
    assert cbig.aborted and not csmall.aborted
    assert ledger.total == 35


def test_at_the_process_budget_an_answer_larger_than_every_holder_is_refused() -> None:
    ledger = Ledger(per_token=1000, limit=100)
    for token in ("a", "b", "c"):
        acc, connection = account(ledger, token)
        waiting(acc, connection, 30)
    newcomer, _ = account(ledger, "d")
    refusal = ledger.admit(newcomer, 40)
    assert refusal is not None and (refusal.status, refusal.code) == (503, "unavailable")
    assert ledger.total == 90


def test_growth_past_a_token_s_budget_cuts_that_token_s_fullest_connection_only() -> None:
    ledger = Ledger(per_token=100, limit=1000)
    stuck, cstuck = account(ledger, "a")
    reader, creader = account(ledger, "a")
    stranger, cstranger = account(ledger, "b")
    waiting(stranger, cstranger, 95)
    waiting(stuck, cstuck, 90)
    assert reader.hold(20)  # 110 for "a": its fullest connection goes
    assert cstuck.aborted and not creader.aborted and not cstranger.aborted
    assert stuck.cut and not stuck.hold(1)  # nothing more is written to it
    assert ledger.total == 20 + 95


def test_growth_past_the_process_budget_cuts_the_fullest_connection_even_the_grower() -> None:
    ledger = Ledger(per_token=1000, limit=100)
    reader, creader = account(ledger, "a")
    waiting(reader, creader, 10)
    stuck, cstuck = account(ledger, "b")
    waiting(stuck, cstuck, 80)
    assert not stuck.hold(20)  # 110: the grower holds the most, and is cut
    assert cstuck.aborted and not creader.aborted
    assert ledger.total == 10


def test_bytes_stay_with_their_token_until_the_connection_holds_nothing() -> None:
    ledger = Ledger(per_token=100, limit=1000)
    acc, connection = account(ledger, "a")
    waiting(acc, connection, 90)
    ledger.assign(acc, None)  # a later request on the connection, with no token
    assert acc.token == "a"
    newcomer, _ = account(ledger, "a")
    assert ledger.admit(newcomer, 20) is not None  # still counted against "a"
    waiting(acc, connection, 0)
    ledger.assign(acc, None)
    assert acc.token is None


def test_held_then_sent_bytes_count_once_and_a_closed_connection_counts_nothing() -> None:
    ledger = Ledger(per_token=1000, limit=1000)
    acc, connection = account(ledger, "a")
    assert acc.hold(300)  # built, waiting for the connection
    connection.unsent = 120  # written; the kernel took the rest
    acc.sent(300)
    assert (acc.held, acc.buffered, ledger.total) == (0, 300, 300)  # kept whole (uvloop)
    assert ledger.shares["a"].bytes == 300
    connection.unsent = 0
    acc.measure()
    assert ledger.total == 0
    assert acc.hold(40)
    connection.unsent = 10
    acc.sent(40)
    assert ledger.total == 40
    acc.close()
    assert ledger.total == 0 and not ledger.holding and not ledger.shares
    acc.measure()
    assert ledger.total == 0


def test_a_connection_that_wrote_before_a_door_saw_it_counts_from_when_it_is_attached() -> None:
    ledger = Ledger(per_token=1000, limit=1000)
    connection = Connection()
    acc = Account(connection)
    connection.unsent = 50  # uvicorn's own answer, not taken yet
    acc.measure()
    ledger.attach(acc)
    assert ledger.total == 50
    connection.unsent = 0
    acc.measure()
    assert ledger.total == 0 and not ledger.holding


def test_a_request_is_refused_before_it_runs_when_its_token_lacks_room_for_the_largest_answer() -> (
    None
):
    ledger = Ledger(per_token=100, limit=1000, reserve=30)
    acc, connection = account(ledger, "a")
    waiting(acc, connection, 60)
    assert ledger.room("a") is None  # 60 + 30 fits in 100
    waiting(acc, connection, 75)
    refusal = ledger.room("a")
    assert refusal is not None and (refusal.status, refusal.code) == (429, "too_much_unread")
    assert ledger.room("b") is None and ledger.room(None) is None


def test_an_answer_that_must_go_out_cuts_the_fullest_connection_instead_of_being_refused() -> None:
    ledger = Ledger(per_token=100, limit=1000)
    stuck, cstuck = account(ledger, "a")
    waiting(stuck, cstuck, 90)
    answering, canswering = account(ledger, "a")
    waiting(answering, canswering, 5)  # something waits: the answer is held until written
    assert carry(answering, 30) == 30  # 125 for "a": the fullest (90) is reset
    assert cstuck.aborted and not canswering.aborted
    assert ledger.total == 35
