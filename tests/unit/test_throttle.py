"""TubeMQ's 421 guard: asked again too soon after a 410, while the same member holds it."""

from __future__ import annotations

import pytest

from client_balance.consumer._throttle import RefusedConnects
from client_balance.errors import TooFrequentError
from client_balance.keys import TopicPartition

P0 = TopicPartition("orders", 0)


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self) -> None:
        self.now_s = 50.0

    def __call__(self) -> float:
        """The time now."""
        return self.now_s


def test_asked_again_within_the_wait_while_still_held_raises_421() -> None:
    """The refusing member still holds the partition: 421 with the time left."""
    clock = FakeClock()
    guard = RefusedConnects(5.0, clock)
    guard.refused(P0, "holder")
    clock.now_s += 4.96  # 0.04 s left: the settle wait is that short
    with pytest.raises(TooFrequentError) as too_soon:
        guard.check(P0, "orders:0", lambda: {P0: "holder"})
    assert too_soon.value.code == 421
    assert too_soon.value.retry_after_s == pytest.approx(0.04)


def test_a_partition_freed_meanwhile_or_asked_after_the_wait_passes() -> None:
    """Released by its holder, or asked after the wait, the partition is simply registered."""
    clock = FakeClock()
    guard = RefusedConnects(5.0, clock)
    guard.refused(P0, "holder")
    guard.check(P0, "orders:0", dict)  # released meanwhile
    clock.now_s += 5.0
    guard.check(P0, "orders:0", lambda: {P0: "holder"})  # the wait is over
    guard.registered(P0)
    clock.now_s -= 5.0
    guard.check(P0, "orders:0", lambda: {P0: "holder"})  # no 410 on record any more
