"""Which partitions a registration may hold: those held already, and those it claims now."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set

from client_balance.errors import PartitionOccupiedError
from client_balance.keys import TopicPartition
from client_balance.membership import StatusMember

__all__ = ["claim"]


def claim(
    status: StatusMember | None,
    held: Set[TopicPartition],
    wanted: Mapping[TopicPartition, int],
    shown_key: str | None,
    key_of: Callable[[TopicPartition], str],
) -> dict[TopicPartition, int]:
    """The partitions of ``wanted`` this member may hold: claimed now, or held already.

    ``shown_key`` is the application's key for a ``connect()``: a claim lost is then a
    :class:`PartitionOccupiedError`; for a round (None) it is left out, as is everything
    claimed while the member fenced.
    """
    fresh = {tp: offset for tp, offset in wanted.items() if tp not in held}
    if status is None or not fresh:
        return fresh
    if shown_key is None and not status.lease_ok():
        return {}  # fenced since the round began: its claims still stand, unwritten
    if shown_key is None:  # a round leaves what others hold to the round they free it in
        claimable = status.claimable(fresh)  # one pass over the group view
        fresh = {tp: offset for tp, offset in fresh.items() if tp in claimable}
    fences = status.fences
    verdicts = status.claim(fresh)
    lost = {tp: holder for tp, holder in verdicts.items() if holder is not None}
    if lost and shown_key is not None:
        partition, holder = next(iter(lost.items()))
        raise PartitionOccupiedError(
            f"partition {key_of(partition)} is held by the live member {holder}; it can be "
            "registered once that member releases it or its lease lapses",
            key=shown_key, holder=holder,
        )  # fmt: skip
    if shown_key is None and status.fences != fences:  # a pause since: the fence's way back
        return {}  # withdrew them, and others may hold them now
    return {tp: offset for tp, offset in fresh.items() if tp not in lost}
