"""A round's claim reads the group view once, however many partitions it registers."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from client_balance.consumer._keeper import PartitionKeeper
from client_balance.keys import TopicPartition
from client_balance.membership import StatusMember


class _Status:
    """A group view where ``orders-0`` is held by another member; counts its reads."""

    def __init__(self) -> None:
        self.reads = 0

    def claimable(self, partitions: Any) -> set[TopicPartition]:
        self.reads += 1
        return {tp for tp in partitions if tp != TopicPartition("orders", 0)}

    def claim(self, partitions: Any) -> dict[TopicPartition, str | None]:
        return dict.fromkeys(partitions)


def test_a_round_reads_the_group_view_once_for_all_its_partitions() -> None:
    """Registering n partitions costs one pass over the group view, not n passes."""
    setup = SimpleNamespace(settings=SimpleNamespace(refused_connect_wait_s=1.0))
    fetcher = SimpleNamespace(held=set)
    keeper = PartitionKeeper(
        cast(Any, setup), cast(Any, fetcher), cast(Any, None), cast(Any, None), cast(Any, None)
    )
    status = _Status()
    keeper.status = cast(StatusMember, status)
    wanted = {TopicPartition("orders", number): -1 for number in range(50)}
    claimed = keeper._claim(wanted, None)
    assert status.reads == 1
    assert set(claimed) == set(wanted) - {TopicPartition("orders", 0)}
