"""ClientBalanceConsumer groups of worker processes (tests/integration/consumer_worker.py).

Each worker appends ``"<partition> <offset>"`` per consumed message to its own file before it
confirms the batch, so the files are the ground truth of what the group delivered. Tests wait on
conditions (lines written, partitions held, processes gone), never on fixed sleeps, except the
broker outage that the issue fixes at 10 seconds.
"""

from __future__ import annotations

import itertools
import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewPartitions  # admin re-exports it without __all__

from client_balance import admin
from client_balance.broker import LocalKafka
from tests.integration.conftest import GroupFactory
from tests.integration.consumer_worker import (
    confirms,
    count_confirmed,
    count_records,
    last_batch_line,
    open_batches,
    read_held,
)
from tests.integration.workers import (
    Node,
    all_records,
    committed,
    highs,
    produce,
    wait_until,
)

pytestmark = pytest.mark.integration


def assert_disjoint_cover(nodes: list[Node], partitions: int) -> None:
    """No partition was ever held by two nodes, and together they held all of them."""
    ever = {node.node_id: read_held(node.out)[1] for node in nodes}
    for (a, held_a), (b, held_b) in itertools.combinations(ever.items(), 2):
        assert not held_a & held_b, f"nodes {a} and {b} both held {sorted(held_a & held_b)}"
    assert set().union(*ever.values()) == set(range(partitions)), ever
    for node in nodes:
        strays = {p for p, _ in node.records()} - ever[node.node_id]
        assert not strays, f"node {node.node_id} consumed partitions it never held: {strays}"


# ------------------------------------------------------------------------------------ tests
@pytest.mark.timeout(180)
def test_four_workers_consume_each_message_exactly_once(
    kafka_bootstrap: str, new_topic: Callable[..., str], groups: GroupFactory
) -> None:
    """Four worker processes read 200,000 messages of 12 partitions exactly once, disjointly."""
    topic = new_topic(partitions=12)
    produce(kafka_bootstrap, topic, 200_000, partitions=12)
    high = highs(kafka_bootstrap, topic, 12)
    assert sum(high.values()) == 200_000
    group = groups(kafka_bootstrap, topic, 4)
    nodes = group.spawn_all("--stop-after-idle-s", "2")
    group.wait_for_lines(nodes, 200_000, timeout_s=120)
    group.wait_exit(nodes)

    counts = Counter(record for node in nodes for record in node.records())
    assert {record for record, n in counts.items() if n > 1} == set()
    assert set(counts) == all_records(high)
    assert_disjoint_cover(nodes, 12)
    for node in nodes:
        assert len(read_held(node.out)[1]) == 3, f"node {node.node_id} is not a fair share"
    assert committed(kafka_bootstrap, group.group, topic, 12) == high


@pytest.mark.timeout(120)
def test_sigkilled_worker_restarts_and_loses_nothing(
    kafka_bootstrap: str, new_topic: Callable[..., str], groups: GroupFactory
) -> None:
    """A worker SIGKILLed mid-stream and restarted loses nothing; only its open batch repeats."""
    topic = new_topic(partitions=12)
    produce(kafka_bootstrap, topic, 24_000, partitions=12)
    high = highs(kafka_bootstrap, topic, 12)
    group = groups(kafka_bootstrap, topic, 4)
    others = [group.spawn(node_id, "--stop-after-idle-s", "2") for node_id in (0, 2, 3)]
    victim = group.spawn(1, "--batch-max", "100", "--confirm-delay-s", "0.1")

    # Kill it while a batch is out: its lines are written, its confirm has not happened yet.
    wait_until(
        lambda: count_confirmed(victim.out) >= 5 and last_batch_line(victim.out).startswith("out"),
        timeout_s=60,
        what=f"node 1 confirms 5 batches and takes another:\n{victim.log}",
    )
    victim.process.send_signal(signal.SIGKILL)
    victim.process.wait()
    killed_records = victim.records()
    unconfirmed = open_batches(victim.out)
    # Every confirm committed at once, so only the batch still out can come twice.
    assert all(committed_now for _, _, committed_now in confirms(victim.out))
    assert len(killed_records) < 6_000, "the victim was not killed mid-stream"

    again = group.spawn(1, "--stop-after-idle-s", "2", run=1)
    group.wait_for_lines([*others, again], 24_000 - len(killed_records), timeout_s=60)
    group.wait_exit([*others, again])

    counts = Counter(r for node in [*others, victim, again] for r in node.records())
    assert set(counts) == all_records(high), "messages were lost"
    duplicates = {record for record, n in counts.items() if n > 1}
    assert all(counts[record] == 2 for record in duplicates)
    in_open_batches = {(p, o) for p, start, end in unconfirmed for o in range(start, end)}
    assert duplicates <= in_open_batches, (
        f"duplicates outside the unconfirmed batches {unconfirmed}: "
        f"{sorted(duplicates - in_open_batches)[:10]}"
    )
    assert duplicates <= set(killed_records) & set(again.records())
    assert committed(kafka_bootstrap, group.group, topic, 12) == high


@pytest.mark.timeout(120)
def test_restarted_group_resumes_from_committed_offsets(
    kafka_bootstrap: str, new_topic: Callable[..., str], groups: GroupFactory
) -> None:
    """A whole group restarted reads only what came after its committed offsets."""
    topic = new_topic(partitions=12)
    produce(kafka_bootstrap, topic, 12_000, partitions=12)
    first_high = highs(kafka_bootstrap, topic, 12)
    group = groups(kafka_bootstrap, topic, 4)
    first = group.spawn_all("--stop-after-idle-s", "1.5")
    group.wait_for_lines(first, 12_000, timeout_s=60)
    group.wait_exit(first)
    assert committed(kafka_bootstrap, group.group, topic, 12) == first_high

    produce(kafka_bootstrap, topic, 6_000, partitions=12, first=12_000)
    high = highs(kafka_bootstrap, topic, 12)
    second = group.spawn_all("--stop-after-idle-s", "1.5", run=1)
    group.wait_for_lines(second, 6_000, timeout_s=60)
    group.wait_exit(second)

    resumed = Counter(record for node in second for record in node.records())
    assert set(resumed) == all_records(high, low=first_high)
    assert max(resumed.values()) == 1
    assert committed(kafka_bootstrap, group.group, topic, 12) == high


@pytest.mark.timeout(120)
def test_added_partitions_are_consumed_within_one_reconcile_interval(
    kafka_bootstrap: str, new_topic: Callable[..., str], groups: GroupFactory
) -> None:
    """Partitions added with the admin API are held and drained within a reconcile interval."""
    interval_s, grace_s = 1.0, 2.0  # grace: the registration queries, first fetch, polling
    topic = new_topic(partitions=4)
    produce(kafka_bootstrap, topic, 2_000, partitions=4)
    group = groups(kafka_bootstrap, topic, 2)
    nodes = group.spawn_all("--reconcile-interval-s", str(interval_s))
    group.wait_for_lines(nodes, 2_000, timeout_s=60)

    admin_client = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin_client.create_partitions([NewPartitions(topic, 12)])[topic].result(timeout=30)
    added_at = time.monotonic()
    produce(kafka_bootstrap, topic, 1_200, partitions=12, first=2_000)  # 100 per partition
    new_records = {(p, o) for p in range(4, 12) for o in range(100)}

    def drained() -> bool:
        seen = {record for node in nodes for record in node.records()}
        return new_records <= seen

    wait_until(drained, timeout_s=30, what="messages of the added partitions consumed")
    took = time.monotonic() - added_at
    assert took <= interval_s + grace_s, f"added partitions took {took:.2f} s"
    wait_until(
        lambda: set().union(*(read_held(node.out)[0] for node in nodes)) == set(range(12)),
        timeout_s=5,
        what="the sidecars show all 12 partitions held",
    )
    group.wait_for_lines(nodes, 3_200, timeout_s=30)
    group.stop(nodes)

    high = highs(kafka_bootstrap, topic, 12)
    counts = Counter(record for node in nodes for record in node.records())
    assert set(counts) == all_records(high)
    assert max(counts.values()) == 1
    assert_disjoint_cover(nodes, 12)
    for node in nodes:  # modulo moves nothing: each node kept its 2 and got 4 of the 8 new
        assert len(read_held(node.out)[1]) == 6
    assert committed(kafka_bootstrap, group.group, topic, 12) == high


@pytest.mark.timeout(240)
def test_workers_recover_from_a_broker_restart(tmp_path: Path, groups: GroupFactory) -> None:
    """Workers whose broker stops for 10 s and restarts recover, lose nothing, and never fence."""
    kafka = LocalKafka(data_dir=tmp_path / "kafka").start()
    try:
        bootstrap = kafka.bootstrap_servers
        admin.create_topics(bootstrap, {"outage": 4})
        produce(bootstrap, "outage", 8_000, partitions=4)
        group = groups(bootstrap, "outage", 2)
        # The default lease: the outage is shorter than its fence (30 s less the margin).
        options = ("--batch-max", "100", "--confirm-delay-s", "0.05", "--lease-timeout-s", "30")
        nodes = group.spawn_all(*options)
        # Stop the broker mid-stream, while both workers still have messages to read.
        wait_until(
            lambda: all(count_confirmed(node.out) >= 3 for node in nodes),
            timeout_s=60,
            what="both workers confirm 3 batches",
        )
        kafka.stop()
        before_outage = sum(count_records(node.out) for node in nodes)
        assert before_outage < 8_000, "the workers finished before the broker stopped"
        time.sleep(10)  # the outage the issue asks for
        assert all(node.process.poll() is None for node in nodes), "a worker died in the outage"
        kafka.start()
        assert kafka.bootstrap_servers == bootstrap, "the broker came back on another port"
        produce(bootstrap, "outage", 4_000, partitions=4, first=8_000)
        high = highs(bootstrap, "outage", 4)
        assert sum(high.values()) == 12_000

        def everything_read() -> bool:
            seen = {record for node in nodes for record in node.records()}
            return seen >= all_records(high)

        wait_until(everything_read, timeout_s=90, what="every message read after the restart")
        group.stop(nodes)
        assert committed(bootstrap, group.group, "outage", 4) == high
        # Shorter than the fence: nobody fenced itself (operations.md, Fencing).
        assert not [node for node in nodes if "fenced:" in node.log.read_text()]
    finally:
        kafka.stop()
