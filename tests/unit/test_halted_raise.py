"""A consumer halted for good raises its error from every call, each with that call's frames."""

from __future__ import annotations

import traceback
from types import SimpleNamespace
from typing import Any, cast

import pytest

from client_balance import ClientBalanceConsumer, ClientBalanceSettings, GroupConflictError
from client_balance.consumer import _consumer


def test_a_halted_consumer_raises_its_error_with_one_calls_traceback() -> None:
    """The halt's error is raised by every call; its traceback grew with each one before.

    A worker that catches it and calls again held every frame of every call so far (the review
    of 2026-11-29).
    """
    consumer = ClientBalanceConsumer(ClientBalanceSettings(bootstrap_servers="127.0.0.1:9",
                                                           group_id="g"))  # fmt: skip
    halted = GroupConflictError("a member like this one is in the group")
    consumer._run = cast(Any, SimpleNamespace(keeper=SimpleNamespace(halted=halted)))
    consumer._state = _consumer._RUNNING
    depths = []
    for _ in range(20):
        with pytest.raises(GroupConflictError) as caught:
            consumer.commit()
        depths.append(len(traceback.extract_tb(caught.value.__traceback__)))
    assert depths[-1] == depths[0]
