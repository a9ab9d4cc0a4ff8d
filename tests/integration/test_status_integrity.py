"""The status topic against a real broker: poison records break nothing, forged ones change nothing.

Records are written by a raw Producer, as any client allowed to write the topic could: without
the group's ``status_secret`` it cannot sign them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from client_balance import (
    ClientBalanceConsumer,
    ClientBalanceSettings,
    GroupConflictError,
    NoMessageError,
    PartitionOccupiedError,
    admin,
)
from client_balance.keys import TopicPartition
from client_balance.membership import (
    MemberReport,
    StatusWriter,
    claim_key,
    member_key,
    parse_key,
    status_partition,
)
from tests.integration.workers import produce, wait_until

pytestmark = pytest.mark.integration

STATUS_TOPIC = "__client_balance_status"
SECRET = "a-group-secret-of-more-than-16-characters"  # noqa: S105 - a test value

Headers = list[tuple[str, str | bytes | None]] | None
RawRecord = tuple[bytes, bytes | None, Headers]


def write_raw(bootstrap: str, group: str, records: list[RawRecord]) -> None:
    """Write records to the group's status partition as a client without the secret would."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value, headers in records:
        producer.produce(
            STATUS_TOPIC, value, key, partition=status_partition(group, 1), headers=headers
        )
    assert producer.flush(10) == 0


def signed_records(bootstrap: str, group: str) -> list[RawRecord]:
    """The group's status records as they are in the log, headers and all (for replays)."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "integrity-log"})
    partition = KafkaTopicPartition(STATUS_TOPIC, status_partition(group, 1), 0)
    _, end = reader.get_watermark_offsets(partition, timeout=10)
    reader.assign([partition])
    found: list[RawRecord] = []
    try:
        while True:
            message = reader.poll(5)
            assert message is not None, "the status topic did not reach its end"
            assert message.error() is None, message.error()
            key = message.key()
            parsed = parse_key(key)  # the topic also holds other groups' and operators' records
            if key is not None and parsed is not None and parsed[1] == group:
                headers = message.headers()
                pairs = list(headers.items()) if isinstance(headers, dict) else headers
                found.append((key, message.value(), pairs))
            if (message.offset() or 0) + 1 >= end:
                return found
    finally:
        reader.close()


def report(consumer_id: str, topic: str, **fields: Any) -> dict[str, Any]:
    """A well-formed report as JSON data, with ``fields`` changed."""
    data: dict[str, Any] = json.loads(
        MemberReport(
            consumer_id=consumer_id, host="elsewhere", pid=1, node_id=0, source_count=2,
            topics=(topic,), strategy="modulo", version="forged", lease_timeout_s=6.0,
            join_offset=0,
        ).encode()
    )  # fmt: skip
    return {**data, **fields}


def raw(data: dict[str, Any]) -> bytes:
    """JSON bytes of a record value."""
    return json.dumps(data).encode()


def drain(
    consumers: list[ClientBalanceConsumer], count: int, timeout_s: float
) -> set[tuple[object, ...]]:
    """Take batches from every consumer in turn until ``count`` distinct messages came."""
    seen: set[tuple[object, ...]] = set()
    deadline = time.monotonic() + timeout_s
    while len(seen) < count:
        assert time.monotonic() < deadline, f"only {len(seen)} of {count} messages consumed"
        for consumer in consumers:
            try:
                batch = consumer.get_message(timeout_s=0.2)
            except NoMessageError:
                continue
            seen.update((m.topic(), m.partition(), m.offset()) for m in batch.messages)
            consumer.confirm(batch.confirm_context)
    return seen


def test_poison_records_leave_every_member_running_and_consuming(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """Malformed reports and claims are skipped: members go on reading the group and consuming.

    Before the fix a report whose lease was "x" made the next claim's check raise in every
    member's status reader, which then stopped: no member saw a join or a leave again.
    """
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, 20, partitions=2)
    first, second = make_member(), make_member()
    for member in (first, second):
        member.start([topic], mode="elastic")
    group = first.settings.group_id
    wait_until(lambda: all(len(m.registered_partitions()) == 1 for m in (first, second)), 15,
               "each member holds one partition")  # fmt: skip
    elsewhere = TopicPartition("elsewhere", 0)
    write_raw(kafka_bootstrap, group, [
        (member_key(group, "poison"), raw(report("poison", topic, lease_timeout_s="x")), None),
        (claim_key(group, elsewhere, "poison"), b"{}", None),
        (claim_key(group, elsewhere, "poison-2"), b"{}", None),  # judged by poison's lease
        (member_key(group, "null-lease"), raw(report("null-lease", topic, lease_timeout_s=None)),
         None),
        (member_key(group, "text-count"), raw(report("text-count", topic, source_count="2")),
         None),
        (member_key(group, "bad-held"), raw(report("bad-held", topic, held={"x": []})), None),
        (member_key(group, first.consumer_id), b"not json", None),
        (claim_key(group, TopicPartition(topic, 0), "bad-claim"), b"[]", None),
    ])  # fmt: skip
    # A member that starts now replays the poison; a member that leaves must be noticed.
    third = make_member()
    third.start([topic], mode="elastic")
    second.shutdown()
    running = [first, third]
    wait_until(
        lambda: (
            set().union(*(m.registered_partitions() for m in running))
            == {f"1:{topic}:0", f"1:{topic}:1"}
        ),
        20,
        "the remaining members hold both partitions",
        0.2,
    )
    assert len(drain(running, 20, 15)) == 20
    view = admin.GroupView.load(first.settings)
    assert {m.consumer_id for m in view.live_members} == {first.consumer_id, third.consumer_id}
    assert view.skipped_records >= 6  # the malformed ones of the group, counted


def test_with_a_secret_forged_reports_claims_and_tombstones_change_nothing(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """Unsigned tombstones, claims and reports (an earlier node id: 430) are ignored by all."""
    topic = new_topic(partitions=2)
    first, second = make_member(status_secret=SECRET), make_member(status_secret=SECRET)
    first.start([topic], source_count=2, node_id=0)
    second.start([topic], source_count=2, node_id=1)
    for member in (first, second):
        assert member.is_partitions_ready(10)
    group = first.settings.group_id
    held = {m.consumer_id: m.registered_partitions() for m in (first, second)}
    before = admin.GroupView.load(first.settings)
    taken = TopicPartition(topic, 0)
    holder = next(p.holder for p in before.partitions if p.partition == 0)
    assert holder is not None
    fake_signature: Headers = [("cb-sig", b"v1.0123456789abcdef.99." + b"0" * 64)]
    forged: list[RawRecord] = [
        (member_key(group, first.consumer_id), None, None),  # "it left"
        (claim_key(group, taken, holder), None, None),  # "it let go"
        (claim_key(group, taken, holder), None, fake_signature),
        # An earlier member with node id 0 and a lease of ten minutes: 430 for the first.
        (member_key(group, "forger"), raw(report("forger", topic, lease_timeout_s=600.0)), None),
        (claim_key(group, taken, "forger"), b"{}", None),
        (member_key(group, second.consumer_id),
         raw(report(second.consumer_id, topic, node_id=0, fenced=True)), None),
    ]  # fmt: skip
    write_raw(kafka_bootstrap, group, forged)
    time.sleep(3 * first.settings.report_interval_s)  # rounds and reports after the forgeries
    # A member stopped by a conflict (430) would raise here.
    assert {m.consumer_id: m.registered_partitions() for m in (first, second)} == held
    after = admin.GroupView.load(first.settings)
    assert {m.consumer_id for m in after.live_members} == set(held)
    assert [(p.partition, p.holder) for p in after.partitions] == [
        (p.partition, p.holder) for p in before.partitions
    ]
    assert not any(m.fenced for m in after.members)
    assert after.skipped_records >= len(forged)


def test_with_a_secret_a_signed_withdrawal_copied_back_withdraws_nothing(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_member: Callable[..., ClientBalanceConsumer],
) -> None:
    """A replay of a member's old signed claim tombstone leaves its new claim standing (410)."""
    topic = new_topic(partitions=1)
    holder = make_member(status_secret=SECRET)
    other = make_member(status_secret=SECRET)
    for member in (holder, other):
        member.start([topic], source_count=0)
    group = holder.settings.group_id
    key = claim_key(group, TopicPartition(topic, 0), holder.consumer_id)
    holder.connect(f"{topic}:0")
    holder.disconnect(f"{topic}:0")
    holder.connect(f"{topic}:0")
    withdrawals = [
        r for r in signed_records(kafka_bootstrap, group) if r[0] == key and r[1] is None
    ]
    assert len(withdrawals) == 1
    assert withdrawals[0][2]  # signed: it has the header
    write_raw(kafka_bootstrap, group, withdrawals)
    time.sleep(1.0)  # the other member reads it within milliseconds
    with pytest.raises(PartitionOccupiedError):
        other.connect(f"{topic}:0")
    view = admin.GroupView.load(holder.settings)
    assert [p.holder for p in view.partitions] == [holder.consumer_id]
    assert view.skipped_records == 1  # the replay


def test_a_member_without_the_secret_refuses_to_join_a_group_that_signs(
    new_topic: Callable[..., str], make_member: Callable[..., ClientBalanceConsumer]
) -> None:
    """The signed members would not see it: start() raises GroupConflictError naming them."""
    topic = new_topic(partitions=1)
    signed = make_member(status_secret=SECRET)
    signed.start([topic], source_count=0)
    unsigned = make_member()
    with pytest.raises(GroupConflictError, match="same status_secret"):
        unsigned.start([topic], source_count=0)
    view = admin.GroupView.load(signed.settings)
    assert [m.consumer_id for m in view.live_members] == [signed.consumer_id]


def test_with_a_secret_the_reaper_signs_its_tombstones(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    kafka_settings: Callable[..., ClientBalanceSettings],
) -> None:
    """reap_dead_members with the group's secret removes a signed dead member for every reader."""
    topic = new_topic(partitions=1)
    settings = kafka_settings(status_secret=SECRET)
    group = settings.group_id
    writer = StatusWriter(
        kafka_bootstrap, STATUS_TOPIC, status_partition(group, 1), kafka={}, timeout_s=10,
        secret=SECRET.encode(),
    )  # fmt: skip
    ghost = raw(report("ghost", topic, lease_timeout_s=1.0))
    writer.write([(member_key(group, "ghost"), ghost),
                  (claim_key(group, TopicPartition(topic, 0), "ghost"), b"{}")])  # fmt: skip
    writer.close()
    time.sleep(1.5)  # past the ghost's lease
    assert [m.consumer_id for m in admin.GroupView.load(settings).members] == ["ghost"]
    assert admin.reap_dead_members(settings, older_than_s=0) == ["ghost"]
    view = admin.GroupView.load(settings)
    assert view.members == ()
    assert view.skipped_records == 0
