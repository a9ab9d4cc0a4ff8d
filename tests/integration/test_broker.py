import gc
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from client_balance import admin
from client_balance._kafka import ensure_topic
from client_balance.broker import LocalKafka, ensure_kafka_jars, find_java
from client_balance.cli import main
from client_balance.errors import (
    BrokerStartError,
    BrokerToolMissingError,
    ConfigError,
    KafkaClientError,
)
from tests.integration.workers import collector_off

pytestmark = pytest.mark.integration


def _produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value, partition=partition)
    assert producer.flush(30) == 0


def _consume_assigned(bootstrap: str, topic: str, count: int, partition: int = 0) -> list[bytes]:
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })  # fmt: skip
    try:
        consumer.assign([KafkaTopicPartition(topic, partition)])
        received: list[bytes] = []
        for _ in range(100):
            for message in consumer.consume(count - len(received), timeout=0.5):
                assert message.error() is None, message.error()
                value = message.value()
                assert value is not None
                received.append(value)
            if len(received) >= count:
                break
        consumer.commit(offsets=[KafkaTopicPartition(topic, partition, count)], asynchronous=False)
        committed = consumer.committed([KafkaTopicPartition(topic, partition)], timeout=10)
        assert committed[0].offset == count
        return received
    finally:
        consumer.close()


def _java_brokers() -> list[str]:
    found = subprocess.run(
        ["pgrep", "-f", "kafka.Kafka"], capture_output=True, text=True, check=False
    )
    return found.stdout.split()


def test_session_broker_exchanges_messages(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """A producer and an assign-only consumer exchange messages and commit on the real broker."""
    topic = new_topic(partitions=3)
    values = [f"m{i}".encode() for i in range(500)]
    _produce(kafka_bootstrap, topic, values, partition=2)
    assert _consume_assigned(kafka_bootstrap, topic, len(values), partition=2) == values


def test_create_topics_refuses_bad_counts_and_duplicates(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """Topic creation names a bad partition count, and an existing topic unless exist_ok."""
    with pytest.raises(ConfigError, match="partition count 0"):
        admin.create_topics(kafka_bootstrap, {"zero": 0})
    topic = new_topic(partitions=2)
    admin.create_topics(kafka_bootstrap, {topic: 2}, exist_ok=True)
    with pytest.raises(Exception, match="TOPIC_ALREADY_EXISTS"):
        admin.create_topics(kafka_bootstrap, {topic: 2})


def test_create_and_ensure_topic_leave_no_admin_client_behind(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """An admin client made for one call is gone when it returns, even when Kafka said no.

    A future's error raised as it was stored kept every frame it passed through, and those kept
    the future: a cycle that held the client, its threads and its connections until the next
    full collection (on a stopped broker, its reconnect attempts filled the log).
    """
    topic = new_topic(partitions=2)

    def admin_clients() -> set[int]:
        return {id(o) for o in gc.get_objects() if isinstance(o, AdminClient)}

    gc.collect()
    with collector_off():
        before = admin_clients()
        admin.create_topics(kafka_bootstrap, {topic: 2}, exist_ok=True)
        with pytest.raises(KafkaClientError, match="TOPIC_ALREADY_EXISTS"):
            admin.create_topics(kafka_bootstrap, {topic: 2})
        ensure_topic(kafka_bootstrap, topic, config={}, kafka={}, timeout_s=10.0)
        assert admin_clients() - before == set()


def test_local_kafka_lifecycle_leaves_nothing_behind() -> None:
    """A second LocalKafka starts, serves, and on stop leaves no JVM and no temp dir."""
    before = set(_java_brokers())
    with LocalKafka() as kafka:
        assert kafka.startup_s is not None
        assert kafka.bootstrap_servers.startswith("127.0.0.1:")
        data_dir = kafka.data_dir
        admin.create_topics(kafka.bootstrap_servers, {"life": 1})
        _produce(kafka.bootstrap_servers, "life", [b"x"])
        assert _consume_assigned(kafka.bootstrap_servers, "life", 1) == [b"x"]
        pid = kafka.pid
    assert not kafka.is_running()
    assert not data_dir.exists()
    assert str(pid) not in _java_brokers()
    assert set(_java_brokers()) <= before


def test_kept_data_dir_survives_a_restart(tmp_path: Path) -> None:
    """A broker restarted on its data dir keeps topics, messages, committed offsets and port."""
    data_dir = tmp_path / "kafka"
    with LocalKafka(data_dir=data_dir) as kafka:
        first_address = kafka.bootstrap_servers
        admin.create_topics(first_address, {"kept": 1})
        _produce(first_address, "kept", [b"a", b"b"])
    assert data_dir.exists()
    with LocalKafka(data_dir=data_dir) as kafka:
        assert kafka.bootstrap_servers == first_address
        _produce(kafka.bootstrap_servers, "kept", [b"c"])
        assert _consume_assigned(kafka.bootstrap_servers, "kept", 3) == [b"a", b"b", b"c"]


def test_invalid_broker_config_quotes_the_tool_output() -> None:
    """A config Kafka rejects raises BrokerStartError quoting Kafka's own complaint."""
    broken = LocalKafka(config={"num.io.threads": "not-a-number"})
    with pytest.raises(BrokerStartError) as caught:
        broken.start()
    assert "not-a-number" in caught.value.log_tail
    assert "did not start" in str(caught.value)
    assert "Last lines of" in str(caught.value)
    assert not broken.is_running()
    shutil.rmtree(broken.data_dir)  # kept by LocalKafka so a failed start can be read


def test_taken_port_quotes_the_broker_log() -> None:
    """A broker that dies on start (its port is taken) raises with the last lines of its log."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        broken = LocalKafka(port=taken)
        with pytest.raises(BrokerStartError) as caught:
            broken.start()
    assert "the broker exited with code" in str(caught.value)
    assert "Address already in use" in caught.value.log_tail
    assert caught.value.log_path is not None
    assert not broken.is_running()
    shutil.rmtree(Path(caught.value.log_path).parent)  # kept so a failed start can be read


def test_broker_dies_with_a_killed_parent(tmp_path: Path) -> None:
    """A process that started a LocalKafka and is SIGKILLed leaves no broker behind."""
    script = (
        "import sys; from client_balance.broker import LocalKafka\n"
        "kafka = LocalKafka().start()\n"
        "print(kafka.pid, kafka.bootstrap_servers, kafka.data_dir, flush=True)\n"
        "sys.stdin.read()\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    pid, address, data_dir = parent.stdout.readline().split()
    assert admin.cluster_answers(address, timeout_s=5)
    parent.kill()
    parent.wait()
    for _ in range(300):
        if pid not in _java_brokers():
            break
        time.sleep(0.1)
    assert pid not in _java_brokers()
    shutil.rmtree(data_dir)  # the killed parent could not clean up after itself


def test_missing_java_and_mvn_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without java or mvn on PATH the error names the tool and how to get it."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(BrokerToolMissingError, match="'java' is not on PATH") as java_error:
        find_java()
    assert java_error.value.tool == "java"
    with pytest.raises(BrokerToolMissingError, match="'mvn'") as mvn_error:
        ensure_kafka_jars(home=tmp_path / "empty-home")
    assert mvn_error.value.tool == "mvn"


def test_cached_jars_are_reused_without_maven(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Once fetched, the jars are found with no mvn on PATH at all."""
    libs = ensure_kafka_jars()
    monkeypatch.setenv("PATH", str(tmp_path))
    assert ensure_kafka_jars() == libs


def test_cli_detached_broker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`broker start` detaches and prints the address; `status` and `stop` find it by state file."""
    state = tmp_path / "broker.json"
    assert main(["broker", "start", "--state-file", str(state)]) == 0
    address = capsys.readouterr().out.strip()
    try:
        assert address.startswith("127.0.0.1:")
        assert main(["broker", "start", "--state-file", str(state)]) == 1
        assert "already running" in capsys.readouterr().err
        # The broker outlives the process that started it: ask from a fresh interpreter.
        status = subprocess.run(
            [sys.executable, "-m", "client_balance", "broker", "status", "--bootstrap",
             "--state-file", str(state)],
            capture_output=True, text=True, check=False, env=os.environ.copy(),
        )  # fmt: skip
        assert status.returncode == 0, status.stderr
        assert status.stdout.strip() == address
    finally:
        assert main(["broker", "stop", "--state-file", str(state)]) == 0
    assert main(["broker", "status", "--state-file", str(state)]) == 1
    assert "no broker is running" in capsys.readouterr().err
    assert not admin.cluster_answers(address, timeout_s=0.5)
