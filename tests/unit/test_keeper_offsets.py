"""Where a partition starts again: pins and bootstrap offsets, and a topic created anew (fakes)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest

from client_balance import (
    ClientBalanceSettings,
    ConfigError,
    GroupMode,
    InvalidOffsetError,
    NotStartedError,
)
from client_balance.consumer._hooks import PartitionHooks
from client_balance.consumer._keeper import PartitionKeeper
from client_balance.consumer._meta import MetaCache
from client_balance.consumer._results import PartitionMeta
from client_balance.consumer._setup import MemberSetup, user_target
from client_balance.consumer._starts import StartCommit
from client_balance.consumer._targets import TargetPlanner
from client_balance.keys import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


class _Meta:
    """Topic ``t`` of two partitions, both led; ``recreated`` is said once, at the next round."""

    def __init__(self) -> None:
        self.leaders = [1, 1]
        self.recreated: set[str] = set()
        self._holding_keys: dict[TopicPartition, str] = {}

    def snapshot(self) -> dict[TopicPartition, PartitionMeta]:
        return {
            TopicPartition("t", n): PartitionMeta(f"{leader}:t:{n}", "t", n, leader, leader >= 0)
            for n, leader in enumerate(self.leaders)
        }

    def refresh(self, max_age_s: float) -> None:
        return None

    def key(self, partition: TopicPartition) -> str:
        return f"{self.leaders[partition.partition]}:{partition.topic}:{partition.partition}"

    holding_key = MetaCache.holding_key
    hold_keys = MetaCache.hold_keys
    drop_keys = MetaCache.drop_keys

    def check_registrable(self, partition: TopicPartition, shown_key: str) -> None:
        return None

    def recreated_topics(self) -> set[str]:
        said, self.recreated = self.recreated, set()
        return said

    def appeared_later(self, partition: TopicPartition, grace_s: float) -> bool:
        return False

    def get(self, partition: TopicPartition) -> PartitionMeta | None:
        return self.snapshot().get(partition)

    def with_watermarks(self, *args: object) -> dict[TopicPartition, PartitionMeta]:
        return self.snapshot()


class _Fetcher:
    """Holds partitions at a position; the group's committed offsets; each start it made."""

    def __init__(self) -> None:
        self.positions: dict[TopicPartition, int] = {}
        self.committed: dict[TopicPartition, int] = {}
        self.starts: list[tuple[TopicPartition, int]] = []
        self.commits = SimpleNamespace(settled=lambda *_: True, recommit_soon=lambda: None)
        self.failures = SimpleNamespace(fatal=None)

    def held(self) -> set[TopicPartition]:
        return set(self.positions)

    @contextlib.contextmanager
    def dropping_ahead(self) -> Iterator[None]:
        yield

    def hold(self, requests: Any, rules: Any, *, skip_unreadable: bool = False) -> Any:
        started = {}
        for partition in requests:
            start, how = rules(partition, self.committed.get(partition), 0, 10_000)
            if how is not StartCommit.NONE:
                self.committed[partition] = start
            self.positions[partition] = started[partition] = start
            self.starts.append((partition, start))
        return started

    def announce(self, starts: Any) -> None:
        return None

    def quiesce(self, partitions: Any, wait_s: float) -> dict[TopicPartition, int]:
        return {tp: self.positions[tp] for tp in partitions if tp in self.positions}

    def release(self, partitions: Any, wait_s: float, *, commit: bool = True) -> None:
        for partition in partitions:
            position = self.positions.pop(partition, None)
            if commit and position is not None:
                self.committed[partition] = position

    def last_start(self, partition: TopicPartition) -> int:
        """Where ``partition`` started last."""
        return [start for tp, start in self.starts if tp == partition][-1]

    def read_to(self, partition: TopicPartition, position: int) -> None:
        """The application confirmed up to ``position``, and it was committed."""
        self.positions[partition] = self.committed[partition] = position


def _keeper(
    mode: GroupMode, pins: dict[TopicPartition, int] | None = None,
    assigner: Callable[[Any], Any] | None = None,
) -> tuple[PartitionKeeper, _Meta, _Fetcher]:  # fmt: skip
    settings = ClientBalanceSettings(bootstrap_servers="127.0.0.1:9", group_id="g")
    nodes = (1, 0) if mode is GroupMode.NODE else (-2, -2)
    setup = MemberSetup(settings, "me", {"t": None}, mode, *nodes, assigner)
    meta, fetcher, hooks = _Meta(), _Fetcher(), PartitionHooks("me")
    planner = TargetPlanner(setup, cast(Any, meta), hooks, pins or {})
    keeper = PartitionKeeper(setup, cast(Any, fetcher), cast(Any, meta), hooks, planner)
    return keeper, meta, fetcher


def test_a_pin_offset_is_not_applied_again_after_its_topic_was_created_anew() -> None:
    """Pinned at 1200, restarted from 0 in the new topic, read to 300: a leader's return resumes.

    The re-creation forgot that the pin had been applied: the partition's next registration
    jumped from 300 to 1200, past 900 messages (the review of 2026-11-29).
    """
    keeper, meta, fetcher = _keeper(GroupMode.NODE, pins={T0: 1200})
    keeper.round()
    assert fetcher.last_start(T0) == 1200
    meta.recreated = {"t"}
    keeper.round()
    assert fetcher.last_start(T0) == 0  # the new topic, from its start
    fetcher.read_to(T0, 300)
    meta.leaders = [-1, 1]  # its leader lost: released
    keeper.round()
    meta.leaders = [1, 1]  # and back
    keeper.round()
    assert fetcher.last_start(T0) == 300


def test_a_topic_created_anew_restarts_from_its_log_start_only_what_the_member_held() -> None:
    """A partition another member restarted and committed in the new topic resumes there later.

    Every partition of the topic stayed 'from the log start': taken over hours later, its
    offset went back to 0 and the whole partition came again (the review of 2026-11-29).
    """
    wanted = [[T0]]
    keeper, meta, fetcher = _keeper(GroupMode.MANUAL, assigner=lambda context: wanted[0])
    keeper.round()
    meta.recreated = {"t"}
    keeper.round()
    assert fetcher.last_start(T0) == 0
    fetcher.committed[T1] = 9_000  # the member holding t:1 in the new topic
    wanted[0] = [T0, T1]  # taken over much later
    keeper.round()
    assert fetcher.last_start(T1) == 9_000


def test_a_new_pin_of_a_partition_not_held_starts_at_its_offset() -> None:
    """pin(key, 5000) after an earlier pin at 100, an unpin and a disconnect: it starts at 5000.

    Having started from a pin's offset once, the member ignored every later pin's offset and
    resumed from the committed one (the review of 2026-11-29).
    """
    keeper, _, fetcher = _keeper(GroupMode.MANUAL)
    keeper.pin({T0: 100})
    keeper.round()
    assert fetcher.last_start(T0) == 100
    fetcher.read_to(T0, 150)
    keeper.unpin([T0])
    keeper.disconnect(T0)
    keeper.pin({T0: 5000})
    keeper.round()
    assert fetcher.last_start(T0) == 5000


def test_a_pin_offset_given_for_a_partition_held_already_is_never_applied_later() -> None:
    """pin(key, 50) of a partition held at 3005 keeps 3005, and so does its next registration.

    The offset stayed armed: when the partition was registered again after its leader was
    gone for a round, it restarted at 50 (and would have skipped ahead, committed, had the
    pin been past the position) (the review of 2026-11-29, later).
    """
    keeper, meta, fetcher = _keeper(GroupMode.MANUAL)
    fetcher.committed[T0] = 3005
    keeper.connect(T0, -1, "t:0")
    keeper.pin({T0: 50})
    keeper.round()
    assert fetcher.last_start(T0) == 3005
    meta.leaders[0] = -1  # its leader gone for a round: released
    keeper.round()
    assert T0 not in fetcher.held()
    meta.leaders[0] = 1
    keeper.round()
    assert fetcher.last_start(T0) == 3005


def test_hooks_see_one_key_per_holding_though_the_leader_moves() -> None:
    """on_assigned and on_revoked of one holding get the same key, whatever the leader is now.

    Keys name the leader; a leader that moved while the partition was held gave on_revoked
    another key than on_assigned, and state kept by key (docs/consumer.md) raised KeyError
    (the review of 2026-11-29, later).
    """
    seen: list[tuple[str, list[str]]] = []
    keeper, meta, _ = _keeper(GroupMode.MANUAL)
    keeper.hooks = PartitionHooks(
        "me",
        on_assigned=lambda positions: seen.append(("assigned", list(positions))),
        on_revoked=lambda positions: seen.append(("revoked", list(positions))),
    )
    keeper.connect(T0, -1, "t:0")
    meta.leaders[0] = 2  # a new leader, the partition still held
    keeper.disconnect(T0)
    assert seen == [("assigned", ["1:t:0"]), ("revoked", ["1:t:0"])]
    keeper.connect(T0, -1, "t:0")  # a new holding: the leader it has now
    assert seen[-1] == ("assigned", ["2:t:0"])


def test_an_on_lost_owed_from_a_fence_runs_before_the_next_registration() -> None:
    """A fence's on_lost, still owed, runs before a connect() registers the partition again.

    It ran at the next round, after the new holding's on_assigned: a handler that drops the
    state of a lost partition dropped the live holding's (the review of 2026-11-29, later).
    """
    seen: list[str] = []
    keeper, _, fetcher = _keeper(GroupMode.MANUAL)
    keeper.hooks = PartitionHooks(
        "me",
        on_assigned=lambda _positions: seen.append("assigned"),
        on_lost=lambda _positions: seen.append("lost"),
    )
    keeper.connect(T0, -1, "t:0")
    fetcher.let_go = lambda partitions: [fetcher.positions.pop(tp) for tp in partitions]  # type: ignore[attr-defined]
    keeper.lose_all()  # fenced, on the report thread: on_lost is owed
    keeper.connect(T0, -1, "t:0")  # back, and the application registers it again
    keeper.round()
    assert seen == ["assigned", "lost", "assigned"]


def test_a_ctrl_c_in_on_revoked_releases_the_partition_and_commits_nothing() -> None:
    """A KeyboardInterrupt in on_revoked: released without its commit, then raised on.

    Only an Exception was caught: the partition stayed held but marked releasing (never
    handed out or committed again), and at shutdown the fetcher's close committed the
    position whose state the hook had not written (the review of 2026-11-29, later).
    """

    def interrupted(_positions: object) -> None:
        raise KeyboardInterrupt

    keeper, _, fetcher = _keeper(GroupMode.MANUAL)
    keeper.hooks = PartitionHooks("me", on_revoked=interrupted)
    keeper.connect(T0, 100, "t:0")
    fetcher.positions[T0] = 150  # confirmed, not committed: the hook was to write its state
    with pytest.raises(KeyboardInterrupt):
        keeper.disconnect(T0)
    assert T0 not in fetcher.held()
    assert fetcher.committed[T0] == 100


def test_a_runtime_pin_of_a_topic_not_consumed_is_a_config_error_asked_of_no_cluster() -> None:
    """pin() of another topic's partition: ConfigError, as start(pinned=...) says, no query.

    It asked the cluster's metadata first and raised PartitionNotFoundError (404), which an
    ``except ConfigError`` misses (the review of 2026-11-29, later).
    """
    keeper, meta, _ = _keeper(GroupMode.MANUAL)
    meta.refresh = lambda max_age_s: pytest.fail("the cluster was asked")  # type: ignore[method-assign]
    with pytest.raises(ConfigError, match="not one this member consumes"):
        keeper.pin({TopicPartition("payments", 0): -1})


def test_an_unpin_holds_while_the_assigner_fails() -> None:
    """unpin() while the assigner raises: the round keeps the assigner's last answer, unpinned.

    A failing assigner's round fell back to the whole last target, pins included: the
    unpinned partition stayed held, and every other member was refused it with 410 for as
    long as the assigner failed (the review of 2026-11-29, later).
    """
    failing = [False]

    def assigner(_context: object) -> list[str]:
        if failing[0]:
            raise RuntimeError("the assignment service is down")
        return ["t:0"]

    keeper, _, fetcher = _keeper(GroupMode.MANUAL, assigner=assigner)
    keeper.pin({T1: -1})
    keeper.round()
    assert fetcher.held() == {T0, T1}
    failing[0] = True
    keeper.unpin([T1])
    keeper.round()
    assert fetcher.held() == {T0}


def test_an_assigner_offset_of_none_resumes_and_a_bad_one_is_named_with_its_key() -> None:
    """{key: None} resumes, as pin(key, None) does; {key: -7} raises naming the key.

    None was refused as no offset at all, and -7 was refused without naming the partition it
    was given for (the review of 2026-11-29, later).
    """
    assert user_target({"t:0": None, "t:1": 5}) == {T0: -1, T1: 5}
    with pytest.raises(InvalidOffsetError, match=r"for 't:1': bootstrap offset -7") as raised:
        user_target({"t:0": None, "t:1": -7})
    assert raised.value.offset == -7


def test_a_ctrl_c_while_a_release_waits_for_a_batch_leaves_nothing_releasing() -> None:
    """A KeyboardInterrupt while the release waits for a batch out: released, nothing committed.

    The wait was outside the release's guard: the partition stayed marked releasing, never
    handed out or committed again (the review of 2026-11-29, later).
    """
    keeper, _, fetcher = _keeper(GroupMode.MANUAL)
    keeper.connect(T0, 100, "t:0")
    fetcher.positions[T0] = 150

    def interrupted(partitions: object, wait_s: float) -> dict[TopicPartition, int]:
        raise KeyboardInterrupt

    fetcher.quiesce = interrupted  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        keeper.disconnect(T0)
    assert T0 not in fetcher.held()
    assert fetcher.committed[T0] == 100


def test_a_connect_whose_owed_on_lost_stops_the_consumer_registers_nothing() -> None:
    """connect() runs a fence's owed on_lost first; if that hook stops the consumer, no register.

    It went on to register the partition and run on_assigned on a consumer stopping
    (the review of 2026-11-29, later).
    """
    assigned: list[object] = []
    keeper, _, fetcher = _keeper(GroupMode.MANUAL)

    def stop(_positions: object) -> None:
        keeper.stopping = True  # what shutdown() from the hook does first

    keeper.hooks = PartitionHooks("me", on_lost=stop, on_assigned=assigned.append)
    keeper.connect(T0, -1, "t:0")
    fetcher.let_go = lambda partitions: [fetcher.positions.pop(tp) for tp in partitions]  # type: ignore[attr-defined]
    keeper.lose_all()
    with pytest.raises(NotStartedError, match="the consumer stops"):
        keeper.connect(T1, -1, "t:1")
    assert T1 not in fetcher.held()
    assert len(assigned) == 1
