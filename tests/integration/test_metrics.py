"""Metrics against the real broker: the consumer's endpoint and the group exporter, scraped."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import urllib.request
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from client_balance import ClientBalanceConsumer, NoMessageError
from client_balance.admin import create_topics
from client_balance.broker._process import free_ports
from tests.integration.test_consumer import committed_offset
from tests.integration.workers import highs, produce, wait_until

REPO = Path(__file__).resolve().parents[2]
CTRL_C_ANSWERED = (
    "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('client_balance', run_name='__main__', alter_sys=True)"
)
"""``python -m client_balance`` with Ctrl-C answered as at a terminal: a suite started as a
background job (``make test &``) hands its children SIGINT ignored, and the exporter then never
saw the test's Ctrl-C."""
PARTITIONS = 3
Samples = dict[str, list[tuple[dict[str, str], float]]]


def scrape(url: str) -> Samples:
    """Every sample the endpoint serves, by sample name (``..._total`` included)."""
    with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 - our own http URL
        text = answer.read().decode()
    samples: Samples = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name].append((sample.labels, sample.value))
    return samples


def per_partition(samples: Samples, name: str, **labels: str) -> dict[int, float]:
    """A per-partition metric's values by partition, among the samples with ``labels``."""
    return {
        int(found["partition"]): value
        for found, value in samples.get(name, [])
        if all(found.get(k) == v for k, v in labels.items())
    }


def brokers_lag(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """High watermark minus the group's committed offset, each asked of the broker."""
    return {
        partition: high - max(committed_offset(bootstrap, group, topic, partition), 0)
        for partition, high in highs(bootstrap, topic, PARTITIONS).items()
    }


def consume_some(consumer: ClientBalanceConsumer, wanted: int) -> dict[str, int]:
    """Consume about ``wanted`` messages, rolling back the first batch once; what happened."""
    seen = dict.fromkeys(("messages", "batches", "confirms", "rollbacks", "redeliveries"), 0)
    rolled_back: tuple[str, int] | None = None
    while seen["messages"] < wanted:
        try:
            batch = consumer.get_message(timeout_s=5.0)
        except NoMessageError:
            continue
        seen["messages"] += len(batch.messages)
        seen["batches"] += 1
        if rolled_back == (batch.key, batch.start_offset):
            seen["redeliveries"] += 1
            rolled_back = None
        if seen["rollbacks"] == 0:
            consumer.confirm(batch.confirm_context, consumed=False)
            seen["rollbacks"] += 1
            seen["rolled_back_messages"] = len(batch.messages)
            rolled_back = (batch.key, batch.start_offset)
        else:
            consumer.confirm(batch.confirm_context)
            seen["confirms"] += 1
    return seen


def test_the_endpoint_counts_batches_and_serves_the_brokers_lag(
    make_consumer: Callable[..., ClientBalanceConsumer],
    new_topic: Callable[..., str],
    kafka_bootstrap: str,
) -> None:
    """Scraped counters match what the application saw; lag matches high minus committed."""
    topic = new_topic(partitions=PARTITIONS)
    produce(kafka_bootstrap, topic, 600, PARTITIONS)
    (port,) = free_ports(1)
    consumer = make_consumer(
        metrics_port=port, statistics_interval_ms=100, batch_max_messages=40
    )  # commit="sync": each confirm is committed before it returns
    consumer.start([topic], source_count=1, node_id=0)
    url = f"http://127.0.0.1:{port}/metrics"
    seen = consume_some(consumer, 300)
    mine = {"group": consumer.settings.group_id, "consumer": consumer.consumer_id}

    samples = scrape(url)
    for name, expected in (
        ("client_balance_messages_delivered_total", seen["messages"]),
        ("client_balance_batches_delivered_total", seen["batches"]),
        ("client_balance_batches_confirmed_total", seen["confirms"]),
        ("client_balance_batches_rolled_back_total", seen["rollbacks"]),
        ("client_balance_batches_redelivered_total", seen["redeliveries"]),
    ):
        assert sum(per_partition(samples, name, topic=topic, **mine).values()) == expected, name
    assert samples["client_balance_held_partitions"] == [(mine, PARTITIONS)]
    assert samples["client_balance_claims_won_total"] == [(mine, PARTITIONS)]
    assert samples["client_balance_claims_lost_total"] == [(mine, 0)]
    assert samples["client_balance_fencing_events_total"] == [(mine, 0)]
    assert samples["client_balance_reconcile_rounds_total"][0][1] >= 1
    assert samples["client_balance_reconcile_round_duration_seconds_count"][0][1] >= 1
    broker = brokers_lag(kafka_bootstrap, consumer.settings.group_id, topic)
    consumed = seen["messages"] - seen["rolled_back_messages"]  # that batch was not consumed
    assert sum(broker.values()) == 600 - consumed
    assert per_partition(samples, "client_balance_lag_messages", topic=topic) == broker

    # The fetch's high watermark comes with librdkafka's next statistics; the lag is unknown
    # (no sample) for a partition until this member's first commit of it.
    def fetch_lag_is_the_brokers() -> bool:
        fetched = scrape(url)
        lag = per_partition(fetched, "client_balance_fetch_consumer_lag_messages", topic=topic)
        return bool(lag) and lag == {p: broker[p] for p in lag}

    wait_until(fetch_lag_is_the_brokers, 30.0, "the fetch lag to match the broker's")

    # The fetch lag needs no commit of the fetching client's any more, so a statistics document
    # from before the last fetches can already give it: wait for one that counts them.
    def fetched_what_was_consumed() -> bool:
        counts = per_partition(scrape(url), "client_balance_fetch_messages_total", topic=topic)
        return sum(counts.values()) >= consumed

    wait_until(fetched_what_was_consumed, 30.0, "statistics counting the messages consumed")
    samples = scrape(url)
    fetched = per_partition(samples, "client_balance_fetch_messages_total", topic=topic)
    assert set(fetched) == set(range(PARTITIONS))
    assert sum(fetched.values()) >= consumed
    assert sum(per_partition(samples, "client_balance_fetch_bytes_total", topic=topic).values())
    trips = samples["client_balance_broker_round_trip_avg_seconds"]
    assert trips
    assert all(value > 0 for _, value in trips)

    consumer.shutdown()
    assert _refused(url), "the endpoint still answers after shutdown()"


def _refused(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=5)  # noqa: S310 - our own http URL
    except OSError:
        return True
    return False


def test_the_exporter_serves_a_groups_lag_until_interrupted(
    make_consumer: Callable[..., ClientBalanceConsumer],
    new_topic: Callable[..., str],
    kafka_bootstrap: str,
) -> None:
    """``client-balance exporter`` serves the group's lag as the broker has it; Ctrl-C stops it."""
    topic = new_topic(partitions=PARTITIONS)
    produce(kafka_bootstrap, topic, 300, PARTITIONS)
    consumer = make_consumer(batch_max_messages=25)
    consumer.start([topic], source_count=1, node_id=0)
    consumed = 0
    while consumed < 120:
        try:
            batch = consumer.get_message(timeout_s=5.0)
        except NoMessageError:
            continue
        consumer.confirm(batch.confirm_context)
        consumed += len(batch.messages)
    group = consumer.settings.group_id
    broker = brokers_lag(kafka_bootstrap, group, topic)
    assert sum(broker.values()) == 300 - consumed

    exporter = subprocess.Popen(
        [sys.executable, "-c", CTRL_C_ANSWERED, "exporter", "--group", group,
         "--bootstrap-servers", kafka_bootstrap, "--port", "0"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert exporter.stderr is not None
        announced = exporter.stderr.readline()
        found = re.search(r"http://[\d.]+:\d+/metrics", announced)
        assert found, announced
        samples = scrape(found.group(0))
    finally:
        exporter.send_signal(signal.SIGINT)
        assert exporter.wait(30) == 0
    assert samples["client_balance_group_up"] == [({"group": group}, 1)]
    assert samples["client_balance_group_live_members"] == [({"group": group}, 1)]
    assert per_partition(samples, "client_balance_group_lag_messages", topic=topic) == broker
    committed = per_partition(samples, "client_balance_group_committed_offset", topic=topic)
    assert committed == {
        p: committed_offset(kafka_bootstrap, group, topic, p) for p in range(PARTITIONS)
    }
    holders = {labels["consumer"] for labels, _ in samples["client_balance_group_partition_holder"]}
    assert holders == {consumer.consumer_id}


def test_the_examples_of_the_metrics_doc_run(kafka_bootstrap: str, tmp_path: Path) -> None:
    """docs/metrics.md's Python examples exit 0 and print what their comments say."""
    text = (REPO / "docs" / "metrics.md").read_text()
    examples = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    assert len(examples) == 2
    printed = []
    for number, example in enumerate(examples):
        topic = f"orders-{uuid.uuid4().hex[:8]}"
        create_topics(kafka_bootstrap, {topic: 1})
        produce(kafka_bootstrap, topic, 10, 1)
        (port,) = free_ports(1)
        code = example.replace("127.0.0.1:9092", kafka_bootstrap).replace('"orders"', f'"{topic}"')
        code = code.replace("9464", str(port)).replace('group_id="billing"', f'group_id="{topic}"')
        assert 'start_position="earliest"' in code  # the examples read what is there
        script = tmp_path / f"example{number}.py"
        script.write_text(code)
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=120,
            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        printed.append(done.stdout.strip())
    assert printed[0].startswith("['client_balance_messages_delivered_total{"), printed[0]
    assert printed[1] == "1"


def test_a_scrape_does_not_wait_for_a_client_held_by_a_stuck_commit(
    make_consumer: Callable[..., ClientBalanceConsumer],
    new_topic: Callable[..., str],
    kafka_bootstrap: str,
) -> None:
    """The lag's watermarks wait for the Kafka client briefly, then the last known ones serve."""
    topic = new_topic(partitions=PARTITIONS)
    produce(kafka_bootstrap, topic, 30, PARTITIONS)
    (port,) = free_ports(1)
    consumer = make_consumer(metrics_port=port)
    consumer.start([topic], source_count=1, node_id=0)
    url = f"http://127.0.0.1:{port}/metrics"
    assert consume_some(consumer, 10)["messages"] >= 10
    before = per_partition(scrape(url), "client_balance_lag_messages", topic=topic)
    assert set(before) == set(range(PARTITIONS))
    client_lock = consumer._run.fetcher._gate._lock  # type: ignore[union-attr]  # what a sync commit to an unreachable coordinator holds
    scraped, answers = threading.Event(), []
    with client_lock:  # released only after the scrape came back, or the test gave up

        def scrape_now() -> None:
            answers.append(scrape(url))
            scraped.set()

        threading.Thread(target=scrape_now, daemon=True).start()
        came_back = scraped.wait(20.0)
    assert came_back, "the scrape waited for the client lock"
    assert per_partition(answers[0], "client_balance_lag_messages", topic=topic) == before
    consumer.shutdown()
