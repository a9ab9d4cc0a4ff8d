"""The retry policies, the deadline and the failure slot behave as their docstrings say."""

from __future__ import annotations

import pickle
import traceback

import pytest

from client_balance._failure import FailureSlot
from client_balance._kafka import (
    TIMED_OUT,
    call_until_transient_passes,
    is_transient,
    retry_immediately,
    timed_out,
    wait_until,
)
from client_balance._timing import Deadline
from client_balance.errors import ConfigError, KafkaClientError


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        """The time now."""
        return self.now_s


def test_wait_until_returns_the_first_truthy_answer() -> None:
    """Falsy answers are tried again; the first truthy one is returned."""
    answers = iter([0, "", None, 7, 8])
    assert wait_until(lambda: next(answers), timeout_s=5.0, interval_s=0.0) == 7


def test_wait_until_returns_the_last_falsy_answer_when_time_runs_out() -> None:
    """At the time limit the caller gets the last (falsy) answer to turn into its own error."""
    calls: list[int] = []

    def never() -> int:
        calls.append(1)
        return 0

    assert wait_until(never, timeout_s=0.05, interval_s=0.01) == 0
    assert len(calls) >= 2


def test_wait_until_retries_listed_exceptions_and_raises_others_at_once() -> None:
    """retry_on errors count as "not yet"; any other error ends the wait immediately."""
    attempts: list[Exception | str] = [OSError("down"), OSError("down"), "up"]

    def check() -> str:
        answer = attempts.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert wait_until(check, timeout_s=5.0, interval_s=0.0, retry_on=(OSError,)) == "up"
    calls: list[int] = []

    def broken() -> bool:
        calls.append(1)
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        wait_until(broken, timeout_s=5.0, interval_s=0.0, retry_on=(OSError,))
    assert calls == [1]


def test_wait_until_raises_the_last_listed_exception_at_the_limit() -> None:
    """A check that only ever failed raises its last failure when time is up."""

    def down() -> bool:
        raise OSError("still down")

    with pytest.raises(OSError, match="still down"):
        wait_until(down, timeout_s=0.03, interval_s=0.01, retry_on=(OSError,))


def test_wait_until_gives_up_when_keep_waiting_says_no() -> None:
    """keep_waiting() False (a broker process that exited) stops the wait early."""
    calls: list[int] = []

    def not_yet() -> bool:
        calls.append(1)
        return False

    answer = wait_until(
        not_yet,
        timeout_s=30.0,
        interval_s=0.0,
        keep_waiting=lambda: len(calls) < 3,
    )
    assert answer is False
    assert len(calls) == 3


def test_transient_errors_are_retried_and_others_raised_at_once() -> None:
    """A coordinator that is loading is waited out; a bad request is not retried."""
    loading = KafkaClientError("loading", kafka_code=14, kafka_name="COORDINATOR_LOAD_IN_PROGRESS")
    outcomes: list[object] = [loading, loading, "committed"]

    def commit() -> object:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    assert call_until_transient_passes(commit, timeout_s=10.0) == "committed"
    refused = KafkaClientError("no", kafka_code=29, kafka_name="TOPIC_AUTHORIZATION_FAILED")
    calls: list[int] = []

    def forbidden() -> None:
        calls.append(1)
        raise refused

    with pytest.raises(KafkaClientError, match="no"):
        call_until_transient_passes(forbidden, timeout_s=10.0)
    assert calls == [1]


def test_timed_out_names_what_and_how_long_and_is_transient() -> None:
    """The one timeout error says what got no answer, within how long, and pickles."""
    error = timed_out("reading offsets of ['orders']", 2.5, "the broker is away")
    assert str(error) == (
        "reading offsets of ['orders'] failed: no answer within 2.5 s: the broker is away"
    )
    assert error.kafka_code == TIMED_OUT
    assert is_transient(error)
    assert str(pickle.loads(pickle.dumps(error))) == str(error)


def test_deadline_counts_down_on_its_clock() -> None:
    """A Deadline reports the time left on the injected clock, never below zero."""
    clock = FakeClock()
    deadline = Deadline(2.0, clock)
    assert deadline.left_s() == 2.0
    assert not deadline.expired
    clock.now_s += 1.5
    assert deadline.left_s() == pytest.approx(0.5)
    clock.now_s += 1.0
    assert deadline.left_s() == 0.0
    assert deadline.expired


def test_failure_slot_raises_the_first_failure_once_and_counts_the_later_ones() -> None:
    """The next call raises the first failure kept, noting how many came after it (logged).

    A later failure replaced it: an on_revoked that failed (so its commit was skipped) was
    never raised when an on_assigned failed in the same round (the review of 2026-11-29, later).
    """
    slot = FailureSlot()
    slot.raise_once()  # nothing kept: nothing raised
    slot.store(ConfigError("first"))
    slot.store(ConfigError("second"))
    slot.store(ConfigError("third"))
    with pytest.raises(ConfigError, match="first") as raised:
        slot.raise_once()
    assert raised.value.__notes__ == ["2 more failures came after it; each is in the log"]
    slot.raise_once()
    slot.store(ConfigError("fourth"))
    with pytest.raises(ConfigError, match="fourth") as again:
        slot.raise_once()
    assert not hasattr(again.value, "__notes__")


def test_retry_immediately_tries_again_only_for_accepted_errors() -> None:
    """Accepted failures are retried up to the attempts; the last one is raised."""
    calls: list[int] = []

    def taken() -> None:
        calls.append(1)
        raise OSError("Address already in use")

    with pytest.raises(OSError, match="in use"):
        retry_immediately(taken, attempts=3, retry_if=lambda e: isinstance(e, OSError))
    assert len(calls) == 3
    outcomes: list[object] = [OSError("in use"), "started"]

    def flaky() -> object:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    assert retry_immediately(flaky, attempts=3, retry_if=lambda e: True) == "started"
    with pytest.raises(ValueError, match="other"):
        retry_immediately(lambda: (_ for _ in ()).throw(ValueError("other")), attempts=3,
                          retry_if=lambda e: isinstance(e, OSError))  # fmt: skip


def test_a_fatal_failure_is_raised_by_every_call() -> None:
    """A fatal failure is never cleared: it outranks a kept one and comes back every time."""
    slot = FailureSlot()
    slot.store(ConfigError("passing"))
    slot.store_fatal(ConfigError("fatal"))
    for _ in range(3):
        with pytest.raises(ConfigError, match="fatal"):
            slot.raise_once()


def test_a_fatal_failure_raised_again_and_again_keeps_one_calls_traceback() -> None:
    """Each raise carries its own call's frames: raised by every call, it grew with each one.

    A worker that catches it and calls again held every frame of every call so far (120 MiB
    after 200,000 calls; the review of 2026-11-29).
    """
    slot = FailureSlot()
    slot.store_fatal(ConfigError("fatal"))
    depths = []
    for _ in range(50):
        with pytest.raises(ConfigError) as caught:
            slot.raise_once()
        depths.append(len(traceback.extract_tb(caught.value.__traceback__)))
    assert depths[-1] == depths[0]
