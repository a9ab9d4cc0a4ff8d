"""`client-balance lag` and `client-balance tail` against the real broker."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Producer

from client_balance import ClientBalanceConsumer, ClientBalanceSettings, admin
from client_balance.cli import main
from tests.integration.workers import committed, highs, produce, wait_until

pytestmark = pytest.mark.integration

ROW_FIELDS = 5  # partition, offset, timestamp, key, value


def run(capsys: pytest.CaptureFixture[str], bootstrap: str, *argv: str) -> str:
    """Run the command against ``bootstrap``; its stdout, after checking it exited 0."""
    code = main([*argv, "--bootstrap-servers", bootstrap])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


# ------------------------------------------------------------------------------------- lag
def _consume_all(consumer: ClientBalanceConsumer, total: int) -> None:
    done = 0
    for batch in consumer.batches(timeout_s=1.0):
        done += len(batch.messages)
        batch.confirm()
        if done >= total:
            return


@pytest.mark.timeout(120)
def test_lag_shows_holder_position_committed_offset_high_watermark_and_lag(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Per partition: the holder, its position, Kafka's committed offset and high; totals."""
    topic = new_topic(partitions=3)
    produce(kafka_bootstrap, topic, 30, partitions=3)
    consumer = make_member(commit="sync")
    consumer.start([topic], source_count=1, node_id=0)
    _consume_all(consumer, 30)
    produce(kafka_bootstrap, topic, 6, partitions=3, first=30)  # 2 a partition, unconfirmed
    group = consumer.settings.group_id
    settings = ClientBalanceSettings(bootstrap_servers=kafka_bootstrap, group_id=group)

    def reported() -> bool:
        view = admin.GroupView.load(settings)
        return [(p.position, p.high) for p in view.partitions] == [(10, 12)] * 3

    wait_until(reported, 30, "the member reports position 10 of 12 in each partition", 0.5)

    shown = json.loads(run(capsys, kafka_bootstrap, "lag", "--group", group, "--json"))
    kafka_high = highs(kafka_bootstrap, topic, 3)
    kafka_committed = committed(kafka_bootstrap, group, topic, 3)
    assert [(row["partition"], row["high"], row["committed"]) for row in shown["partitions"]] == [
        (p, kafka_high[p], kafka_committed[p]) for p in range(3)
    ]
    assert {row["holder"] for row in shown["partitions"]} == {consumer.consumer_id}
    assert [row["lag"] for row in shown["partitions"]] == [2, 2, 2]
    assert shown["total_lag"] == 6

    table = run(capsys, kafka_bootstrap, "lag", "--group", group).splitlines()
    assert table[0] == f"group {group}: 3 partition(s), 3 held by 1 member(s), total lag 6"
    rows = [line.split() for line in table if line.startswith(topic)]
    assert rows == [[topic, str(p), consumer.consumer_id, "10", "10", "12", "2"] for p in range(3)]
    assert table[-1].split() == ["TOTAL", "1", "member(s)", "6"]

    # Stopped, the group reports no topic; --topic still shows Kafka's offsets.
    consumer.shutdown()
    shown = json.loads(
        run(capsys, kafka_bootstrap, "lag", "--group", group, "--topic", topic, "--json")
    )
    assert [(row["holder"], row["committed"], row["lag"]) for row in shown["partitions"]] == [
        (None, 10, 2)
    ] * 3


def test_lag_names_a_topic_that_does_not_exist(
    kafka_bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --topic the cluster lacks fails with exit code 1 and its name."""
    code = main(["lag", "--group", "nobody", "--topic", "no-such-topic-x",
                 "--bootstrap-servers", kafka_bootstrap])  # fmt: skip
    assert code == 1
    assert "'no-such-topic-x' does not exist" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ tail
@pytest.fixture
def keyed_topic(kafka_bootstrap: str, new_topic: Callable[..., str]) -> str:
    """Two partitions: 0 holds offsets 0-5 (the last one not JSON), 1 holds 0-4."""
    topic = new_topic(partitions=2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for number in range(10):
        value = json.dumps({"n": number}).encode()
        producer.produce(topic, value, key=f"k{number}".encode(), partition=number % 2)
    producer.produce(topic, b"\xff\x00raw", key=None, partition=0)
    assert producer.flush(30) == 0
    return topic


def rows(output: str) -> list[list[str]]:
    """The table's rows below its header, each split into its five cells."""
    lines = output.splitlines()
    assert lines[0].split() == ["PARTITION", "OFFSET", "TIMESTAMP", "KEY", "VALUE"]
    return [line.split(None, ROW_FIELDS - 1) for line in lines[1:]]


def positions(output: str) -> list[tuple[int, int]]:
    """(partition, offset) of each row."""
    return [(int(row[0]), int(row[1])) for row in rows(output)]


@pytest.mark.timeout(120)
def test_tail_reads_from_each_start_form_without_committing(
    kafka_bootstrap: str, keyed_topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """earliest, an offset, -N and the default share --count between partitions, in order."""
    topic = keyed_topic
    earliest = run(capsys, kafka_bootstrap, "tail", "--topic", topic, "--from", "earliest",
                   "--count", "4")  # fmt: skip
    assert positions(earliest) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert rows(earliest)[0][3:] == ["k0", '{"n": 0}']
    assert rows(earliest)[0][2].endswith("Z")

    last = run(capsys, kafka_bootstrap, "tail", "--topic", topic, "--from=-2")
    assert positions(last) == [(0, 4), (0, 5), (1, 3), (1, 4)]
    assert rows(last)[1][3:] == ["(null)", r"\xff\x00raw"]  # not UTF-8: escaped bytes

    offset = run(capsys, kafka_bootstrap, "tail", "--topic", topic, "--from", "3",
                 "--partition", "1")  # fmt: skip
    assert positions(offset) == [(1, 3), (1, 4)]

    default = run(capsys, kafka_bootstrap, "tail", "--topic", topic, "--count", "3")
    assert positions(default) == [(0, 4), (0, 5), (1, 4)]  # the newest, shared out

    assert committed(kafka_bootstrap, "__client_balance_cli", topic, 2) == {0: -1001, 1: -1001}


def test_tail_shows_json_and_escapes_what_does_not_parse(
    kafka_bootstrap: str, keyed_topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--deserializer json re-encodes values compactly; a non-JSON value shows escaped."""
    code = main(["tail", "--topic", keyed_topic, "--from", "4", "--partition", "0",
                 "--deserializer", "json", "--bootstrap-servers", kafka_bootstrap])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert [row[4] for row in rows(captured.out)] == ['{"n":8}', r"\xff\x00raw"]
    assert "1 key(s) or value(s) did not decode as asked" in captured.err

    as_bytes = run(capsys, kafka_bootstrap, "tail", "--topic", keyed_topic, "--from", "0",
                   "--partition", "1", "--count", "1", "--deserializer", "bytes")  # fmt: skip
    assert rows(as_bytes)[0][3:] == ["k1", '{"n": 1}']


@pytest.fixture
def trickle(kafka_bootstrap: str, keyed_topic: str) -> Iterator[None]:
    """A message to partition 1 every 0.2 s until the test ends."""
    stop = threading.Event()

    def write() -> None:
        producer = Producer({"bootstrap.servers": kafka_bootstrap})
        number = 100
        while not stop.wait(0.2):
            producer.produce(keyed_topic, b"new", key=str(number).encode(), partition=1)
            producer.flush(10)
            number += 1

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    yield
    stop.set()
    writer.join(15)


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("trickle")
def test_tail_from_latest_waits_for_new_messages(
    kafka_bootstrap: str, keyed_topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--from latest shows only messages written after it started, --count of them."""
    before = highs(kafka_bootstrap, keyed_topic, 2)[1]
    output = run(capsys, kafka_bootstrap, "tail", "--topic", keyed_topic, "--from", "latest",
                 "--count", "2", "--partition", "1")  # fmt: skip
    lines = [line.split() for line in output.splitlines()]
    assert len(lines) == 2
    assert all(line[0] == "1" and int(line[1]) >= before and line[4] == "new" for line in lines)
    assert int(lines[1][1]) == int(lines[0][1]) + 1
