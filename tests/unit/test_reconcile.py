"""The reconcile thread: which rounds are full (metadata asked again) and which are light."""

from __future__ import annotations

import threading

import pytest

from client_balance.consumer._reconcile import Reconciler
from client_balance.errors import ClientBalanceError

WAIT_S = 10.0  # how long a test waits for the thread, never a measured time


class Rounds:
    """Records each round's ``full`` and lets the test wait for a number of rounds."""

    def __init__(self) -> None:
        self.full: list[bool] = []
        self._done = threading.Condition()

    def __call__(self, full: bool) -> None:
        """One round."""
        with self._done:
            self.full.append(full)
            self._done.notify_all()

    def wait_for(self, count: int) -> None:
        """Wait until ``count`` rounds ran."""
        with self._done:
            assert self._done.wait_for(lambda: len(self.full) >= count, WAIT_S)


def test_the_first_round_and_asked_rounds_are_full_woken_rounds_light() -> None:
    """start() and run_round() run full rounds; a wake (the status topic changed) a light one."""
    rounds = Rounds()
    clock = [0.0]
    reconciler = Reconciler(rounds, interval_s=3600.0, clock=lambda: clock[0])
    reconciler.start()
    try:
        rounds.wait_for(1)
        reconciler.wake()
        rounds.wait_for(2)
        assert reconciler.run_round(WAIT_S)
        assert rounds.full == [True, False, True]
    finally:
        reconciler.stop()


def test_a_woken_round_an_interval_after_the_last_full_one_is_full() -> None:
    """Wakes more often than the interval cannot put off the metadata query for ever."""
    rounds = Rounds()
    clock = [0.0]
    reconciler = Reconciler(rounds, interval_s=3600.0, clock=lambda: clock[0])
    reconciler.start()
    try:
        rounds.wait_for(1)
        clock[0] = 3600.0
        reconciler.wake()
        rounds.wait_for(2)
        reconciler.wake()
        rounds.wait_for(3)
        assert rounds.full == [True, True, False]
    finally:
        reconciler.stop()


def test_the_intervals_rounds_are_full() -> None:
    """A round that the interval ran out for asks for metadata again."""
    rounds = Rounds()
    reconciler = Reconciler(rounds, interval_s=0.01)
    reconciler.start()
    try:
        rounds.wait_for(3)
        assert all(rounds.full[:3])
    finally:
        reconciler.stop()


def test_a_round_asked_for_while_the_thread_stops_is_not_waited_out() -> None:
    """run_round() asked during the last round returns False once stopped, not at its timeout."""
    in_round, let_go = threading.Event(), threading.Event()

    def slow_round(full: bool) -> None:
        in_round.set()
        let_go.wait(WAIT_S)

    reconciler = Reconciler(slow_round, interval_s=3600.0)
    reconciler.start()
    assert in_round.wait(WAIT_S)
    answers: list[bool] = []
    asking = threading.Thread(
        target=lambda: answers.append(reconciler.run_round(3600.0)), daemon=True
    )
    asking.start()
    stopping = threading.Thread(target=reconciler.stop)
    stopping.start()
    let_go.set()
    stopping.join(WAIT_S)
    asking.join(WAIT_S)
    assert not asking.is_alive(), "run_round waits for a round that never comes"
    assert answers == [False]


def test_a_round_whose_hook_calls_sys_exit_is_a_stored_failure_and_rounds_go_on() -> None:
    """A hook's SystemExit is raised from the next call, and the next round runs.

    It ended the reconcile thread without a word (the review of 2026-11-29).
    """
    calls: list[bool] = []

    def round_once(full: bool) -> None:
        calls.append(full)
        if len(calls) == 1:
            raise SystemExit(0)

    reconciler = Reconciler(round_once, interval_s=3600.0)
    reconciler.start()
    try:
        assert reconciler.run_round(WAIT_S)
        assert len(calls) >= 2
        with pytest.raises(ClientBalanceError, match="SystemExit"):
            reconciler.raise_failure()
    finally:
        reconciler.stop()
