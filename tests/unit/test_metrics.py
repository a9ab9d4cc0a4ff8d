"""The metrics' pure parts: librdkafka statistics, the recorders, settings and refusals."""

from __future__ import annotations

import argparse
import json
import threading
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from client_balance import ClientBalanceConsumer, ClientBalanceSettings, ConfigError
from client_balance._kafka import fetch_client
from client_balance._metrics import NO_METRICS, check_metrics, recorder_for
from client_balance._metrics._prometheus import PrometheusRecorder
from client_balance._metrics._stats import BrokerTrip, PartitionFetch, parse_statistics
from client_balance.broker._process import free_ports
from client_balance.cli import _exporter
from client_balance.cli import main as cli_main
from client_balance.keys import TopicPartition

SAMPLE = Path(__file__).parents[1] / "data" / "librdkafka_stats.json"
P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def settings(**values: object) -> ClientBalanceSettings:
    """Settings that reach no broker (nothing here connects)."""
    return ClientBalanceSettings(bootstrap_servers="127.0.0.1:1", group_id="g", **values)


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    """One sample's value, None if absent."""
    return registry.get_sample_value(name, labels)


def test_a_captured_statistics_document_gives_lag_fetches_and_round_trips() -> None:
    """The sample librdkafka wrote gives each fetched partition and the broker's round trip."""
    stats = parse_statistics(SAMPLE.read_text())
    assert stats.partitions == (
        PartitionFetch("stats-sample", 0, high_watermark=150, messages=150, bytes=7500,
                       queued_messages=0),
        PartitionFetch("stats-sample", 1, high_watermark=150, messages=150, bytes=7500,
                       queued_messages=0),
    )  # fmt: skip
    # The coordinator connection (node id -1) and the internal partition -1 are left out.
    assert stats.brokers == (BrokerTrip("127.0.0.1:52895/1", avg_s=0.105707, p99_s=0.113151),)


def test_unknown_lag_unfetched_partitions_and_idle_brokers_are_left_out() -> None:
    """hi_offset -1 is None; fetch_state none and rtt.cnt 0 leave no figure."""
    document = json.loads(SAMPLE.read_text())
    partitions = document["topics"]["stats-sample"]["partitions"]
    partitions["0"]["hi_offset"] = -1
    partitions["1"]["fetch_state"] = "none"
    for broker in document["brokers"].values():
        broker["rtt"]["cnt"] = 0
    stats = parse_statistics(json.dumps(document))
    assert [(p.partition, p.high_watermark) for p in stats.partitions] == [(0, None)]
    assert stats.brokers == ()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[]",
        '{"topics": {"t": {}}}',
        "{bad json",
        '{"topics": {"t": {"partitions": {"0": {"partition": 1e999}}}}}',
        '{"topics": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ],
)
def test_what_is_not_a_statistics_document_is_refused(text: str) -> None:
    """Anything but librdkafka's document raises ValueError (logged by the recorder)."""
    with pytest.raises(ValueError, match="not a librdkafka statistics document"):
        parse_statistics(text)


def test_without_metrics_the_recorder_is_the_no_op_one() -> None:
    """No registry and no port: NO_METRICS, which leaves a round function as it is."""
    recorder = recorder_for(settings(), "c", None)
    assert recorder is NO_METRICS
    assert not recorder.enabled

    def round_once(full: bool) -> None:
        """A round."""

    assert recorder.timed(round_once) is round_once
    recorder.delivered(P0, 10, 0)  # nothing happens, nothing raises
    recorder.statistics("not json")


def test_the_recorder_counts_per_batch_and_per_round() -> None:
    """Batches, messages, confirms, rollbacks, redeliveries, claims, fencing and rounds."""
    registry = CollectorRegistry()
    recorder = PrometheusRecorder(settings(), "c1", registry)
    recorder.delivered(P0, 40, 0)
    recorder.settled(P0, False, 0)  # rolled back to 0 ...
    recorder.delivered(P0, 40, 0)  # ... so this one is a redelivery
    recorder.settled(P0, True, 40)
    recorder.delivered(P1, 7, 100)
    recorder.set_aside(P1)
    recorder.claimed(2, 1)
    recorder.fenced()
    recorder.timed(lambda full: None)(True)
    with pytest.raises(RuntimeError):
        recorder.timed(_failing_round)(False)
    p0 = {"group": "g", "consumer": "c1", "topic": "orders", "partition": "0"}
    p1 = {**p0, "partition": "1"}
    member = {"group": "g", "consumer": "c1"}
    assert value(registry, "client_balance_messages_delivered_total", **p0) == 80
    assert value(registry, "client_balance_batches_delivered_total", **p0) == 2
    assert value(registry, "client_balance_batches_rolled_back_total", **p0) == 1
    assert value(registry, "client_balance_batches_redelivered_total", **p0) == 1
    assert value(registry, "client_balance_batches_confirmed_total", **p0) == 1
    assert value(registry, "client_balance_messages_delivered_total", **p1) == 7
    assert value(registry, "client_balance_batches_set_aside_total", **p1) == 1
    assert value(registry, "client_balance_claims_won_total", **member) == 2
    assert value(registry, "client_balance_claims_lost_total", **member) == 1
    assert value(registry, "client_balance_fencing_events_total", **member) == 1
    assert value(registry, "client_balance_reconcile_rounds_total", **member) == 2
    assert value(registry, "client_balance_reconcile_round_failures_total", **member) == 1
    assert value(registry, "client_balance_reconcile_round_duration_seconds_count", **member) == 2


def _failing_round(full: bool) -> None:
    raise RuntimeError("round failed")


def test_gauges_are_read_at_collection_and_vanish_with_the_recorder() -> None:
    """Held partitions, lag and librdkafka's figures per consumer; close() drops its series."""
    registry = CollectorRegistry()
    first = PrometheusRecorder(settings(), "c1", registry)
    second = PrometheusRecorder(settings(), "c2", registry)  # one registry, two consumers
    sampled = TopicPartition("stats-sample", 1)  # its fetch's high is 150 in the sample
    first.watch(lambda: [(P0, 5, 40), (P1, None, None), (sampled, 0, 50)])
    first.statistics(SAMPLE.read_text())
    first.delivered(P0, 1, 0)
    second.watch(list)
    c1 = {"group": "g", "consumer": "c1"}
    assert value(registry, "client_balance_held_partitions", **c1) == 3
    assert value(registry, "client_balance_held_partitions", group="g", consumer="c2") == 0
    assert value(registry, "client_balance_lag_messages", **c1, topic="orders", partition="0") == 5
    assert (
        value(registry, "client_balance_lag_messages", **c1, topic="orders", partition="1") is None
    )
    fetched = {**c1, "topic": "stats-sample", "partition": "1"}
    assert value(registry, "client_balance_fetch_consumer_lag_messages", **fetched) == 100
    unheld = {**fetched, "partition": "0"}  # fetched, but no commit of this member is known
    assert value(registry, "client_balance_fetch_consumer_lag_messages", **unheld) is None
    assert value(registry, "client_balance_fetch_messages_total", **fetched) == 150
    assert value(registry, "client_balance_fetch_bytes_total", **fetched) == 7500
    trip = {**c1, "broker": "127.0.0.1:52895/1"}
    assert value(registry, "client_balance_broker_round_trip_p99_seconds", **trip) == 0.113151
    first.close()
    text = generate_latest(registry).decode()
    assert 'consumer="c1"' not in text
    assert 'consumer="c2"' in text


def test_the_endpoint_serves_the_registry_and_stops_on_close() -> None:
    """metrics_port serves over HTTP on metrics_host; a busy port is refused by name."""
    (port,) = free_ports(1)
    recorder = recorder_for(settings(metrics_port=port), "c1", None)
    assert isinstance(recorder, PrometheusRecorder)
    try:
        recorder.delivered(P0, 3, 0)
        with pytest.raises(ConfigError, match=f"metrics_port={port}"):
            recorder_for(settings(metrics_port=port), "c2", None)
        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert b"client_balance_messages_delivered_total" in answer.read()
    finally:
        recorder.close()
    with pytest.raises(OSError):  # noqa: PT011 - any refusal: the port is closed
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)


def test_metrics_settings_and_refusals_name_the_value() -> None:
    """Defaults off; a bad port, a foreign registry and statistics nobody reads are refused."""
    plain = settings()
    assert (plain.statistics_interval_ms, plain.metrics_port, plain.metrics_host) == (
        0, None, "127.0.0.1",
    )  # fmt: skip
    with pytest.raises(ConfigError, match="metrics_port"):
        settings(metrics_port=70_000)
    with pytest.raises(ConfigError, match="statistics_interval_ms"):
        settings(statistics_interval_ms=-1)
    with pytest.raises(ConfigError, match="statistics_interval_ms=500 feeds the metrics"):
        check_metrics(settings(statistics_interval_ms=500), None)
    with pytest.raises(ConfigError, match="CollectorRegistry, not dict"):
        ClientBalanceConsumer(settings(), metrics_registry={})
    check_metrics(settings(statistics_interval_ms=500), CollectorRegistry())


def test_the_fetch_client_sends_statistics_only_to_a_sink() -> None:
    """A statistics sink with an interval makes librdkafka call the sink and a user's too."""
    seen: list[str] = []
    users: list[str] = []
    values = {"statistics_interval_ms": 50, "kafka": {"stats_cb": users.append}}
    client = fetch_client(settings(**values), lambda error: None, seen.append)
    try:
        for _ in range(40):
            client.poll(0.05)
            if seen:
                break
    finally:
        client.close()
    assert seen
    assert users == seen[: len(users)]


def test_the_exporter_serves_until_stopped_and_refuses_bad_ports() -> None:
    """serve_group serves its registry until the event is set; --port is checked."""
    assert cli_main(["exporter", "--group", "g", "--port", "70000"]) == 2
    stop = threading.Event()
    args = argparse.Namespace(
        group="g", host="127.0.0.1", port=0, timeout_s=1.0,
        bootstrap_servers="127.0.0.1:1", status_topic=None,
    )  # fmt: skip
    served = threading.Thread(target=_exporter.serve_group, args=(args, stop))
    served.start()
    stop.set()
    served.join(30)
    assert not served.is_alive()
