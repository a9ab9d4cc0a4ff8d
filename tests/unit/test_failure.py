"""Background loops outlive what their steps raise; the application's listeners raise nothing."""

from __future__ import annotations

import logging
import pickle
import threading

import pytest

from client_balance._callbacks import guarded
from client_balance._failure import FailureSlot, keep_running
from client_balance.consumer._hooks import PartitionHooks
from client_balance.errors import ClientBalanceError


def test_a_step_that_raises_is_reported_and_the_loop_goes_on() -> None:
    """Two failures, then steps that work: all of them run, and the slot holds the first one."""
    stop = threading.Event()
    slot = FailureSlot()
    steps: list[int] = []

    def step() -> None:
        steps.append(len(steps))
        if len(steps) <= 2:
            raise BufferError("Local: Queue full")
        if len(steps) == 5:
            stop.set()

    keep_running(step, stop, thread="status", on_failure=slot.store, pause_s=0.0)
    assert steps == [0, 1, 2, 3, 4]
    with pytest.raises(ClientBalanceError) as raised:
        slot.raise_once()
    error = raised.value
    assert str(error) == "the status thread failed and goes on: BufferError: Local: Queue full"
    assert error.__cause__ is None  # its frames would hold the thread's clients
    assert str(pickle.loads(pickle.dumps(error))) == str(error)
    slot.raise_once()  # once only


def test_a_listener_callback_never_raises_into_confluent_kafka(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """stats_cb, error_cb, throttle_cb: what they raise is logged; oauth_cb is left as it is.

    confluent-kafka keeps every exception a callback raised, with its traceback: the frames it
    passed through, and the consumer in them, stayed alive after shutdown.
    """

    def raising(_argument: object) -> None:
        raise ConnectionError("boom")

    for key in ("stats_cb", "error_cb", "throttle_cb"):
        with caplog.at_level(logging.ERROR, logger="client_balance"):
            assert guarded(key, raising)("{}") is None
        assert caplog.records[-1].getMessage() == "application callback raised; ignored"
        assert getattr(caplog.records[-1], "callback", None) == key
    assert guarded("oauth_cb", raising) is raising
    assert guarded("stats_cb", 5) == 5


def test_a_failing_hook_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """The log line of a hook that raised shows where in the application it raised.

    It said only "raised KeyError: 'x'", with no file or line (the review of 2026-11-29, later).
    """

    def on_assigned(positions: object) -> None:
        raise KeyError("x")

    hooks = PartitionHooks("me", on_assigned=on_assigned)
    with caplog.at_level(logging.ERROR, logger="client_balance"):
        hooks.assigned({"1:t:0": 0})
    [record] = [r for r in caplog.records if r.getMessage() == "application callback failed"]
    assert 'raise KeyError("x")' in record.exception  # type: ignore[attr-defined]


def test_hooks_run_one_at_a_time_whatever_thread_calls_them() -> None:
    """Hooks called from several threads at once never overlap (consumer.md, Lifecycle hooks)."""
    inside, overlaps = [0], [0]

    def slow_hook(positions: object) -> None:
        inside[0] += 1
        overlaps[0] += inside[0] > 1
        threading.Event().wait(0.005)
        inside[0] -= 1

    hooks = PartitionHooks("me", on_assigned=slow_hook, on_revoked=slow_hook, on_lost=slow_hook)
    calls = [hooks.assigned, hooks.revoked, hooks.lost] * 4
    threads = [threading.Thread(target=call, args=({"1:t:0": 0},)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5.0)
    assert overlaps == [0]
