"""A round after a pause of the whole process: the lease is judged by the clock first."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any, cast

import pytest

from client_balance.consumer._hooks import PartitionHooks
from client_balance.consumer._keeper import PartitionKeeper
from client_balance.keys import TopicPartition
from client_balance.membership import StatusMember

ORDERS_0 = TopicPartition("orders", 0)


def _meta(**more: Any) -> SimpleNamespace:
    """A partition meta cache whose keys are the partitions' names; ``more``: its other parts."""
    return SimpleNamespace(key=str, holding_key=str, hold_keys=list, drop_keys=list, **more)


class _Fetcher:
    """Holds ``orders-0`` at confirmed offset 7; records each release and whether it commits."""

    def __init__(self) -> None:
        self.holding = {ORDERS_0}
        self.releases: list[tuple[TopicPartition, bool]] = []

    def held(self) -> set[TopicPartition]:
        return set(self.holding)

    def quiesce(self, partitions: Any, wait_s: float) -> dict[TopicPartition, int]:
        return {tp: 7 for tp in partitions if tp in self.holding}

    def release(self, partitions: Any, wait_s: float, *, commit: bool = True) -> None:
        for partition in sorted(partitions):
            self.releases.append((partition, commit))
            self.holding.discard(partition)

    def let_go(self, partitions: Any) -> None:
        self.release(partitions, 0.0, commit=False)


def _plain_keeper(fetcher: _Fetcher) -> PartitionKeeper:
    """A keeper of member "me" over ``fetcher``, plain hooks, keys as ``str`` gives them."""
    member = SimpleNamespace(settings=SimpleNamespace(refused_connect_wait_s=1.0), consumer_id="me")
    return PartitionKeeper(
        cast(Any, member), cast(Any, fetcher), cast(Any, _meta()),
        PartitionHooks("me"), cast(Any, SimpleNamespace(pinned_keys=tuple)),
    )  # fmt: skip


class _PausedStatus:
    """A member just woken from SIGSTOP: its clock says the lease lapsed, its flag not yet."""

    fenced = False

    def __init__(self) -> None:
        self.forgotten: set[TopicPartition] = set()

    def check_group(self, me: Any) -> None:
        return None

    def lease_ok(self) -> bool:
        return False

    def lease_in_doubt(self) -> bool:
        return False  # lapsed by the clock: no doubt about it

    def holders(self) -> dict[TopicPartition, str]:
        return {ORDERS_0: "me"}  # the view has not yet read the others' claims

    def forget(self, partitions: Any) -> None:
        self.forgotten.update(partitions)


def test_a_round_that_wakes_before_the_fence_loses_its_partitions_and_commits_nothing() -> None:
    """Lease lapsed by the clock, flag not set yet: on_lost, no commit, no on_revoked."""
    calls: list[tuple[str, dict[str, int]]] = []
    hooks = PartitionHooks(
        "me",
        on_revoked=lambda positions: calls.append(("revoked", dict(positions))),
        on_lost=lambda positions: calls.append(("lost", dict(positions))),
    )
    member = SimpleNamespace(
        settings=SimpleNamespace(refused_connect_wait_s=1.0),
        consumer_id="me",
        report=lambda offsets, pins: None,
    )
    fetcher = _Fetcher()
    meta = _meta()
    planner = SimpleNamespace(pinned_keys=tuple)
    keeper = PartitionKeeper(
        cast(Any, member), cast(Any, fetcher), cast(Any, meta), hooks, cast(Any, planner)
    )
    status = _PausedStatus()
    keeper.status = cast(StatusMember, status)
    assert keeper._keep_status(keeper.status) is False
    assert calls == [("lost", {"orders:0": 7})]
    assert fetcher.releases == [(ORDERS_0, False)]
    assert status.forgotten == set()  # its claims stay, to be withdrawn when reports land


class _DoubtedStatus(_PausedStatus):
    """One answer said the status log changed; the report thread has not asked again yet."""

    def lease_in_doubt(self) -> bool:
        return True


def test_a_round_while_one_answer_doubts_the_status_log_lets_go_of_nothing() -> None:
    """No batch goes out (lease_ok is False), but no partition is dropped on one answer either.

    The round, woken by that answer, ran before the report thread asked again and dropped every
    partition with on_lost and no commit, though the second answer showed the same log (the
    review of 2026-11-29).
    """
    calls: list[tuple[str, dict[str, int]]] = []
    hooks = PartitionHooks("me", on_lost=lambda positions: calls.append(("lost", dict(positions))))
    member = SimpleNamespace(
        settings=SimpleNamespace(refused_connect_wait_s=1.0),
        consumer_id="me",
        report=lambda offsets, pins: None,
    )
    fetcher = _Fetcher()
    keeper = PartitionKeeper(
        cast(Any, member), cast(Any, fetcher), cast(Any, _meta()), hooks,
        cast(Any, SimpleNamespace(pinned_keys=tuple)),
    )  # fmt: skip
    keeper.status = cast(StatusMember, _DoubtedStatus())
    assert keeper._keep_status(keeper.status) is False
    assert calls == []
    assert fetcher.releases == []
    assert fetcher.held() == {ORDERS_0}


class _StandingClaimStatus(_PausedStatus):
    """Fenced since the round began: its claims still stand, so a claim would 'win' unwritten."""

    def __init__(self) -> None:
        super().__init__()
        self.claims: list[set[TopicPartition]] = []

    def claimable(self, partitions: Any) -> set[TopicPartition]:
        return set(partitions)

    def claim(self, partitions: Any) -> dict[TopicPartition, str | None]:
        self.claims.append(set(partitions))
        return dict.fromkeys(partitions)

    def claimed(self) -> set[TopicPartition]:
        return set()

    def report_soon(self) -> None:
        return None

    def withdraw(self, partitions: Any) -> None:
        return None


class _HoldingFetcher(_Fetcher):
    """Records what a round asks it to hold."""

    def __init__(self) -> None:
        super().__init__()
        self.holds: list[set[TopicPartition]] = []

    def hold(self, requests: Any, rules: Any, *, skip_unreadable: bool) -> dict[Any, int]:
        self.holds.append(set(requests))
        return {}

    def announce(self, starts: Any) -> None:
        return None


def test_a_round_fenced_on_its_way_registers_nothing() -> None:
    """The lease lapsed after the round's first look: it claims and holds nothing new."""
    member = SimpleNamespace(
        settings=SimpleNamespace(refused_connect_wait_s=1.0, start_position="latest"),
        consumer_id="me",
        topics={"orders": None},
    )
    fetcher = _HoldingFetcher()
    meta = SimpleNamespace(
        key=str,
        holding_key=str,
        hold_keys=list,
        drop_keys=list,
        check_registrable=lambda *args: None,
    )
    planner = SimpleNamespace(pinned_keys=tuple)
    keeper = PartitionKeeper(
        cast(Any, member), cast(Any, fetcher), cast(Any, meta), PartitionHooks("me"),
        cast(Any, planner),
    )  # fmt: skip
    status = _StandingClaimStatus()
    keeper.status = cast(StatusMember, status)
    keeper._register({TopicPartition("orders", 1): -1})
    assert status.claims == []
    assert fetcher.holds in ([], [set()])


def test_a_release_while_a_commit_waits_for_its_answer_withdraws_its_claim_only_after_it() -> None:
    """The claim stays until the commit given up has its answer; a later round withdraws it.

    A commit given up after request_timeout_s may land yet: withdrawn at once, the partition's
    next owner could commit before it landed, and the group's offset went back behind the new
    owner's (the review of this session's diff).
    """
    fetcher = _Fetcher()
    settled = [False]
    fetcher.commits = SimpleNamespace(settled=lambda partitions=None: settled[0])  # type: ignore[attr-defined]
    withdrawn: list[set[TopicPartition]] = []
    status = SimpleNamespace(
        withdraw=lambda partitions: withdrawn.append(set(partitions)),
        report_soon=lambda: None,
        claimed=lambda: {ORDERS_0} - set().union(*withdrawn),
    )
    keeper = _plain_keeper(fetcher)
    keeper.status = cast(StatusMember, status)
    keeper._release({ORDERS_0})
    assert fetcher.releases == [(ORDERS_0, True)]
    assert withdrawn == []  # its claim waits for the commit's answer
    keeper._withdraw_strays()
    assert withdrawn == []
    settled[0] = True
    keeper._withdraw_strays()  # the next round's
    assert withdrawn == [{ORDERS_0}]


def test_shutdown_leaves_only_after_asking_for_the_final_commits_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The leave withdraws the claims: it waits for the final commit's answer first.

    It left at once, so a final commit given up and answered later could land over the next
    holder's commits (the review of 2026-11-29). Unanswered in time, it leaves all the same,
    saying so.
    """
    steps: list[str] = []
    fetcher = _Fetcher()

    def settled(partitions: Any = None) -> bool:
        steps.append(f"settled {sorted(map(str, partitions))}")
        return False  # the coordinator never answered

    fetcher.commits = SimpleNamespace(settled=settled)  # type: ignore[attr-defined]
    # t:1's claim was kept by an earlier release: its final commit still waits for its answer.
    status = SimpleNamespace(
        leave=lambda: steps.append("leave"), claimed=lambda: {TopicPartition("orders", 1)}
    )
    keeper = _plain_keeper(fetcher)
    keeper.status = cast(StatusMember, status)
    with caplog.at_level(logging.WARNING, "client_balance.reconcile"):
        keeper.release_for_shutdown()
    assert fetcher.releases == [(ORDERS_0, True)]
    assert steps == ["settled ['orders:0', 'orders:1']", "leave"]
    assert any("final commit unanswered" in r.getMessage() for r in caplog.records)


def test_disconnecting_a_partition_only_fetched_ahead_commits_nothing() -> None:
    """Not held (fetched ahead of a claim at most): let go without a commit.

    Its state's start was committed over the group's offset of a partition the member never
    won (the review of 2026-11-29).
    """
    fetcher = _Fetcher()
    fetcher.holding = set()  # held() is empty: t:0 was only fetched ahead
    keeper = _plain_keeper(fetcher)
    keeper.disconnect(ORDERS_0)
    assert fetcher.releases == [(ORDERS_0, False)]
