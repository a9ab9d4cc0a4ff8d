"""The status topic against the real broker: ownership, group checks, operator view, elastic."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported without __all__
    AdminClient,
    ConfigResource,
    ResourceType,
)
from confluent_kafka.cimpl import NewPartitions  # admin re-exports it without __all__

from client_balance import (
    AssignmentContext,
    ClientBalanceConsumer,
    ClientBalanceSettings,
    ConfigError,
    DuplicateNodeIdError,
    InconsistentFiltersError,
    InconsistentSourceCountError,
    InconsistentStrategyError,
    InconsistentTopicsError,
    KafkaClientError,
    NoMessageError,
    PartitionOccupiedError,
    TooFrequentError,
    admin,
)
from client_balance.broker import LocalKafka
from client_balance.cli import main as cli_main
from client_balance.keys import TopicPartition
from client_balance.membership import (
    GroupState,
    MemberReport,
    StatusMember,
    StatusWriter,
    claim_key,
    ensure_status_topic,
    member_key,
    parse_key,
    status_partition,
)
from client_balance.strategies import Member, get_strategy
from client_balance.strategies._nodes import node_share
from tests.integration.conftest import GroupFactory
from tests.integration.consumer_worker import batch_events, timed_batch_events
from tests.integration.history import (
    assert_committed_was_delivered,
    assert_history_holds,
    assert_nothing_behind_the_new_owner,
    assert_nothing_behind_the_new_owner_then,
    audited_status_topic,
    status_log,
    topic_records,
)
from tests.integration.proxy import TcpProxy
from tests.integration.workers import (
    REPO,
    Group,
    Node,
    all_records,
    committed,
    highs,
    produce,
    wait_until,
)

pytestmark = pytest.mark.integration

STATUS_TOPIC = "__client_balance_status"
VIEW_POLL_S = 0.5


# ------------------------------------------------------------------------------- ownership
@pytest.mark.timeout(240)
def test_two_processes_racing_for_a_partition_never_both_hold_it(
    kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """200 rounds of two processes connecting one partition: one holder each time, the other 410.

    The 410 names the winner: both claimed, and the loser lost to it (a local "asked again
    too soon" refusal, 421, is turned off in the workers, as it made rounds uncontested).
    """
    rounds = 200
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, 50, partitions=1)
    group = f"race-{uuid.uuid4().hex[:8]}"
    outs = {name: tmp_path / f"{name}.out" for name in ("a", "b")}
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.integration.race_worker",
                "--bootstrap",
                kafka_bootstrap,
                "--group",
                group,
                "--topic",
                topic,
                "--rounds",
                str(rounds),
                "--dir",
                str(tmp_path),
                "--name",
                name,
            ],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / f"{name}.log").open("wb"),
        )
        for name in outs
    ]

    def lines(name: str) -> list[str]:
        path = outs[name]
        return path.read_text().splitlines() if path.exists() else []

    def line_of(name: str, round_: int, *kinds: str) -> str | None:
        for line in lines(name):
            number, kind, *_ = [*line.split(), ""]
            if number == str(round_) and kind in kinds:
                return line
        return None

    try:
        wait_until(
            lambda: all(lines(n) and lines(n)[0].startswith("ready") for n in outs),
            60, "both racers ready",
        )  # fmt: skip
        ids = {n: lines(n)[0].split()[1] for n in outs}
        winners: Counter[str] = Counter()
        for round_ in range(rounds):
            (tmp_path / f"go-{round_}").touch()
            wait_until(
                lambda r=round_: all(line_of(n, r, "won", "lost") for n in outs),  # type: ignore[misc]
                30,
                f"both answers of round {round_}",
            )
            answers = {n: line_of(n, round_, "won", "lost") or "" for n in outs}
            won = [n for n, line in answers.items() if line.split()[1] == "won"]
            assert len(won) == 1, f"round {round_}: {answers}"
            loser = next(n for n in outs if n not in won)
            assert answers[loser].split()[1:] == ["lost", ids[won[0]]], f"round {round_}: {answers}"
            winners[won[0]] += 1
            (tmp_path / f"release-{round_}").touch()
            wait_until(
                lambda r=round_, w=won[0]: line_of(w, r, "released") is not None,  # type: ignore[misc]
                30,
                f"release of round {round_}",
            )
        assert sum(winners.values()) == rounds
        for process in processes:
            assert process.wait(timeout=30) == 0
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()


def test_connect_of_a_partition_held_by_a_live_member_raises_410(
    new_topic: Callable[..., str], make_member: Callable[..., ClientBalanceConsumer]
) -> None:
    """connect() of a partition another live member holds raises 410 naming the holder."""
    topic = new_topic(partitions=2)
    first, second = make_member(), make_member()
    first.start([topic], source_count=0)
    second.start([topic], source_count=0)
    first.connect(f"{topic}:1")
    with pytest.raises(PartitionOccupiedError) as occupied:
        second.connect(f"{topic}:1")
    assert occupied.value.code == 410
    assert occupied.value.holder == first.consumer_id
    second.connect(f"{topic}:0")  # the other partition is free
    first.disconnect(f"{topic}:1")
    second.connect(f"{topic}:1")  # released: now it is free too
    assert second.registered_partitions() == {f"1:{topic}:0", f"1:{topic}:1"}


def test_a_member_back_from_its_fence_frees_what_it_dropped(
    new_topic: Callable[..., str], make_member: Callable[..., ClientBalanceConsumer]
) -> None:
    """Fenced before its lease lapsed for the others, then back: its dropped claim is withdrawn.

    It forgot the claim without withdrawing it. The others, who never saw the lease lapse,
    still counted the claim, and refused connect() with 410 for as long as the member lived.
    """
    topic = new_topic(partitions=1)
    first = make_member(refused_connect_wait_s=0.0)
    second = make_member(refused_connect_wait_s=0.0)
    first.start([topic], source_count=0)
    second.start([topic], source_count=0)
    first.connect(f"{topic}:0")
    assert first._run is not None
    status = first._run.keeper.status  # internal: the only way to make its writes fail
    assert status is not None
    writer, write = status._writer, status._writer.write

    fenced = threading.Event()

    def failing_until_fenced(records: Any, *, within_s: float | None = None) -> Any:
        if not status.fenced:
            raise KafkaClientError("injected", kafka_code=-185, kafka_name="_TIMED_OUT")
        fenced.set()
        writer.write = write  # type: ignore[method-assign]
        return write(records, within_s=within_s)

    writer.write = failing_until_fenced  # type: ignore[method-assign]
    wait_until(fenced.is_set, 30, "the member to fence itself")
    wait_until(lambda: not status.fenced, 30, "the member to come back")
    assert first.registered_partitions() == set()

    def second_gets_it() -> bool:
        with contextlib.suppress(PartitionOccupiedError):
            second.connect(f"{topic}:0")
        return second.registered_partitions() == {f"1:{topic}:0"}

    wait_until(second_gets_it, 15, "the partition the member dropped to be free")


def test_asking_again_too_soon_after_a_410_raises_421(
    new_topic: Callable[..., str], make_member: Callable[..., ClientBalanceConsumer]
) -> None:
    """connect() of a partition refused with 410 moments ago raises TooFrequentError (421)."""
    topic = new_topic(partitions=1)
    holder, asker = make_member(), make_member(refused_connect_wait_s=1.0)
    holder.start([topic], source_count=0)
    asker.start([topic], source_count=0)
    holder.connect(f"{topic}:0")
    with pytest.raises(PartitionOccupiedError):
        asker.connect(f"{topic}:0")
    with pytest.raises(TooFrequentError) as too_soon:
        asker.connect(f"{topic}:0")
    assert too_soon.value.code == 421
    assert 0 < too_soon.value.retry_after_s <= 1.0
    time.sleep(1.1)
    with pytest.raises(PartitionOccupiedError):  # asked after the wait: a real answer again
        asker.connect(f"{topic}:0")


def test_a_release_whose_commit_fails_still_withdraws_the_claim(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """The claim goes even when the final commit fails, so the partition is not stranded.

    Before the fix the failed commit skipped the withdrawal: every other member got 410 for as
    long as the releasing member lived.
    """
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, 10, partitions=1)
    first = make_member(commit="interval", commit_interval_s=3600.0)
    second = make_member()
    first.start([topic], source_count=0)
    second.start([topic], source_count=0)
    first.connect(f"{topic}:0")
    batch = first.get_message(timeout_s=30)
    first.confirm(batch.confirm_context)  # confirmed, not committed: the release must commit
    assert first._run is not None
    committer = first._run.fetcher.commits  # inject one failing commit

    def refused(states: object) -> bool:
        raise KafkaClientError("injected", kafka_code=-1, kafka_name="INJECTED")

    committer.commit_held = refused  # type: ignore[method-assign]
    with pytest.raises(KafkaClientError, match="injected"):
        first.disconnect(f"{topic}:0")
    assert first.registered_partitions() == set()
    second.connect(f"{topic}:0")  # no 410: the claim was withdrawn
    assert second.registered_partitions() == {f"1:{topic}:0"}


def test_a_round_whose_release_commit_fails_hands_the_partition_over_within_two_rounds(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    kafka_settings: Callable[..., ClientBalanceSettings],
) -> None:
    """A commit failure injected once during a reconcile round's release: the claim goes anyway.

    The new owner holds the partition within two reconcile intervals.
    """
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, 10, partitions=1)
    owner = {"id": "first"}

    def assigner_of(name: str) -> Callable[[AssignmentContext], list[str]]:
        return lambda context: [f"{topic}:0"] if owner["id"] == name else []

    settings = kafka_settings(commit="interval", commit_interval_s=3600.0, request_timeout_s=2.0,
                              lease_timeout_s=6.0, report_interval_s=1.0)  # fmt: skip
    group = settings.group_id
    first = ClientBalanceConsumer(settings, assigner=assigner_of("first"))
    second = ClientBalanceConsumer(
        kafka_settings(
            group_id=group, request_timeout_s=2.0, lease_timeout_s=6.0, report_interval_s=1.0
        ),
        assigner=assigner_of("second"),
    )
    with first, second:
        first.start([topic], source_count=-1, node_id=0)
        second.start([topic], source_count=-1, node_id=1)
        assert first.reconcile_now(30.0)
        batch = first.get_message(timeout_s=30)
        first.confirm(batch.confirm_context)  # confirmed, not committed: the release commits
        assert first._run is not None
        commits = first._run.fetcher.commits  # inject one failing commit
        real_commit = commits.commit_held

        def fail_once(states: Any) -> bool:
            commits.commit_held = real_commit  # type: ignore[method-assign]
            raise KafkaClientError("injected", kafka_code=-1, kafka_name="INJECTED")

        commits.commit_held = fail_once  # type: ignore[method-assign]
        owner["id"] = "second"
        began = time.monotonic()
        first.reconcile_now(30.0)  # its release fails to commit; the round's error is kept
        wait_until(
            lambda: second.reconcile_now(30.0) and bool(second.registered_partitions()),
            2 * settings.reconcile_interval_s + 5,
            "the new owner holding the partition",
        )
        assert time.monotonic() - began <= 2 * settings.reconcile_interval_s + 5
        with pytest.raises(KafkaClientError, match="injected"):  # the round's failure, once
            first.registered_partitions()
        assert first.registered_partitions() == set()


def test_a_fatal_client_error_stops_the_member_and_frees_its_partitions(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """After librdkafka's fatal error every call raises it and the claims are withdrawn.

    Before the fix the error was raised once and cleared while the member kept its claims, so
    its partitions stalled: nobody fetched them and everybody else got 410.
    """
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, 10, partitions=1)
    first, second = make_member(), make_member()
    first.start([topic], source_count=0)
    second.start([topic], source_count=0)
    first.connect(f"{topic}:0")
    assert first._run is not None
    # librdkafka raises fatal errors for states a test cannot reach on demand; the error
    # callback is the path it takes, so the test takes it too.
    first._run.fetcher._on_kafka_error(KafkaError(KafkaError._FATAL, "injected", fatal=True))
    for _ in range(2):
        with pytest.raises(KafkaClientError, match="injected"):
            first.get_message(timeout_s=1)

    def second_connects() -> bool:
        try:
            second.connect(f"{topic}:0")
        except PartitionOccupiedError:
            return False
        return True

    wait_until(second_connects, 30, "the stopped member's partition to be free")
    with pytest.raises(KafkaClientError, match="injected"):
        first.registered_partitions()


def test_a_created_status_topic_rolls_and_forgets_tombstones_soon(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """The status topic is created with 1-minute segments and tombstones kept an hour.

    Every start replays the group's status partition, and compaction never cleans the active
    segment: with Kafka's 1-hour segment and 1-day tombstones each start replayed every report
    of the last hour and every member that left that day (20 ms for 3,600 records, measured);
    with 10-minute segments, a group of 100 left 6,000 reports to replay (0.18 s).
    """
    status_topic = f"status-roll-{uuid.uuid4().hex[:8]}"
    make_member(status_topic=status_topic).start([new_topic(partitions=1)], source_count=0)
    client = AdminClient({"bootstrap.servers": kafka_bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, status_topic)
    entries = client.describe_configs([resource])[resource].result(timeout=30)
    assert entries["segment.ms"].value == "60000"
    assert entries["delete.retention.ms"].value == "3600000"


def test_one_write_lands_as_one_batch(kafka_bootstrap: str) -> None:
    """A write's records reach the broker in one request: consecutive offsets, one broker time.

    With linger.ms=0 the producer sent the first record as soon as it was queued and the rest
    in a second request (a 200-record write: two broker times); a join's report could land
    apart from its claims, which the design calls one write. Seen as a flake of
    ``test_fetch_ahead.py::test_a_node_claims_its_share_in_the_write_of_its_join``.
    """
    status_topic = f"status-batch-{uuid.uuid4().hex[:8]}"
    ensure_status_topic(kafka_bootstrap, status_topic, kafka={}, timeout_s=30.0)
    writer = StatusWriter(kafka_bootstrap, status_topic, 0, kafka={}, timeout_s=30.0)
    try:
        for count in (5, 200, 200):
            written = writer.write([(f"k{n}".encode(), b"{}") for n in range(count)])
            first = written[0][0]
            assert [offset for offset, _ in written] == list(range(first, first + count))
            assert len({stamp_ms for _, stamp_ms in written}) == 1
    finally:
        writer.close()


def test_a_write_stalled_midway_still_lands_as_one_batch(kafka_bootstrap: str) -> None:
    """A write whose thread stalls between its records (load, another thread's GIL) stays whole.

    With a 100 ms linger the producer sent what was queued once the linger ran out, so a stall
    longer than that split the write in two requests (two broker times): the flake of
    ``test_one_write_lands_as_one_batch`` in a fresh-clone ``make test``.
    """
    status_topic = f"status-stall-{uuid.uuid4().hex[:8]}"
    ensure_status_topic(kafka_bootstrap, status_topic, kafka={}, timeout_s=30.0)
    writer = StatusWriter(kafka_bootstrap, status_topic, 0, kafka={}, timeout_s=30.0)

    def stalled() -> Iterator[tuple[bytes, bytes]]:
        for n in range(200):
            if n == 100:
                time.sleep(0.3)
            yield f"k{n}".encode(), b"{}"

    try:
        written = writer.write(stalled())
        first = written[0][0]
        assert [offset for offset, _ in written] == list(range(first, first + 200))
        assert len({stamp_ms for _, stamp_ms in written}) == 1
    finally:
        writer.close()


def test_adding_partitions_to_the_status_topic_moves_no_group(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """A member that starts after the status topic grew still meets the group's running members.

    Before the fix the group's status partition was crc32(group) % the topic's partitions now:
    after growing the topic a new member read another partition, saw nobody, and took a
    partition a running member held.
    """
    topic = new_topic(partitions=1)
    status_topic = f"status-grown-{uuid.uuid4().hex[:8]}"
    # A group whose partition moves when the topic grows from 1 to 3 partitions.
    group = next(f"grown-{i}" for i in range(100) if status_partition(f"grown-{i}", 3) != 0)
    first = make_member(group_id=group, status_topic=status_topic)
    first.start([topic], source_count=0)
    first.connect(f"{topic}:0")
    client = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in client.create_partitions([NewPartitions(status_topic, 3)]).values():
        future.result(timeout=30)
    second = make_member(group_id=group, status_topic=status_topic)
    second.start([topic], source_count=0)
    with pytest.raises(PartitionOccupiedError):
        second.connect(f"{topic}:0")
    # A member set to spread groups over 3 partitions, where its group's partition stays 0,
    # meets the members that use 1 and is refused (elsewhere it could not see them at all).
    shared = next(f"shared-{i}" for i in range(100) if status_partition(f"shared-{i}", 3) == 0)
    make_member(group_id=shared, status_topic=status_topic).start([topic], source_count=0)
    spread = make_member(group_id=shared, status_topic=status_topic, status_topic_partitions=3)
    with pytest.raises(ConfigError, match="status_topic_partitions=3 differs from the live"):
        spread.start([topic], source_count=0)


# ---------------------------------------------------------------------------- group checks
def test_start_raises_429_and_430_against_the_live_group(
    new_topic: Callable[..., str], make_member: Callable[..., ClientBalanceConsumer]
) -> None:
    """A differing source_count raises 429 and a taken node id 430; the first member runs on."""
    topic = new_topic(partitions=4)
    first = make_member()
    first.start([topic], source_count=2, node_id=0)
    with pytest.raises(InconsistentSourceCountError) as inconsistent:
        make_member().start([topic], source_count=3, node_id=1)
    assert (inconsistent.value.code, inconsistent.value.ours, inconsistent.value.group) == (
        429, 3, 2,
    )  # fmt: skip
    with pytest.raises(DuplicateNodeIdError) as duplicate:
        make_member().start([topic], source_count=2, node_id=0)
    assert duplicate.value.code == 430
    assert duplicate.value.holder == first.consumer_id
    make_member().start([topic], source_count=2, node_id=1)
    assert first.is_partitions_ready(10)


def test_start_raises_425_426_and_a_strategy_conflict_against_the_live_group(
    new_topic: Callable[..., str], make_member: Callable[..., ClientBalanceConsumer]
) -> None:
    """Other topics raise 425, other filters 426, another strategy in node mode a conflict."""
    topic, other_topic = new_topic(partitions=2), new_topic(partitions=2)
    first = make_member()
    first.start({topic: {"paid"}}, source_count=2, node_id=0)
    with pytest.raises(InconsistentTopicsError) as topics:
        make_member().start({topic: {"paid"}, other_topic: None}, source_count=2, node_id=1)
    assert (topics.value.code, topics.value.group) == (425, [topic])
    with pytest.raises(InconsistentFiltersError) as filters:
        make_member().start({topic: {"paid", "sent"}}, source_count=2, node_id=1)
    assert (filters.value.code, filters.value.group) == (426, {topic: ["paid"]})
    with pytest.raises(InconsistentStrategyError) as strategy:
        make_member(strategy="range").start({topic: {"paid"}}, source_count=2, node_id=1)
    assert (strategy.value.ours, strategy.value.group) == ("range", "modulo")
    make_member().start({topic: {"paid"}}, source_count=2, node_id=1)  # agrees: joins
    assert first.is_partitions_ready(10)


def test_elastic_members_with_another_strategy_are_refused(
    new_topic: Callable[..., str], make_member: Callable[..., ClientBalanceConsumer]
) -> None:
    """Elastic members also each compute the whole assignment: another strategy is refused."""
    topic = new_topic(partitions=6)
    first = make_member(strategy="roundrobin")
    first.start([topic], mode="elastic")
    with pytest.raises(InconsistentStrategyError, match="elastic members") as strategy:
        make_member(strategy="range").start([topic], mode="elastic")
    assert (strategy.value.ours, strategy.value.group) == ("range", "roundrobin")
    make_member(strategy="roundrobin").start([topic], mode="elastic")  # agrees: joins
    assert first.is_partitions_ready(10)


def test_a_claim_that_lost_and_was_never_withdrawn_is_tombstoned_by_the_holder(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """The winner withdraws a losing claim its member left behind, so compaction keeps the verdict.

    Before the fix the claim stood until compaction removed the holder's intermediate reports,
    and a reader replaying the compacted log then judged it a win (see the unit test
    test_a_defeated_claim_is_judged_the_same_on_the_full_and_the_compacted_log).
    """
    topic = new_topic(partitions=1)
    holder = make_member()
    holder.start([topic], source_count=0)
    holder.connect(f"{topic}:0")
    group = holder.settings.group_id
    loser = MemberReport(
        consumer_id="killed-loser", host="elsewhere", pid=1, node_id=-1, source_count=-1,
        topics=(topic,), strategy="modulo", version="test", lease_timeout_s=6.0, mode="manual",
    )  # fmt: skip
    lost_claim = claim_key(group, TopicPartition(topic, 0), "killed-loser")
    writer = StatusWriter(kafka_bootstrap, STATUS_TOPIC, 0, kafka={}, timeout_s=10)
    writer.write([(member_key(group, "killed-loser"), loser.encode()), (lost_claim, b"{}")])
    writer.close()  # and never withdraws it, as if killed right after

    def tombstoned() -> bool:
        return any(key == lost_claim and value is None for key, value, _, _ in
                   status_log(kafka_bootstrap, group))  # fmt: skip

    wait_until(tombstoned, 15, "the holder's tombstone of the losing claim", VIEW_POLL_S)
    assert holder.registered_partitions() == {f"1:{topic}:0"}


def _fake_dead_member(bootstrap: str, group: str, topic: str) -> tuple[bytes, bytes]:
    """Write a report and a claim of a member that then dies at once (a 1 s lease)."""
    ghost = MemberReport(
        consumer_id="ghost", host="gone", pid=1, node_id=-1, source_count=-1, topics=(topic,),
        strategy="modulo", version="test", lease_timeout_s=1.0, mode="manual",
    )  # fmt: skip
    keys = (member_key(group, "ghost"), claim_key(group, TopicPartition(topic, 0), "ghost"))
    writer = StatusWriter(bootstrap, STATUS_TOPIC, 0, kafka={}, timeout_s=10)
    writer.write([(keys[0], ghost.encode()), (keys[1], b"{}")])
    writer.close()
    return keys


def test_the_earliest_live_member_reaps_long_dead_members(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """A dead member's report and claims get tombstones reap_after_s after its lease."""
    topic = new_topic(partitions=1)
    member = make_member(reap_after_s=1.0)
    member.start([topic], source_count=0)
    group = member.settings.group_id
    keys = _fake_dead_member(kafka_bootstrap, group, topic)

    def reaped() -> bool:
        gone = {key for key, value, _, _ in status_log(kafka_bootstrap, group) if value is None}
        return set(keys) <= gone

    wait_until(reaped, 20, "tombstones for the dead member", VIEW_POLL_S)
    view = admin.GroupView.load(member.settings)
    assert [m.consumer_id for m in view.members] == [member.consumer_id]


def test_cli_reap_tombstones_a_group_with_no_live_member(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """client-balance reap removes what dead members left; groups no longer lists the group."""
    topic = new_topic(partitions=1)
    group = f"reaped-{uuid.uuid4().hex[:8]}"
    _fake_dead_member(kafka_bootstrap, group, topic)
    time.sleep(1.5)  # past the ghost's 1 s lease
    common = ["--bootstrap-servers", kafka_bootstrap]
    assert cli_main(["reap", "--group", group, "--older-than-s", "0", *common]) == 0
    assert capsys.readouterr().out.split() == ["ghost"]
    assert cli_main(["groups", "--json", *common]) == 0
    assert group not in json.loads(capsys.readouterr().out)


def test_a_conflict_seen_later_stops_the_later_member(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """A member that learns an earlier live member has its node id stops with 430 and lets go."""
    topic = new_topic(partitions=2)
    member = make_member()
    member.start([topic], source_count=2, node_id=1)
    assert member.is_partitions_ready(10)
    # An earlier member (join offset 0) with the same node id, as a concurrent start would leave.
    earlier = MemberReport(
        consumer_id="earlier-member", host="elsewhere", pid=1, node_id=1, source_count=2,
        topics=(topic,), strategy="modulo", version="test", lease_timeout_s=30.0, join_offset=0,
    )  # fmt: skip
    group = member.settings.group_id
    writer = StatusWriter(kafka_bootstrap, STATUS_TOPIC, 0, kafka={}, timeout_s=10)
    writer.write([(member_key(group, "earlier-member"), earlier.encode())])
    writer.close()
    with contextlib.suppress(DuplicateNodeIdError):  # the reader may have woken a round already
        member.reconcile_now(10)

    def stopped() -> bool:
        try:
            member.registered_partitions()
        except DuplicateNodeIdError:
            return True
        return False

    wait_until(stopped, 15, "the later member stops with 430")

    def live() -> set[str]:
        return {m.consumer_id for m in admin.GroupView.load(member.settings).live_members}

    # Calls raise 430 from the moment it stops; its leave is written right after, once its
    # partitions are released and committed: the view shows it gone a moment later.
    wait_until(lambda: live() == {"earlier-member"}, 15, "the later member left the group")


def test_status_topic_must_be_compacted(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """A status topic that exists with cleanup.policy=delete is refused, naming the fix."""
    wrong = new_topic(partitions=1)
    consumer = make_member(status_topic=wrong)
    with pytest.raises(ConfigError, match=r"cleanup.policy=delete; it must be compacted"):
        consumer.start([wrong], source_count=0)


# ---------------------------------------------------------------------------- operator view
@pytest.mark.timeout(120)
def test_group_view_and_cli_status_show_the_workers(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    groups: GroupFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """GroupView and `client-balance status` show each worker, its partitions, offsets and lag."""
    topic = new_topic(partitions=6)
    produce(kafka_bootstrap, topic, 6_000, partitions=6)
    group = groups(kafka_bootstrap, topic, 3)
    nodes = group.spawn_all("--stop-after-idle-s", "30")
    wait_until(
        lambda: sum(len(n.records()) for n in nodes if n.out.exists()) >= 6_000,
        60,
        "every message consumed",
    )
    settings = ClientBalanceSettings(bootstrap_servers=kafka_bootstrap, group_id=group.group)

    def settled() -> bool:
        view = admin.GroupView.load(settings)
        return len(view.live_members) == 3 and view.total_lag == 0 and not view.orphaned

    wait_until(settled, 30, "three live members, every partition held, no lag", VIEW_POLL_S)
    view = admin.GroupView.load(settings)
    by_node = {m.node_id: m for m in view.live_members}
    assert sorted(by_node) == [0, 1, 2]
    for partition in view.partitions:
        holder = next(m for m in view.members if m.consumer_id == partition.holder)
        expected = node_share(get_strategy("modulo"), {topic: 6}, 3, holder.node_id)
        assert TopicPartition(topic, partition.partition) in expected
        assert partition.committed == partition.high == 1_000
    assert view.conflicts == ()

    assert cli_main(["status", "--group", group.group, "--bootstrap-servers", kafka_bootstrap,
                     "--json"]) == 0  # fmt: skip
    shown = json.loads(capsys.readouterr().out)
    assert shown["orphaned"] == []
    assert shown["total_lag"] == 0
    assert {p["holder"] for p in shown["partitions"]} == {m.consumer_id for m in view.members}
    assert cli_main(["status", "--group", group.group, "--bootstrap-servers", kafka_bootstrap]) == 0
    table = capsys.readouterr().out
    assert "3 live member(s), 6 partition(s), 0 orphaned, total lag 0" in table

    assert cli_main(["groups", "--bootstrap-servers", kafka_bootstrap, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[group.group] == 3

    # Offsets cannot be reset under live members; once they stop, they can.
    assert cli_main(["reset-offsets", "--group", group.group, "--to", "earliest",
                     "--bootstrap-servers", kafka_bootstrap]) == 1  # fmt: skip
    assert "has live members" in capsys.readouterr().err
    group.stop(nodes)
    code = cli_main(["reset-offsets", "--group", group.group, "--to", "earliest",
                     "--topic", topic, "--bootstrap-servers", kafka_bootstrap])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert committed(kafka_bootstrap, group.group, topic, 6) == dict.fromkeys(range(6), 0)
    capsys.readouterr()
    assert cli_main(["groups", "--bootstrap-servers", kafka_bootstrap, "--json"]) == 0
    assert group.group not in json.loads(capsys.readouterr().out)  # nobody left: not online


# ---------------------------------------------------------------------------- elastic groups
def elastic_group(
    bootstrap: str,
    new_topic: Callable[..., str],
    groups: GroupFactory,
    partitions: int,
    total: int,
) -> tuple[str, dict[int, int], Group, ClientBalanceSettings]:
    """A topic with ``total`` messages, its high watermarks, an elastic group, its settings.

    The group writes to a status topic of its own (``audited_status_topic``): its history is
    replayed record by record at the end.
    """
    topic = new_topic(partitions=partitions)
    produce(bootstrap, topic, total, partitions=partitions)
    status_topic = audited_status_topic(bootstrap)
    group = groups(bootstrap, topic, -1, mode="elastic", status_topic=status_topic)
    settings = ClientBalanceSettings(
        bootstrap_servers=bootstrap, group_id=group.group, status_topic=status_topic
    )
    return topic, highs(bootstrap, topic, partitions), group, settings


def _held_counts(view: admin.GroupView) -> dict[str, int]:
    return {m.consumer_id: len(m.holds) for m in view.live_members}


@pytest.mark.timeout(300)
def test_elastic_group_grows_and_shrinks_moving_only_what_the_strategy_moves(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    groups: GroupFactory,
) -> None:
    """3 -> 5 -> 2 elastic members over 500,000 messages: none lost, no takeover, strategy moves."""
    partitions, total = 12, 500_000
    topic, high, group, settings = elastic_group(kafka_bootstrap, new_topic, groups, 12, total)
    # Slow enough (at most 5,000 messages/s per member) that messages flow through every change.
    options = ("--stop-after-idle-s", "3", "--confirm-delay-s", "0.1", "--batch-max", "500")
    running: list[Node] = []
    boundaries: list[int] = []  # status-log positions where the group had settled

    def settle(size: int) -> None:
        def balanced() -> bool:
            view = admin.GroupView.load(settings)
            counts = sorted(_held_counts(view).values())
            return (
                len(counts) == size
                and not view.orphaned
                and counts[-1] - counts[0] <= 1
                and sum(counts) == partitions
            )

        # Each view opens three Kafka clients: poll gently, the members need the CPU.
        # Each view opens three Kafka clients: poll gently, the members need the CPU.
        wait_until(balanced, 60, f"{size} members holding every partition, balanced", VIEW_POLL_S)
        boundaries.append(
            status_log(kafka_bootstrap, group.group, settings.status_topic)[-1][2] + 1
        )

    for node_id in range(3):
        running.append(group.spawn(node_id, *options))
    settle(3)
    for node_id in (3, 4):
        running.append(group.spawn(node_id, *options))
        settle(len(running))
    for _ in range(3):
        leaving = running.pop(0)
        group.stop([leaving])
        settle(len(running))
    assert sum(len(n.records()) for n in group.started) < total, "all consumed before the end"
    group.wait_for_lines(group.started, total, timeout_s=120)
    group.wait_exit(running, timeout_s=60)

    counts = Counter(record for node in group.started for record in node.records())
    assert set(counts) == all_records(high)  # at least once

    log = status_log(kafka_bootstrap, group.group, settings.status_topic)
    wins, settled_at = replay(group.group, log, boundaries)
    moves = []
    for step in range(1, len(boundaries)):
        moved = sum(1 for offset in wins if boundaries[step - 1] <= offset < boundaries[step])
        (owners, _), (_, members) = settled_at[step - 1], settled_at[step]
        expected = strategy_moves(topic, partitions, owners, members)
        assert moved == expected, f"step {step}: {moved} claims, the strategy moves {expected}"
        moves.append(moved)
    # 3 -> 4 -> 5 members, then 5 -> 4 -> 3 -> 2: sticky moves only the new or orphaned shares.
    assert moves == [3, 2, *moves[2:]]
    assert all(move > 0 for move in moves)


@pytest.mark.timeout(180)
def test_sigkilled_elastic_member_is_replaced_after_its_lease(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    groups: GroupFactory,
) -> None:
    """An elastic member killed mid-stream: after its lease the others take its partitions."""
    partitions, total = 6, 60_000
    _, high, group, settings = elastic_group(kafka_bootstrap, new_topic, groups, 6, total)
    options = ("--stop-after-idle-s", "3", "--confirm-delay-s", "0.05", "--batch-max", "100")
    nodes = [group.spawn(node_id, *options) for node_id in range(3)]
    wait_until(
        lambda: (
            len(admin.GroupView.load(settings).live_members) == 3
            and not admin.GroupView.load(settings).orphaned
        ),
        60,
        "three members holding every partition",
        VIEW_POLL_S,
    )
    victim = nodes[0]
    wait_until(lambda: len(victim.records()) > 0, 30, "the victim consumed something")
    victim.process.kill()
    victim.process.wait()
    survivors = nodes[1:]
    began = time.monotonic()
    wait_until(
        lambda: (
            sum(_held_counts(admin.GroupView.load(settings)).values()) == partitions
            and len(admin.GroupView.load(settings).live_members) == 2
        ),
        60,
        "the survivors hold every partition",
        VIEW_POLL_S,
    )
    taken_after_s = time.monotonic() - began
    assert taken_after_s >= 3, f"taken over {taken_after_s:.1f} s after the kill: before its lease"
    wait_until(
        lambda: len({record for node in nodes for record in node.records()}) >= total,
        120,
        "every message consumed",
        VIEW_POLL_S,
    )
    group.wait_exit(survivors, timeout_s=60)
    seen = {record for node in nodes for record in node.records()}
    assert seen == all_records(high)


Owners = dict[TopicPartition, str]


def replay(
    group: str, log: list[tuple[bytes | None, bytes | None, int, int]], boundaries: list[int]
) -> tuple[list[int], list[tuple[Owners, set[str]]]]:
    """Winning claims' offsets and (holders, live members) at each boundary; no takeovers."""
    state = GroupState(group)
    wins: list[int] = []
    settled_at: list[tuple[Owners, set[str]]] = []
    pending = list(boundaries)
    for key, value, offset, stamp in log:
        while pending and offset >= pending[0]:
            settled_at.append((state.live_holders(), set(state.live_reports())))
            pending.pop(0)
        parsed = parse_key(key)
        assert parsed is not None
        kind, _, claimant, partition = parsed
        if kind == "claim" and value is not None and partition is not None:
            before = state.holders.get(partition)
            state.verdicts_of = claimant
            state.apply(key, value, offset, stamp)
            won = state.verdicts.pop(offset, "lost") is None
            if won and (before is None or before.consumer_id != claimant):
                taken_from = None if before is None else before.consumer_id
                assert taken_from is None, f"{claimant} took {partition} from {taken_from}"
                wins.append(offset)
            continue
        state.apply(key, value, offset, stamp)
    while pending:
        settled_at.append((state.live_holders(), set(state.live_reports())))
        pending.pop(0)
    return wins, settled_at


def strategy_moves(topic: str, partitions: int, owners: Owners, members: set[str]) -> int:
    """How many partitions sticky gives to a new owner when ``members`` replace the group."""
    owned: dict[str, list[TopicPartition]] = {member: [] for member in members}
    for partition, owner in owners.items():
        if owner in owned:
            owned[owner].append(partition)
    group = [Member(m, {topic}, sorted(owned[m]), 1) for m in sorted(members)]
    answer = get_strategy("sticky").assign({topic: partitions}, group)
    return sum(1 for m, assigned in answer.items() for p in assigned if owners.get(p) != m)


@pytest.mark.timeout(300)
def test_a_paused_member_hands_out_nothing_taken_and_commits_nothing_backwards(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    groups: GroupFactory,
) -> None:
    """SIGSTOP for twice the lease, then SIGCONT: the others took over, and it notices first.

    Before the fix its reports succeeded again at once, so it was never fenced: it handed out
    the batches it had buffered and committed its old positions over the new owner's.
    """
    partitions, total = 4, 40_000
    topic, high, group, settings = elastic_group(
        kafka_bootstrap, new_topic, groups, partitions, total
    )
    options = ("--confirm-delay-s", "0.05", "--batch-max", "20", "--lease-timeout-s", "6")
    paused, other = group.spawn(0, *options), group.spawn(1, *options)
    wait_until(
        lambda: sorted(_held_counts(admin.GroupView.load(settings)).values()) == [2, 2],
        60,
        "two members holding two partitions each",
        VIEW_POLL_S,
    )
    wait_until(lambda: len(paused.records()) > 100, 30, "the paused member consumed")
    paused.process.send_signal(signal.SIGSTOP)
    paused_at = len(batch_events(paused.out))  # a stopped process writes nothing more
    try:
        wait_until(
            lambda: list(_held_counts(admin.GroupView.load(settings)).values()) == [partitions],
            60,
            "the other member holding every partition",
            VIEW_POLL_S,
        )
        time.sleep(3)  # the new owner moves on past the paused member's positions
    finally:
        paused.process.send_signal(signal.SIGCONT)
    wait_until(
        lambda: sorted(_held_counts(admin.GroupView.load(settings)).values()) == [2, 2],
        60,
        "the paused member back with its share",
        VIEW_POLL_S,
    )
    time.sleep(2)
    group.stop([paused, other])
    assert_nothing_behind_the_new_owner(
        batch_events(other.out), batch_events(paused.out)[paused_at:]
    )
    assert_committed_was_delivered(
        committed(kafka_bootstrap, group.group, topic, partitions),
        {record for node in (paused, other) for record in node.records()},
        high,
    )
    assert_history_holds(
        kafka_bootstrap, group.group, topic, [paused, other], settings.status_topic
    )


@pytest.mark.timeout(300)
def test_a_member_cut_off_from_the_cluster_is_replaced_and_rejoins(
    new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """One member's network cut for lease + 10 s: the other takes over, and it rejoins after.

    It hands out no batch of a partition behind the new owner and commits nothing under it;
    nothing committed was left undelivered; the status log's history holds.
    """
    with LocalKafka(proxied=True) as kafka:
        ((listener, advertised),) = kafka.proxied_listeners.values()
        proxy = TcpProxy(advertised, listener)
        try:
            _run_cut_off(kafka.bootstrap_servers, f"127.0.0.1:{advertised}", proxy, tmp_path)
        finally:
            proxy.close()


def _run_cut_off(direct: str, proxied: str, proxy: TcpProxy, folder: Path) -> None:
    partitions, total, lease_s = 4, 40_000, 6.0
    topic = f"cut-{uuid.uuid4().hex[:8]}"
    admin.create_topics(direct, {topic: partitions})
    produce(direct, topic, total, partitions=partitions)
    high = highs(direct, topic, partitions)
    (folder / "other").mkdir()
    (folder / "cut").mkdir()
    status_topic = audited_status_topic(direct)  # its history is replayed at the end
    other_group = Group(
        direct, topic, -1, folder / "other", mode="elastic", status_topic=status_topic
    )
    cut_group = Group(
        proxied, topic, -1, folder / "cut", mode="elastic", group=other_group.group,
        status_topic=status_topic,
    )  # fmt: skip
    settings = ClientBalanceSettings(
        bootstrap_servers=direct, group_id=other_group.group, status_topic=status_topic
    )
    options = ("--confirm-delay-s", "0.05", "--batch-max", "20", "--lease-timeout-s", str(lease_s))
    try:
        other, cut = other_group.spawn(0, *options), cut_group.spawn(1, *options)

        def two_each() -> bool:
            return sorted(_held_counts(admin.GroupView.load(settings)).values()) == [2, 2]

        wait_until(two_each, 60, "two members holding two partitions each", VIEW_POLL_S)
        wait_until(lambda: len(cut.records()) > 100, 30, "the member to be cut consumed")
        cut_at = len(timed_batch_events(cut.out))
        proxy.cut()
        began = time.monotonic()
        wait_until(
            lambda: list(_held_counts(admin.GroupView.load(settings)).values()) == [partitions],
            60,
            "the other member holding every partition",
            VIEW_POLL_S,
        )
        time.sleep(max(lease_s + 10 - (time.monotonic() - began), 0))
        proxy.restore()
        wait_until(two_each, 90, "the cut member back with its share", VIEW_POLL_S)
        other_group.stop([other])
        cut_group.stop([cut])
    finally:
        other_group.kill_leftovers()
        cut_group.kill_leftovers()
    # Until it fences, the cut-off member hands out what it had buffered, legitimately: held
    # against the new owner's commits as they stood then, not against its last one.
    assert_nothing_behind_the_new_owner_then(
        timed_batch_events(other.out), timed_batch_events(cut.out)[cut_at:]
    )
    assert_committed_was_delivered(
        committed(direct, other_group.group, topic, partitions),
        {record for node in (other, cut) for record in node.records()},
        high,
    )
    assert_history_holds(direct, other_group.group, topic, [other, cut], status_topic)


@pytest.mark.timeout(240)
def test_verdicts_hold_on_the_status_log_after_real_compaction(
    new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """A claim that lost while its holder reported, and was never withdrawn, loses on replay too.

    The status topic is compacted for real (segments of 100 ms, a cleaner that runs every
    100 ms) while the holder reports; the log read back after compaction gives the same
    holders as the members saw: the holder, and no double owner.
    """
    with LocalKafka(config={"log.cleaner.backoff.ms": "100"}) as kafka:
        bootstrap, status_topic = kafka.bootstrap_servers, "status-compacted"
        admin.create_topics(bootstrap, {"data": 2})
        config = {
            "cleanup.policy": "compact", "message.timestamp.type": "LogAppendTime",
            "segment.ms": "100", "min.compaction.lag.ms": "0",
            "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "86400000",
        }  # fmt: skip
        admin.create_topics(bootstrap, {status_topic: 1}, config=config)
        settings = ClientBalanceSettings(
            bootstrap_servers=bootstrap, group_id="compacted", status_topic=status_topic,
            report_interval_s=0.5, lease_timeout_s=3.0, request_timeout_s=1.0,
        )  # fmt: skip
        with ClientBalanceConsumer(settings) as holder:
            holder.start(["data"], source_count=0)
            holder.connect("data:0")
            holder.connect("data:1")
            # Longer than any lease a replay can assume for the holder (30 s when its earlier
            # reports are compacted away): only those reports made the contest below a loss.
            time.sleep(32)
            writer = StatusWriter(bootstrap, status_topic, 0, kafka={}, timeout_s=10)
            for number in range(2):  # members that lose a claim and are killed at once
                loser = MemberReport(
                    consumer_id=f"loser-{number}", host="gone", pid=1, node_id=-1,
                    source_count=-1, topics=("data",), strategy="modulo", version="test",
                    lease_timeout_s=3.0, mode="manual",
                )  # fmt: skip
                writer.write([
                    (member_key("compacted", loser.consumer_id), loser.encode()),
                    (claim_key("compacted", TopicPartition("data", number), loser.consumer_id),
                     b"{}"),
                ])  # fmt: skip
            writer.close()

            def compacted() -> bool:
                records = topic_records(bootstrap, status_topic)
                return len(records) < records[-1][2] + 1 - 10  # whole runs of reports gone

            wait_until(compacted, 60, "the status log compacted", VIEW_POLL_S)
            time.sleep(2)  # a few more holder reports, then compaction again
            wait_until(compacted, 60, "the status log compacted again", VIEW_POLL_S)
            state = GroupState("compacted")
            for key, value, offset, stamp in topic_records(bootstrap, status_topic):
                state.apply(key, value, offset, stamp)
            expected = {TopicPartition("data", 0): holder.consumer_id,
                        TopicPartition("data", 1): holder.consumer_id}  # fmt: skip
            assert state.live_holders() == expected


def _held(consumer: ClientBalanceConsumer) -> set[str]:
    """The partitions ``consumer`` has registered, as ``topic:partition`` (no leader)."""
    return {key.split(":", 1)[1] for key in consumer.registered_partitions()}


def _take(consumer: ClientBalanceConsumer, into: list[int]) -> bool:
    """Take and confirm a batch if one comes within 0.2 s, adding its offsets to ``into``."""
    with contextlib.suppress(NoMessageError):
        batch = consumer.get_message(0.2)
        into += [offset for message in batch.messages if (offset := message.offset()) is not None]
        consumer.confirm(batch.confirm_context)
    return True


def _status(consumer: ClientBalanceConsumer) -> StatusMember:
    """The consumer's member of the status topic (internal)."""
    assert consumer._run is not None
    status = consumer._run.keeper.status
    assert status is not None
    return status


def _delete_topic(bootstrap: str, topic: str) -> None:
    client = AdminClient({"bootstrap.servers": bootstrap})  # kept until the answer is in
    client.delete_topics([topic])[topic].result()


def test_a_status_topic_made_anew_under_a_running_member_leaves_one_holder(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """The status topic deleted, and made again by a new member's start: one holder, no overlap.

    Found by the status-log review: the running member kept its old view (and position) under
    the new log, the new member's connect() won the partition it held, and both fetched it.
    Now the running member fences (its partitions go without a commit), joins the new log,
    and sees the new member as the holder; the messages after it go to the new member only.
    """
    topic, status_topic = new_topic(partitions=1), f"status-anew-{uuid.uuid4().hex[:8]}"
    first = make_member(status_topic=status_topic, commit="sync")
    first.start([topic], mode="manual")
    first.connect(f"{topic}:0")
    produce(kafka_bootstrap, topic, 10, 1)
    before: list[int] = []
    wait_until(lambda: _take(first, before) and len(before) >= 10, 30, "the first ten")
    _delete_topic(kafka_bootstrap, status_topic)
    second = make_member(status_topic=status_topic, commit="sync")
    second.start([topic], mode="manual")  # makes the status topic again, unless the first did
    wait_until(lambda: not _held(first), 30, "the running member to let go of its partition")
    second.connect(f"{topic}:0")
    produce(kafka_bootstrap, topic, 10, 1, first=10)
    after: dict[str, list[int]] = {"first": [], "second": []}

    def all_taken() -> bool:
        _take(first, after["first"])
        _take(second, after["second"])
        return len(after["first"]) + len(after["second"]) >= 10

    wait_until(all_taken, 30, "the ten messages after the re-create")
    assert after == {"first": [], "second": list(range(10, 20))}
    assert (_held(first), _held(second)) == (set(), {f"{topic}:0"})
    views = [_status(first), _status(second)]
    wait_until(lambda: not any(view.fenced for view in views), 30, "both unfenced")
    holder = {TopicPartition(topic, 0): second.consumer_id}
    wait_until(lambda: all(view.holders() == holder for view in views), 30, "one view of it")


def test_a_deleted_status_topic_is_made_again_and_its_member_consumes_again(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """The status topic deleted, nobody else there: the member fences, makes it again, returns.

    Found by the status-log review: the member stayed fenced for good (its writes failed with
    "no answer", the producer may not create topics), and nothing named the missing topic.
    """
    topic, status_topic = new_topic(partitions=1), f"status-gone-{uuid.uuid4().hex[:8]}"
    member = make_member(status_topic=status_topic, commit="sync")
    member.start([topic], mode="elastic")
    wait_until(lambda: _held(member) == {f"{topic}:0"}, 30, "the partition held")
    _delete_topic(kafka_bootstrap, status_topic)
    wait_until(lambda: not _held(member), 30, "the member to fence itself")
    wait_until(lambda: _held(member) == {f"{topic}:0"}, 60, "the partition held again")
    produce(kafka_bootstrap, topic, 5, 1)
    taken: list[int] = []
    wait_until(lambda: _take(member, taken) and len(taken) >= 5, 30, "messages again")
    assert taken == list(range(5))
    resource = ConfigResource(ResourceType.TOPIC, status_topic)
    admin_client = AdminClient({"bootstrap.servers": kafka_bootstrap})
    config = admin_client.describe_configs([resource])[resource].result()
    assert config["cleanup.policy"].value == "compact"
    assert config["message.timestamp.type"].value == "LogAppendTime"
