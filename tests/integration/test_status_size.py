"""Status records and commits larger than Kafka's one-megabyte limits, against the real broker.

A member's report lists every partition it holds with its offsets: about 100 bytes each with
realistic offsets, so a member of some ten thousand partitions writes a report past the
1,000,000 bytes librdkafka's producer allows a record and the 1 MB a topic takes by default.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported without __all__
    AdminClient,
    ConfigResource,
    ResourceType,
)

from client_balance import admin
from client_balance._kafka import commit_offsets, group_client, read_committed
from client_balance.keys import TopicPartition
from client_balance.membership import MemberReport, StatusWriter, ensure_status_topic, member_key
from client_balance.membership._report import HeldPartition

pytestmark = pytest.mark.integration


def _report(held: int) -> MemberReport:
    # Ten-digit offsets, each partition at its own, as on a topic written for a while.
    def positions(number: int) -> HeldPartition:
        high = 9_876_543_210 + number * 7_919
        return HeldPartition(high - number % 977, high - number % 1_009, high)

    return MemberReport(
        consumer_id=str(uuid.uuid4()), host="worker-1", pid=1, node_id=0, source_count=1,
        topics=("orders",), strategy="modulo", version="0", lease_timeout_s=30.0,
        held={f"orders:{number}": positions(number) for number in range(held)},
    )  # fmt: skip


def test_a_report_of_twenty_thousand_partitions_is_written(kafka_bootstrap: str) -> None:
    """A 1.7 MB report lands on a status topic the SDK created: compressed, under its limit.

    The writer sent reports uncompressed, and librdkafka refuses a record over its
    message.max.bytes (1,000,000) before sending it: the write failed with MSG_SIZE_TOO_LARGE,
    so such a member could never report and fenced itself once its lease ran out.
    """
    status_topic = f"status-size-{uuid.uuid4().hex[:8]}"
    ensure_status_topic(kafka_bootstrap, status_topic, kafka={}, timeout_s=30.0)
    report = _report(20_000)
    value = report.encode()
    assert len(value) > 1_700_000
    writer = StatusWriter(kafka_bootstrap, status_topic, 0, kafka={}, timeout_s=30.0)
    try:
        [(offset, _)] = writer.write([(member_key("g", report.consumer_id), value)])
    finally:
        writer.close()
    assert offset >= 0


def test_a_created_status_topic_takes_records_of_eight_megabytes(kafka_bootstrap: str) -> None:
    """The status topic is created with max.message.bytes 8 MiB, not the broker's 1 MB."""
    status_topic = f"status-size-{uuid.uuid4().hex[:8]}"
    ensure_status_topic(kafka_bootstrap, status_topic, kafka={}, timeout_s=30.0)
    client = AdminClient({"bootstrap.servers": kafka_bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, status_topic)
    entries = client.describe_configs([resource])[resource].result(timeout=30)
    assert entries["max.message.bytes"].value == str(8 * 1024 * 1024)


@pytest.mark.timeout(180)
def test_a_commit_of_more_than_a_megabyte_of_offsets_lands(kafka_bootstrap: str) -> None:
    """2,000 partitions of a 249-character topic for a 255-character group are committed.

    Kafka's group coordinator writes a commit's offset records as one batch and refuses one
    over 1 MB (``RecordTooLargeException`` in its log): the commit of all 2,000 (1.2 MB)
    failed, as would a member's commit of some 10,000 partitions of ordinary names. Commits
    now go out in runs of at most 512 KiB of records.
    """
    group = f"g-{uuid.uuid4().hex[:8]}-".ljust(255, "g")
    topic = f"commit-{uuid.uuid4().hex[:8]}-".ljust(249, "t")
    admin.create_topics(kafka_bootstrap, {topic: 2_000}, timeout_s=120.0)
    try:
        offsets = {TopicPartition(topic, number): 7 + number for number in range(2_000)}
        commit_offsets(kafka_bootstrap, group, offsets, timeout_s=60.0)
        reader = group_client(kafka_bootstrap, group)
        try:
            assert read_committed(reader, offsets, timeout_s=60.0) == offsets
        finally:
            reader.close()
    finally:
        client = AdminClient({"bootstrap.servers": kafka_bootstrap})
        client.delete_topics([topic])[topic].result(timeout=60)
