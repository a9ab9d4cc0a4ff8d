"""A round's claims: one read of the group view, and no claim left standing on nothing held."""

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
        self.fences = 0

    def lease_ok(self) -> bool:
        return True

    def claimable(self, partitions: Any) -> set[TopicPartition]:
        self.reads += 1
        return {tp for tp in partitions if tp != TopicPartition("orders", 0)}

    def claim(self, partitions: Any) -> dict[TopicPartition, str | None]:
        return dict.fromkeys(partitions)


_SETTLED = SimpleNamespace(settled=lambda _partitions=None: True)
"""The commits of a fetcher whose commits all had their answer."""


def test_a_round_reads_the_group_view_once_for_all_its_partitions() -> None:
    """Registering n partitions costs one pass over the group view, not n passes."""
    setup = SimpleNamespace(settings=SimpleNamespace(refused_connect_wait_s=1.0), consumer_id="C0")
    fetcher = SimpleNamespace(held=set, commits=_SETTLED)
    keeper = PartitionKeeper(
        cast(Any, setup), cast(Any, fetcher), cast(Any, None), cast(Any, None), cast(Any, None)
    )
    status = _Status()
    keeper.status = cast(StatusMember, status)
    wanted = {TopicPartition("orders", number): -1 for number in range(50)}
    claimed = keeper._claim(wanted, None)
    assert status.reads == 1
    assert set(claimed) == set(wanted) - {TopicPartition("orders", 0)}


class _Claims:
    """A member whose claims stand on ``orders-0`` and ``orders-1``; records its withdrawals."""

    def __init__(self) -> None:
        self.withdrawn: list[set[TopicPartition]] = []
        self.reports = 0

    def claimed(self) -> set[TopicPartition]:
        return {TopicPartition("orders", 0), TopicPartition("orders", 1)}

    def withdraw(self, partitions: set[TopicPartition]) -> None:
        self.withdrawn.append(set(partitions))

    def report_soon(self) -> None:
        self.reports += 1


def test_a_claim_made_with_the_join_and_not_registered_is_withdrawn() -> None:
    """The round held orders-0 only: the claim on orders-1 goes, the held one stays."""
    setup = SimpleNamespace(settings=SimpleNamespace(refused_connect_wait_s=1.0), consumer_id="C0")
    fetcher = SimpleNamespace(held=lambda: {TopicPartition("orders", 0)}, commits=_SETTLED)
    keeper = PartitionKeeper(
        cast(Any, setup), cast(Any, fetcher), cast(Any, None), cast(Any, None), cast(Any, None)
    )
    status = _Claims()
    keeper.status = cast(StatusMember, status)
    keeper._withdraw_strays()
    assert status.withdrawn == [{TopicPartition("orders", 1)}]
    assert status.reports == 1


class _PausedWhileClaiming(_Status):
    """Its claims are read back won, then the process pauses: fenced, back, claims withdrawn."""

    def claim(self, partitions: Any) -> dict[TopicPartition, str | None]:
        verdicts = super().claim(partitions)
        self.fences += 1  # the report thread's fence and way back, while the round was stopped
        return verdicts


def test_a_round_that_was_fenced_while_it_claimed_holds_none_of_its_claims() -> None:
    """Won before a pause, withdrawn by the fence's way back: the round must not hold them.

    It held and announced them with the lease fine again, while the view named their new holder
    (the review of 2026-11-29).
    """
    setup = SimpleNamespace(settings=SimpleNamespace(refused_connect_wait_s=1.0), consumer_id="C0")
    fetcher = SimpleNamespace(held=set, commits=_SETTLED)
    keeper = PartitionKeeper(
        cast(Any, setup), cast(Any, fetcher), cast(Any, None), cast(Any, None), cast(Any, None)
    )
    keeper.status = cast(StatusMember, _PausedWhileClaiming())
    assert keeper._claim({TopicPartition("orders", 1): -1}, None) == {}
