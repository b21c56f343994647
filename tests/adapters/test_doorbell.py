"""The API's doorbell: every stored id is rung once, a burst shares few messages, and a broker that is
down hands the ids back (the broker itself is faked: ``enqueue`` is what the doorbell calls)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from app.adapters import queue as doorbell_module
from app.adapters.queue import Doorbell
from tests.helpers.wait import wait_for

REAL_SLEEP = time.sleep


class FakeBroker:
    """Records each message; the first send can be held, so rings pile up behind it."""

    def __init__(self, up: bool = True, hold_first: bool = False) -> None:
        self.up = up
        self.messages: list[tuple[list[str], str | None]] = []
        self.released = threading.Event()
        if not hold_first:
            self.released.set()
        self.rounds = 0  # the doorbell's rests between rounds

    def enqueue(self, task: str, ids: list[str], sent_at: float, argsrepr: str | None = None) -> bool:
        assert task == "sweepbot.process_deliveries"
        assert isinstance(sent_at, float)
        self.released.wait(timeout=10)
        if not self.up:
            return False
        self.messages.append((list(ids), argsrepr))
        return True

    def sleep(self, seconds: float) -> None:
        # ``time.sleep`` is patched for every thread: only the doorbell's rests are counted (and skipped)
        if threading.current_thread().name == "doorbell":
            self.rounds += 1
        else:
            REAL_SLEEP(seconds)

    def sent(self) -> list[str]:
        return [i for ids, _ in self.messages for i in ids]


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> FakeBroker:
    fake = FakeBroker(hold_first=True)
    monkeypatch.setattr(doorbell_module, "enqueue", fake.enqueue)
    monkeypatch.setattr(doorbell_module.time, "sleep", fake.sleep)
    return fake


def ids(prefix: str, n: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(n)]


def test_a_lone_ring_is_sent_at_once_with_a_short_argsrepr(broker: FakeBroker) -> None:
    broker.released.set()
    Doorbell(chunk=100).ring_many(["d-1", "d-2"])
    wait_for(lambda: broker.sent() == ["d-1", "d-2"], "the ring")
    _, shown = broker.messages[0]
    assert shown is not None and shown.startswith("[<2 delivery ids>, ")  # not the list's repr


def test_a_burst_behind_a_send_goes_out_in_one_round_split_in_chunks(broker: FakeBroker) -> None:
    bell = Doorbell(chunk=100)
    bell.ring_many(["first"])
    wait_for(lambda: broker.rounds == 0 and bell._thread is not None, "the doorbell thread")
    burst = [ids(f"c{n}", 99) for n in range(10)]  # 990 ids in 10 commits while the send is held
    for commit in burst:
        bell.ring_many(commit)
    broker.released.set()
    expected = ["first"] + [i for commit in burst for i in commit]
    wait_for(lambda: len(broker.sent()) == len(expected), "every id rung")
    assert broker.sent() == expected  # each once, in order
    assert [len(m) for m, _ in broker.messages] == [1] + [100] * 9 + [90]
    # everything that waited went in the round after the first send: one rest between them
    # (taking one chunk per round would have needed five)
    wait_for(lambda: broker.rounds >= 2, "the second rest")
    assert broker.rounds == 2


def test_ids_the_broker_did_not_take_are_handed_back(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeBroker(up=False)
    monkeypatch.setattr(doorbell_module, "enqueue", fake.enqueue)
    handed: list[list[str]] = []
    bell = Doorbell(on_unsent=handed.append, chunk=3, linger=0)
    bell.ring_many(ids("d", 7))
    wait_for(lambda: sum(map(len, handed)) == 7, "the unsent ids handed back")
    assert [len(h) for h in handed] == [3, 3, 1]
    assert fake.messages == []


def test_an_empty_ring_starts_nothing(broker: Any) -> None:
    bell = Doorbell()
    bell.ring_many([])
    assert bell._thread is None
