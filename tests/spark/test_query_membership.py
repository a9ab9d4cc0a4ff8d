"""A streaming query's membership of its group (``spark/_registration.py``) on the real broker.

These drive :class:`QueryMembership` as the stream reader does, next to real SDK workers in
this process; ``test_streaming_membership.py`` runs the same through a Spark query.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator

import pytest

from client_balance import ClientBalanceConsumer, ClientBalanceSettings, PartitionOccupiedError
from client_balance.admin import GroupView, commit_offsets, partition_offsets
from client_balance.cli import main as cli_main
from client_balance.keys import TopicPartition
from client_balance.spark import parse_options
from client_balance.spark._registration import QueryMembership
from tests.integration.workers import produce, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _membership(bootstrap: str, group: str, topic: str) -> QueryMembership:
    options = parse_options(
        {"kafka.bootstrap.servers": bootstrap, "topics": topic, "group.id": group}
    )
    # A short lease: a refusal after an earlier query waits one lease for it to leave.
    return QueryMembership(options, source_count=2, lease_timeout_s=4.0, report_interval_s=1.0)


@pytest.fixture
def make_member(kafka_bootstrap: str) -> Iterator[Callable[..., ClientBalanceConsumer]]:
    """Factory of SDK workers on the session broker with short leases; shut down after."""
    made: list[ClientBalanceConsumer] = []

    def make(group_id: str) -> ClientBalanceConsumer:
        settings = ClientBalanceSettings(
            bootstrap_servers=kafka_bootstrap,
            group_id=group_id,
            start_position="earliest",
            report_interval_s=1.0,
            lease_timeout_s=6.0,
            request_timeout_s=2.0,
            reconcile_interval_s=1.0,
        )
        made.append(ClientBalanceConsumer(settings))
        return made[-1]

    yield make
    for consumer in made:
        consumer.shutdown()


def _view(bootstrap: str, group: str) -> GroupView:
    return GroupView.load(ClientBalanceSettings(bootstrap_servers=bootstrap, group_id=group))


def _partitions(topic: str, count: int) -> list[TopicPartition]:
    return [TopicPartition(topic, number) for number in range(count)]


def test_a_query_shows_in_the_status_view_with_its_positions_and_lag(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A holding query is a live member of mode spark; the view and the CLI show its lag."""
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 40, partitions=2)
    group = f"query-{uuid.uuid4().hex[:8]}"
    first, second = _partitions(topic, 2)
    highs = {
        tp: high for tp, (_, high, _) in partition_offsets(kafka_bootstrap, group, [topic]).items()
    }
    # What the stream reader does after a micro-batch: commit its end, then report it.
    commit_offsets(kafka_bootstrap, group, {first: 10})
    query = _membership(kafka_bootstrap, group, topic)
    try:
        query.hold({first: 10, second: 0}, highs)
        view = _view(kafka_bootstrap, group)
        (member,) = view.live_members
        assert member.consumer_id == query.consumer_id
        assert member.mode == "spark"
        assert member.pinned == (str(first), str(second))
        assert member.holds == (str(first), str(second))
        assert member.lag == highs[first] - 10 + highs[second]
        assert view.orphaned == ()
        status = ["status", "--group", group, "--bootstrap-servers", kafka_bootstrap]
        assert cli_main(status) == 0
        shown = capsys.readouterr().out
        assert "spark" in shown
        assert str(highs[first] - 10 + highs[second]) in shown
    finally:
        query.leave()
    assert _view(kafka_bootstrap, group).live_members == ()


def test_workers_started_later_leave_the_querys_partitions_alone(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """A node-mode worker joining after the query takes none of its partitions, no 425/429."""
    topic, other_topic = new_topic(partitions=2), new_topic(partitions=1)
    produce(kafka_bootstrap, topic, 20, partitions=2)
    group = f"query-{uuid.uuid4().hex[:8]}"
    query = _membership(kafka_bootstrap, group, topic)
    query.hold(dict.fromkeys(_partitions(topic, 2), 0), dict.fromkeys(_partitions(topic, 2), 10))
    worker = make_member(group_id=group)
    try:
        # Other topics than the query's, and a source count of 1: no group check objects.
        worker.start([topic, other_topic], 1, 0)
        wait_until(lambda: len(worker.registered_partitions()) == 1, 30, "the worker holds one")
        assert [key.split(":", 1)[1] for key in worker.registered_partitions()] == [
            f"{other_topic}:0"
        ]
        query.leave()
        wait_until(
            lambda: len(worker.registered_partitions()) == 3,
            30,
            "the worker takes the query's partitions once it left",
        )
    finally:
        query.leave()


def test_a_query_is_refused_partitions_a_live_worker_holds(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """Claiming what a worker holds fails with 410 naming the worker; the query leaves."""
    topic = new_topic(partitions=2)
    group = f"query-{uuid.uuid4().hex[:8]}"
    worker = make_member(group_id=group)
    worker.start([topic], 1, 0)
    wait_until(lambda: len(worker.registered_partitions()) == 2, 30, "the worker holds both")
    query = _membership(kafka_bootstrap, group, topic)
    with pytest.raises(PartitionOccupiedError) as refused:
        query.hold(dict.fromkeys(_partitions(topic, 2), 0), dict.fromkeys(_partitions(topic, 2), 0))
    assert refused.value.holder == worker.consumer_id
    assert worker.consumer_id in str(refused.value)
    assert "readHeldPartitions" in str(refused.value)
    view = _view(kafka_bootstrap, group)
    assert [m.consumer_id for m in view.live_members] == [worker.consumer_id]


def test_a_second_query_on_the_same_partitions_is_refused(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """Two streaming queries of one group cannot read the same partition: the later one fails."""
    topic = new_topic(partitions=1)
    group = f"query-{uuid.uuid4().hex[:8]}"
    partitions = _partitions(topic, 1)
    first = _membership(kafka_bootstrap, group, topic)
    second = _membership(kafka_bootstrap, group, topic)
    try:
        first.hold(dict.fromkeys(partitions, 0), dict.fromkeys(partitions, 0))
        with pytest.raises(PartitionOccupiedError) as refused:
            second.hold(dict.fromkeys(partitions, 0), dict.fromkeys(partitions, 0))
        assert refused.value.holder == first.consumer_id
    finally:
        first.leave()
        second.leave()


def test_a_partition_new_to_the_query_is_claimed_when_it_appears(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """hold() with a partition added later claims and pins it too."""
    topic = new_topic(partitions=2)
    group = f"query-{uuid.uuid4().hex[:8]}"
    first, second = _partitions(topic, 2)
    query = _membership(kafka_bootstrap, group, topic)
    try:
        query.hold({first: 0}, {first: 3})
        query.hold({first: 3}, {first: 3, second: 4})
        wait_until(
            lambda: (
                _view(kafka_bootstrap, group).live_members[0].pinned == (str(first), str(second))
            ),
            15,
            "the report names both partitions",
        )
    finally:
        query.leave()


_EARLIER_RUN = """
import sys, time
from client_balance.keys import TopicPartition
from client_balance.spark import parse_options
from client_balance.spark._registration import QueryMembership, leave_on_terminate

bootstrap, group, topic, lease_s = sys.argv[1:]
options = parse_options({"kafka.bootstrap.servers": bootstrap, "topics": topic, "group.id": group})
query = QueryMembership(
    options, source_count=1, lease_timeout_s=float(lease_s), report_interval_s=1.0
)
leave_on_terminate(query)
query.hold({TopicPartition(topic, 0): 0}, {TopicPartition(topic, 0): 0})
print("holding", flush=True)
time.sleep(600)
"""


def _earlier_run(bootstrap: str, group: str, topic: str, lease_s: float) -> subprocess.Popen[str]:
    """A process holding partition 0 as a query would, until it is signalled."""
    run = subprocess.Popen(
        [sys.executable, "-c", _EARLIER_RUN, bootstrap, group, topic, str(lease_s)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert run.stdout is not None
    assert run.stdout.readline().strip() == "holding"
    return run


def test_a_terminated_query_process_leaves_its_group_at_once(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """SIGTERM (how Spark stops a stream reader) withdraws the member before the process ends."""
    topic = new_topic(partitions=1)
    group = f"query-{uuid.uuid4().hex[:8]}"
    run = _earlier_run(kafka_bootstrap, group, topic, 600.0)
    try:
        assert [m.mode for m in _view(kafka_bootstrap, group).live_members] == ["spark"]
        run.send_signal(signal.SIGTERM)
        assert run.wait(30) == -signal.SIGTERM
    finally:
        run.kill()
        run.wait()
    # With a 600 s lease, only the withdrawal can have ended the membership.
    assert _view(kafka_bootstrap, group).live_members == ()


def test_a_restarted_query_takes_over_once_its_killed_run_lapsed(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """A run SIGKILLed while holding (Spark gives no notice) blocks its restart one lease only."""
    topic = new_topic(partitions=1)
    group = f"query-{uuid.uuid4().hex[:8]}"
    earlier = _earlier_run(kafka_bootstrap, group, topic, 4.0)
    earlier.kill()
    earlier.wait()
    partitions = _partitions(topic, 1)
    restarted = _membership(kafka_bootstrap, group, topic)
    try:
        restarted.hold(dict.fromkeys(partitions, 0), dict.fromkeys(partitions, 0))
        holds = _view(kafka_bootstrap, group).live_members
        assert [(m.consumer_id, m.holds) for m in holds] == [
            (restarted.consumer_id, (str(partitions[0]),))
        ]
    finally:
        restarted.leave()
