"""A 3-node LocalKafka: replication, a SIGKILLed leader, a restarted node, a clean stop.

The tests share one cluster (module scope) and run in file order: the leader killed by the
second test is brought back by the third (which kills a node itself when run alone), and the
fourth stops the cluster before the command line starts a cluster of its own.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported without __all__
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from client_balance import (
    ClientBalanceConsumer,
    ClientBalanceError,
    ClientBalanceSettings,
    ConfigError,
    NoMessageError,
    admin,
)
from client_balance.broker import LocalKafka
from client_balance.cli import main
from tests.integration.conftest import GroupFactory
from tests.integration.proxy import TcpProxy
from tests.integration.workers import (
    Group,
    Node,
    all_records,
    committed,
    highs,
    produce,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

NODES = 3
PARTITIONS = 3
TOPIC = "replicated"
STATUS_TOPIC = "__client_balance_status"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalKafka]:
    """Three combined broker+controller nodes, started once for the module.

    Each has a listener a test's proxy can cut (``proxied``); the others are never cut.
    """
    kafka = LocalKafka(brokers=NODES, startup_timeout_s=120, proxied=True).start()
    try:
        admin.create_topics(kafka.bootstrap_servers, {TOPIC: PARTITIONS})
        yield kafka
    finally:
        kafka.stop()


def _metadata_brokers(bootstrap: str) -> set[int]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return set(metadata.brokers)


def _produce(bootstrap: str, values: list[str]) -> None:
    """Write ``values`` round robin over the partitions with acks=all; every one delivered."""
    failures: list[object] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failures.append(error)

    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
        "on_delivery": delivered, "log_level": 0,
    })  # fmt: skip
    for number, value in enumerate(values):
        producer.produce(TOPIC, value.encode(), partition=number % PARTITIONS)
    assert producer.flush(60) == 0
    assert failures == []


def _read_all(bootstrap: str, count: int) -> list[str]:
    """Every message of the topic from the start, partition by partition as they arrive."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "cluster-reader",
        "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 0,
    })  # fmt: skip
    received: list[str] = []
    try:
        consumer.assign([KafkaTopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])

        def read_some() -> bool:
            for message in consumer.consume(count - len(received), timeout=0.5):
                assert message.error() is None, message.error()
                value = message.value()
                assert value is not None
                received.append(value.decode())
            return len(received) >= count

        wait_until(read_some, timeout_s=60, what=f"{count} messages read back")
    finally:
        consumer.close()
    return received


def _gone(pid: int) -> bool:
    """No such process, or only a zombie (a detached JVM is still this process's child)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except OSError:
        return True


def test_topics_are_replicated_to_all_three_nodes(cluster: LocalKafka) -> None:
    """A topic created with the defaults has 3 replicas, all in sync, on nodes 1..3."""
    bootstrap = cluster.bootstrap_servers
    assert len(bootstrap.split(",")) == NODES
    assert sorted(cluster.broker_pids()) == [1, 2, 3]
    assert _metadata_brokers(bootstrap) == {1, 2, 3}
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=10)
    partitions = metadata.topics[TOPIC].partitions
    assert sorted(partitions) == list(range(PARTITIONS))
    for partition in partitions.values():
        assert sorted(partition.replicas) == [1, 2, 3]
        assert sorted(partition.isrs) == [1, 2, 3]
        assert cluster.leader_of(TOPIC, partition.id) == partition.leader


def test_the_status_topic_is_created_with_three_replicas(cluster: LocalKafka) -> None:
    """A member's start creates the status topic with 3 replicas and min.insync.replicas=2."""
    settings = ClientBalanceSettings(
        bootstrap_servers=cluster.bootstrap_servers, group_id="rf-check", status_topic="status-rf"
    )
    with ClientBalanceConsumer(settings) as consumer:
        consumer.start([TOPIC], source_count=1, node_id=0)
    client = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    topic = client.list_topics("status-rf", timeout=10).topics["status-rf"]
    assert [len(p.replicas) for p in topic.partitions.values()] == [3]
    resource = ConfigResource(ResourceType.TOPIC, "status-rf")
    entries = client.describe_configs([resource])[resource].result(timeout=10)
    assert entries["min.insync.replicas"].value == "2"


def test_a_single_replica_status_topic_is_refused_unless_accepted(cluster: LocalKafka) -> None:
    """One replica on three brokers would fence every group with one broker: refused by name."""
    config = {"cleanup.policy": "compact", "message.timestamp.type": "LogAppendTime"}
    client = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new = NewTopic("status-rf1", num_partitions=1, replication_factor=1, config=config)
    client.create_topics([new])["status-rf1"].result(timeout=30)
    values = {"bootstrap_servers": cluster.bootstrap_servers, "status_topic": "status-rf1"}
    refused = ClientBalanceConsumer(ClientBalanceSettings(group_id="rf1-a", **values))
    with pytest.raises(
        ConfigError, match="'status-rf1' has replication factor 1 on a cluster of 3"
    ):
        refused.start([TOPIC], source_count=1, node_id=0)
    accepted = ClientBalanceSettings(
        group_id="rf1-b", status_topic_single_replica_ok=True, **values
    )
    with ClientBalanceConsumer(accepted) as consumer:
        consumer.start([TOPIC], source_count=1, node_id=0)
        assert not consumer.is_shutdown()


def test_fetching_goes_on_while_a_commit_waits_for_a_coordinator_cut_off(
    cluster: LocalKafka,
) -> None:
    """The link to the group's coordinator alone drops everything: the rest is read on.

    confluent-kafka makes one client's calls one at a time, and a commit whose answer the link
    lost kept the fetching client waiting with it: 2 batches in a 75 s cut (chaos run), and
    nothing here for the whole minute. Commits go through a client of their own now; they
    resume when the link is back.
    """
    direct, name = cluster.bootstrap_servers, f"cut-{uuid.uuid4().hex[:8]}"
    nodes = sorted(cluster.proxied_listeners)
    topic = _one_partition_per_node(direct, name, nodes)
    produce(direct, topic, 20 * len(nodes), partitions=len(nodes))
    proxies = {n: TcpProxy(adv, lis) for n, (lis, adv) in cluster.proxied_listeners.items()}
    via = ",".join(f"127.0.0.1:{adv}" for _, adv in cluster.proxied_listeners.values())
    settings = ClientBalanceSettings(
        bootstrap_servers=via,
        group_id=name, start_position="earliest", commit="sync", batch_max_messages=20,
        request_timeout_s=2.0, lease_timeout_s=90.0, report_interval_s=1.0,
    )  # fmt: skip
    try:
        with ClientBalanceConsumer(settings) as consumer:
            consumer.start([topic], mode="elastic")
            _confirm_batches(consumer, bool, 30.0)  # one batch confirmed: one commit made
            coordinator = _coordinator_of(direct, name)
            proxies[coordinator].hold()  # its answers lost: librdkafka waits for them
            try:
                # Written after the link went: the member must fetch them meanwhile.
                produce(direct, topic, 600 * len(nodes), partitions=len(nodes), first=1000)
                high = highs(direct, topic, len(nodes))
                led_elsewhere = [p for p, node in enumerate(nodes) if node != coordinator]
                positions = _confirm_batches(
                    consumer, lambda now: all(now.get(p) == high[p] for p in led_elsewhere), 60.0
                )
                assert all(positions.get(p) == high[p] for p in led_elsewhere), (
                    f"only {positions} of {high} read while the link to node {coordinator}, "
                    "the coordinator, dropped everything"
                )
            finally:
                proxies[coordinator].restore()
            wait_until(
                lambda: all(committed(direct, name, topic, len(nodes))[p] == high[p]
                            for p in led_elsewhere),
                60, "the positions read during the cut committed once the link was back", 0.5,
            )  # fmt: skip
    finally:
        for proxy in proxies.values():
            proxy.close()


def _one_partition_per_node(bootstrap: str, topic: str, nodes: list[int]) -> str:
    """A topic whose partition n is led by ``nodes[n]`` (one replica each)."""
    client = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures need it alive
    made = client.create_topics(
        [NewTopic(topic, len(nodes), replica_assignment=[[node] for node in nodes])]
    )
    made[topic].result(30)
    return topic


def _coordinator_of(bootstrap: str, group: str) -> int:
    """The node id of ``group``'s coordinator."""
    client = AdminClient({"bootstrap.servers": bootstrap})
    described = client.describe_consumer_groups([group])[group].result(30)
    return int(described.coordinator.id)


def _confirm_batches(
    consumer: ClientBalanceConsumer, until: Callable[[dict[int, int]], bool], within_s: float
) -> dict[int, int]:
    """Take and confirm batches until ``until(positions)``, ``within_s`` at most; positions."""
    positions: dict[int, int] = {}
    deadline = time.monotonic() + within_s
    while not until(positions) and time.monotonic() < deadline:
        try:
            batch = consumer.get_message(timeout_s=0.5)
        except NoMessageError:
            continue
        positions[batch.partition] = consumer.confirm(batch.confirm_context).current
    return positions


def test_a_killed_leader_is_replaced_and_nothing_is_lost(cluster: LocalKafka) -> None:
    """SIGKILL of partition 0's leader elects another; acks=all writes before and after all read."""
    bootstrap = cluster.bootstrap_servers
    before = [f"before-{i}" for i in range(300)]
    _produce(bootstrap, before)
    leader = cluster.leader_of(TOPIC, 0)
    assert leader in {1, 2, 3}
    pid = cluster.broker_pids()[leader]
    cluster.kill_broker(leader)
    assert _gone(pid)
    assert leader not in cluster.broker_pids()
    wait_until(
        lambda: cluster.leader_of(TOPIC, 0) not in {leader, -1},
        timeout_s=60,
        what=f"a new leader of partition 0 after node {leader} was killed",
        poll_s=0.2,
    )
    after = [f"after-{i}" for i in range(300)]
    _produce(bootstrap, after)
    assert sorted(_read_all(bootstrap, len(before) + len(after))) == sorted(before + after)


def test_restart_brings_a_killed_node_back(cluster: LocalKafka) -> None:
    """restart_broker starts a killed node on its ports and the metadata lists it again."""
    down = [node for node in range(1, NODES + 1) if node not in cluster.broker_pids()]
    if not down:  # run on its own: make a node to bring back
        cluster.kill_broker(NODES)
        down = [NODES]
    (node,) = down
    bootstrap = cluster.bootstrap_servers
    cluster.restart_broker(node)
    assert sorted(cluster.broker_pids()) == [1, 2, 3]
    assert cluster.bootstrap_servers == bootstrap
    assert node in _metadata_brokers(bootstrap)
    assert admin.cluster_answers(bootstrap.split(",")[node - 1], timeout_s=5)


@pytest.mark.timeout(300)
def test_workers_lose_nothing_when_data_and_status_leaders_are_killed(
    cluster: LocalKafka, groups: GroupFactory
) -> None:
    """Under load, SIGKILL a data partition's leader, then the status partition's: nothing lost.

    Three node-mode worker processes consume 90,000 messages; each killed node is restarted
    once another leader took over. Every message is delivered, every worker exits cleanly and
    the group's committed offsets end at the high watermarks.
    """
    bootstrap, topic, partitions, total = cluster.bootstrap_servers, "failover", 6, 90_000
    admin.create_topics(bootstrap, {topic: partitions})
    produce(bootstrap, topic, total, partitions)
    high = highs(bootstrap, topic, partitions)
    group = groups(bootstrap, topic, 3)
    # A lease well above a leader election (about 9 s here): nobody fences, nobody stops.
    options = ("--confirm-delay-s", "0.02", "--batch-max", "20", "--lease-timeout-s", "30")
    nodes = group.spawn_all(*options)
    group.wait_for_lines(nodes, 3_000, timeout_s=60)
    settings = ClientBalanceSettings(bootstrap_servers=bootstrap, group_id=group.group)
    with FenceWatch(settings) as fences:
        _kill_leaders_under_load(cluster, group, nodes, topic)
    assert fences.longest_s() < 30.0  # nobody fenced (or gone from the view) for a lease
    group.wait_for_lines(nodes, total, timeout_s=180)
    wait_until(
        lambda: {r for node in nodes for r in node.records()} >= all_records(high),
        timeout_s=120,
        what="every message delivered",
    )
    group.stop(nodes)
    assert committed(bootstrap, group.group, topic, partitions) == high


def _kill_leaders_under_load(
    cluster: LocalKafka, group: Group, nodes: list[Node], topic: str
) -> None:
    for victim_of in (topic, STATUS_TOPIC):
        leader = cluster.leader_of(victim_of, 0)
        cluster.kill_broker(leader)
        wait_until(
            lambda: cluster.leader_of(victim_of, 0) not in {leader, -1},  # noqa: B023 - now
            timeout_s=60,
            what=f"a new leader of {victim_of}[0] after node {leader} was killed",
            poll_s=0.2,
        )
        consumed = sum(len(node.records()) for node in nodes)
        group.wait_for_lines(nodes, consumed + 1_000, timeout_s=60)  # still consuming
        cluster.restart_broker(leader)


class FenceWatch:
    """Samples the group view every second; the longest time any member was fenced or absent."""

    def __init__(self, settings: ClientBalanceSettings) -> None:
        self._settings = settings
        self._stop = threading.Event()
        self._since: dict[str, float] = {}
        self._longest_s = 0.0
        self._known: set[str] = set()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> FenceWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def longest_s(self) -> float:
        """The longest stretch seen, counting one still going on at the end."""
        now = time.monotonic()
        return max([self._longest_s, *(now - began for began in self._since.values())])

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                view = admin.GroupView.load(self._settings, timeout_s=5.0)
            except ClientBalanceError:
                continue  # the status partition's leader is away: no sample
            now = time.monotonic()
            well = {m.consumer_id for m in view.members if m.live and not m.fenced}
            self._known |= {m.consumer_id for m in view.members}
            for member in self._known:
                if member in well:
                    began = self._since.pop(member, None)
                    if began is not None:
                        self._longest_s = max(self._longest_s, now - began)
                else:
                    self._since.setdefault(member, now)


def test_cluster_stops_cleanly_and_leaves_no_jvm(cluster: LocalKafka) -> None:
    """stop() ends every node's JVM and removes the temporary data dir."""
    pids = cluster.broker_pids()
    assert len(pids) == NODES
    data_dir = cluster.data_dir
    bootstrap = cluster.bootstrap_servers
    cluster.stop()
    assert not cluster.is_running()
    assert cluster.broker_pids() == {}
    assert all(_gone(pid) for pid in pids.values())
    assert not data_dir.exists()
    assert not admin.cluster_answers(bootstrap, timeout_s=0.5)


def test_cli_detached_cluster_is_stopped_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`broker start --brokers 3` records all three pids; `broker stop` ends every one of them."""
    state_file = tmp_path / "broker.json"
    assert main(["broker", "start", "--brokers", "3", "--state-file", str(state_file)]) == 0
    address = capsys.readouterr().out.strip()
    state = json.loads(state_file.read_text())
    try:
        assert len(address.split(",")) == NODES
        assert len(state["pids"]) == NODES
        assert state["pid"] == state["pids"][0]
        assert main(["broker", "status", "--bootstrap", "--state-file", str(state_file)]) == 0
        assert capsys.readouterr().out.strip() == address
    finally:
        assert main(["broker", "stop", "--state-file", str(state_file)]) == 0
    assert all(_gone(pid) for pid in state["pids"])
    assert not Path(state["data_dir"]).exists()
    assert main(["broker", "status", "--state-file", str(state_file)]) == 1
