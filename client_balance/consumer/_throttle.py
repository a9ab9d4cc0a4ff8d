"""TubeMQ's 421: ``connect()`` of a partition asked again too soon after a 410 for it.

A 410 names the live member holding the partition. Asked again within
``refused_connect_wait_s``, while that member still holds it, the answer is
:class:`TooFrequentError` instead of another claim on the status topic. The status view is
read by a background thread, so a release that happened just before is waited for briefly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from client_balance._kafka import wait_until
from client_balance.errors import TooFrequentError
from client_balance.keys import TopicPartition

__all__ = ["RefusedConnects"]

_SETTLE_S = 1.0
"""Longest wait for the status view to show a release that has just been written."""
_SETTLE_POLL_S = 0.02


class RefusedConnects:
    """The last 410 of ``connect()`` per partition, and the 421 it implies."""

    def __init__(self, wait_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._wait_s = wait_s
        self._clock = clock
        self._refused: dict[TopicPartition, tuple[float, str | None]] = {}

    def refused(self, partition: TopicPartition, holder: str | None) -> None:
        """``connect()`` of ``partition`` got 410 naming ``holder``."""
        self._refused[partition] = (self._clock(), holder)

    def registered(self, partition: TopicPartition) -> None:
        """``connect()`` of ``partition`` succeeded: no guard any more."""
        self._refused.pop(partition, None)

    def check(
        self,
        partition: TopicPartition,
        shown_key: str,
        holders: Callable[[], Mapping[TopicPartition, str]],
    ) -> None:
        """Raise 421 if asked too soon and the member that refused still holds the partition."""
        refused_s, holder = self._refused.get(partition, (-self._wait_s, None))
        left_s = refused_s + self._wait_s - self._clock()
        if left_s <= 0:
            return
        freed = wait_until(
            lambda: holders().get(partition) != holder,
            timeout_s=min(left_s, _SETTLE_S),
            interval_s=_SETTLE_POLL_S,
        )
        if not freed:
            raise TooFrequentError(
                f"partition {shown_key} was refused (410) less than {self._wait_s:g} s ago and "
                f"{holder} still holds it; ask again in {left_s:.1f} s",
                key=shown_key,
                retry_after_s=round(left_s, 3),
            )
