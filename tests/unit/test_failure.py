"""keep_running: a background loop outlives what its step raises, and tells the next call."""

from __future__ import annotations

import pickle
import threading

import pytest

from client_balance._failure import FailureSlot, keep_running
from client_balance.errors import ClientBalanceError


def test_a_step_that_raises_is_reported_and_the_loop_goes_on() -> None:
    """Two failures, then steps that work: all of them run, and the slot holds the last one."""
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
