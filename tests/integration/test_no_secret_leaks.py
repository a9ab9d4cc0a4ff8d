"""A canary secret put in every setting path never appears in anything the SDK shows.

The scenario runs a member end to end with the canary in the ``kafka`` dict (passwords, a
client secret, a JAAS line), in ``status_secret`` and in ``CLIENT_BALANCE_KAFKA``, and collects
every text it can: reprs and dumps, errors (pickled too), log records at DEBUG, the CLI's
output, and the raw records of the status topic. None may contain the canary.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from client_balance import (
    ClientBalanceConsumer,
    ClientBalanceError,
    ClientBalanceSettings,
)
from client_balance.admin import GroupView
from tests.integration.workers import REPO, produce

pytestmark = pytest.mark.integration

CANARY = "canary-0c7a1f-Secret"
# On a PLAINTEXT listener librdkafka ignores the SASL properties, so they can carry the canary
# without changing the connection; the real SASL broker is in test_security.py.
KAFKA = {
    "sasl.password": CANARY,
    "sasl.oauthbearer.client.secret": CANARY,
    "ssl.key.password": CANARY,
    "sasl.oauthbearer.config": CANARY,
    "sasl.oauthbearer.assertion.private.key.passphrase": CANARY,
    "sasl.username": "worker",
}


def _status_records(bootstrap: str, topic: str) -> list[str]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "canary-reader"})
    try:
        meta = reader.list_topics(topic, timeout=10).topics[topic]
        texts = []
        for number in meta.partitions:
            tp = KafkaTopicPartition(topic, number)
            _, high = reader.get_watermark_offsets(tp, timeout=10)
            reader.assign([KafkaTopicPartition(topic, number, 0)])
            seen = 0
            while seen < high:
                message = reader.poll(5)
                if message is None:
                    break
                seen = (message.offset() or 0) + 1
                texts.append(repr(message.key()) + repr(message.value()) + repr(message.headers()))
        return texts
    finally:
        reader.close()


def test_a_canary_secret_appears_in_no_output(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reprs, dumps, errors, logs, CLI output and status records never hold the canary."""
    caplog.set_level(logging.DEBUG, logger="client_balance")
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 20, partitions=2)
    texts: list[str] = []
    settings = ClientBalanceSettings(
        bootstrap_servers=kafka_bootstrap,
        group_id=f"canary-{os.getpid()}",
        start_position="earliest",
        kafka=KAFKA,
        status_secret=CANARY,
        reconcile_interval_s=1.0,
    )
    texts += [repr(settings), str(settings), str(settings.model_dump()), settings.model_dump_json()]
    with ClientBalanceConsumer(settings) as consumer:
        consumer.start([topic], -1, 0, pinned=[f"{topic}:0", f"{topic}:1"])
        got = 0
        while got < 20:
            batch = consumer.get_message(timeout_s=30)
            got += len(batch.messages)
            texts.append(repr(consumer.confirm(batch.confirm_context)))
        texts += [repr(consumer.get_partition_meta()), repr(consumer.offset_infos())]
        starter = consumer._running().fetcher.starter  # what start() wired into it, kept there
        texts += [repr(starter.second_reader), repr(vars(starter))]
        texts.append(repr(GroupView.load(settings)))
        errors: list[BaseException] = []
        for bad in (
            lambda: consumer.get_message(float("nan")),
            lambda: consumer.connect("no:such:key:here"),
            lambda: consumer.confirm("garbage"),
            lambda: ClientBalanceSettings(**{**settings.model_dump(), "lease_timeout_s": 1}),
            lambda: ClientBalanceSettings(
                bootstrap_servers=kafka_bootstrap, group_id="g", kafka={**KAFKA, "bad.key": 1}
            ),
        ):
            with pytest.raises(ClientBalanceError) as failed:
                bad()
            errors.append(failed.value)
        texts += [str(error) for error in errors]
        texts += [str(pickle.loads(pickle.dumps(error))) for error in errors]
    texts += [record.getMessage() + repr(record.__dict__) for record in caplog.records]
    texts += _status_records(kafka_bootstrap, settings.status_topic)
    texts += _cli_outputs(kafka_bootstrap, settings.group_id)
    leaks = [text for text in texts if CANARY in text]
    assert leaks == []
    assert len(texts) > 30  # the scenario did produce output to search


def _cli_outputs(bootstrap: str, group: str) -> list[str]:
    env: dict[str, Any] = {
        **os.environ,
        "CLIENT_BALANCE_KAFKA": json.dumps({**KAFKA, "refused.key": "x"}),
    }
    outputs = []
    for argv in (
        ["status", "--group", group, "--bootstrap-servers", bootstrap],
        ["groups", "--bootstrap-servers", bootstrap],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "client_balance", *argv],
            check=False,
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        outputs += [done.stdout, done.stderr]
        assert done.returncode != 0  # the refused key stops it, with a message
        assert "refused.key" in done.stderr
    return outputs
