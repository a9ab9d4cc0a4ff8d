"""A round's target with pins and callbacks, from fakes of the meta set and the status view.

The integration tests (test_pins.py, test_callbacks.py) prove the same on a real broker; these
pin the edge cases: contested pins, every way an assigner can fail, pins of other topics.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, cast

import pytest

from client_balance import (
    AssignmentContext,
    CallbackError,
    ClientBalanceSettings,
    ConfigError,
    GroupMode,
    PinConflictError,
)
from client_balance.consumer import _targets
from client_balance.consumer._hooks import PartitionHooks
from client_balance.consumer._meta import MetaCache
from client_balance.consumer._results import PartitionMeta
from client_balance.consumer._setup import Assigner, MemberSetup
from client_balance.consumer._targets import TargetPlanner
from client_balance.keys import RESUME_OFFSET, TopicPartition
from client_balance.membership import HeldPartition, MemberReport, StatusMember
from client_balance.strategies._nodes import node_share

T = "orders"
PARTITIONS = [TopicPartition(T, p) for p in range(4)]
META = {tp: PartitionMeta(f"1:{tp}", T, tp.partition, 1, True, 0, 10) for tp in PARTITIONS}


class FakeMeta:
    """The two things the planner asks of the meta cache."""

    def key(self, partition: TopicPartition) -> str:
        """The key, always with leader 1."""
        return f"1:{partition}"

    def with_watermarks(
        self, max_age_s: float, holders: Mapping[TopicPartition, str]
    ) -> dict[TopicPartition, PartitionMeta]:
        """The fixed meta set."""
        return dict(META)


class FakeStatus:
    """A status view with fixed pins and reports."""

    def __init__(
        self, pins: dict[TopicPartition, str], reports: Iterable[MemberReport] = ()
    ) -> None:
        self._pins = pins
        self._reports = {report.consumer_id: report for report in reports}

    def pins(self) -> dict[TopicPartition, str]:
        """The fixed pins."""
        return dict(self._pins)

    def holders(self) -> dict[TopicPartition, str]:
        """Nobody holds anything."""
        return {}

    def live_reports(self) -> dict[str, MemberReport]:
        """The fixed reports."""
        return dict(self._reports)


def _report(consumer_id: str, pinned: list[str], held: dict[str, HeldPartition]) -> MemberReport:
    return MemberReport(
        consumer_id=consumer_id, host="h", pid=1, node_id=1, source_count=2, topics=(T,),
        strategy="modulo", version="v", lease_timeout_s=30.0, held=held, pinned=pinned,
    )  # fmt: skip


def _planner(
    mode: GroupMode, *, assigner: Any = None, source_count: int = 2, node_id: int = 0
) -> tuple[TargetPlanner, PartitionHooks]:
    settings = ClientBalanceSettings(bootstrap_servers="127.0.0.1:9", group_id="g")
    setup = MemberSetup(
        settings, "me", {T: None}, mode, source_count, node_id, cast("Assigner | None", assigner)
    )
    hooks = PartitionHooks("me")
    return TargetPlanner(setup, cast("MetaCache", FakeMeta()), hooks, {}), hooks


def _status(pins: dict[TopicPartition, str], *reports: MemberReport) -> StatusMember:
    return cast("StatusMember", FakeStatus(pins, reports))


def test_node_mode_leaves_out_other_members_pins_and_adds_its_own() -> None:
    """Node 0 of 2 (modulo: 0 and 2 in node order) drops a pin of another member, adds its own."""
    planner, _ = _planner(GroupMode.NODE)
    planner.pin({PARTITIONS[3]: 1200}, {})
    others = {PARTITIONS[0]: "other"}
    target = planner.target(META, set(), _status(others))
    share = {tp for tp in planner.target(META, set(), _status({})) if tp != PARTITIONS[3]}
    assert PARTITIONS[0] not in target
    assert target[PARTITIONS[3]] == 1200
    assert set(target) == (share - {PARTITIONS[0]}) | {PARTITIONS[3]}


def test_manual_mode_keeps_what_it_holds_except_another_members_pin() -> None:
    """In manual mode the target is what is held, less partitions another member pinned."""
    planner, _ = _planner(GroupMode.MANUAL, source_count=-1)
    target = planner.target(META, {PARTITIONS[0], PARTITIONS[1]}, _status({PARTITIONS[1]: "x"}))
    assert target == {PARTITIONS[0]: RESUME_OFFSET}


def test_a_pin_another_member_made_first_is_yielded_and_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two members pinned one partition: the later drops its pin, logs it, keeps the error.

    Logged too: another failure kept before it would have left it a mere count in a note
    that says "each is in the log" (the review of 2026-11-29, later).
    """
    planner, hooks = _planner(GroupMode.MANUAL, source_count=-1)
    planner.pin({PARTITIONS[2]: RESUME_OFFSET}, {})
    with caplog.at_level(logging.WARNING, logger="client_balance"):
        target = planner.target(META, set(), _status({PARTITIONS[2]: "earlier"}))
    assert [r.getMessage() for r in caplog.records] == ["pin dropped"]
    assert PARTITIONS[2] not in target
    assert planner.pins() == {}
    with pytest.raises(PinConflictError) as conflict:
        hooks.failures.raise_once()
    assert conflict.value.holder == "earlier"


def test_pinning_another_members_pin_or_another_topic_is_refused_at_once() -> None:
    """pin() names the member that pinned it first; a topic not consumed is a ConfigError."""
    planner, _ = _planner(GroupMode.NODE)
    with pytest.raises(PinConflictError, match="other-member"):
        planner.pin({PARTITIONS[1]: 5}, {PARTITIONS[1]: "other-member"})
    with pytest.raises(ConfigError, match="stock:0"):
        planner.pin({TopicPartition("stock", 0): 5}, {})
    assert planner.pins() == {}


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (RuntimeError("boom"), "raised RuntimeError: boom"),
        (["nosuch:0"], "outside the configured set"),
        ([3.5], "not partitions"),
        ("orders:1", "not partitions"),
        ({"orders:1": -7}, "not partitions"),
        (None, r"returned None; return a collection of partition keys"),
        (7, r"returned 7; return a collection of partition keys"),
        ({"orders:0": -1, "0:orders:0": 7}, r"'orders:0' and '0:orders:0' name orders:0"),
    ],
)
def test_a_failing_assigner_keeps_the_previous_target(answer: object, reason: str) -> None:
    """A raise or an invalid answer: the previous target stands; CallbackError names the round."""
    calls = {"n": 0}

    def assigner(context: AssignmentContext) -> object:
        calls["n"] += 1
        if calls["n"] == 1:
            return [f"{T}:0"]
        if isinstance(answer, Exception):
            raise answer
        return answer

    planner, hooks = _planner(GroupMode.MANUAL, assigner=assigner, source_count=-1)
    hooks.round_number = 1
    assert planner.target(META, set(), _status({})) == {PARTITIONS[0]: RESUME_OFFSET}
    hooks.round_number = 2
    assert planner.target(META, {PARTITIONS[0]}, _status({})) == {PARTITIONS[0]: RESUME_OFFSET}
    with pytest.raises(CallbackError, match=reason) as failed:
        hooks.failures.raise_once()
    assert (failed.value.callback, failed.value.round_number) == ("assigner", 2)


def test_the_context_shows_members_with_pins_and_lag() -> None:
    """The context lists live members with their pins, holdings and lag, and the previous target."""
    seen: list[AssignmentContext] = []

    def assigner(context: AssignmentContext) -> list[str]:
        seen.append(context)
        return [f"{T}:1"]

    other = _report("other", [f"{T}:2"], {f"{T}:2": HeldPartition(4, 4, 10)})
    planner, _ = _planner(GroupMode.NODE, assigner=assigner)
    planner.target(META, set(), _status({PARTITIONS[2]: "other"}, other))
    planner.target(META, {PARTITIONS[1]}, _status({PARTITIONS[2]: "other"}, other))
    context = seen[-1]
    (view,) = context.members
    assert (view.consumer_id, view.pinned, dict(view.held), view.lag) == (
        "other", frozenset({f"1:{T}:2"}), {f"1:{T}:2": 6}, 6,
    )  # fmt: skip
    assert context.previous_target == {f"1:{T}:1"}
    assert context.held == {f"1:{T}:1"}
    assert context.partitions[f"1:{T}:0"].high == 10
    assert context.me is None  # this member's report is not in the fake view


def test_a_node_asks_its_strategy_again_only_when_the_partition_counts_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Steady rounds reuse the node's share; a partition added asks the strategy again."""
    asked: list[Mapping[str, int]] = []

    def spy(strategy: Any, counts: Mapping[str, int], source_count: int, node_id: int) -> Any:
        asked.append(dict(counts))
        return node_share(strategy, counts, source_count, node_id)

    monkeypatch.setattr(_targets, "node_share", spy)
    planner, _ = _planner(GroupMode.NODE)
    first = planner.target(META, set(), _status({}))
    assert planner.target(META, set(), _status({})) == first
    assert asked == [{T: 4}]
    added = TopicPartition(T, 4)
    grown = {**META, added: PartitionMeta(f"1:{added}", T, 4, 1, True, 0, 10)}
    planner.target(grown, set(), _status({}))
    assert asked == [{T: 4}, {T: 5}]
