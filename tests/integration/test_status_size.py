"""Status records larger than Kafka's default one-megabyte limit, against the real broker.

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
