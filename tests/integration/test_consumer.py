"""ClientBalanceConsumer in one process against the session's real broker."""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

import client_balance.admin
import client_balance.consumer._reconcile
import client_balance.consumer._shelf
from client_balance import (
    AssignmentContext,
    ClientBalanceConsumer,
    ClientBalanceSettings,
    ConfigError,
    ConsumeResult,
    GroupInUseError,
    GroupMode,
    InvalidConfirmContextError,
    NoMessageError,
    NotStartedError,
    RedeliveryLimitError,
    TopicPartition,
)
from tests.integration.workers import collector_off, wait_until

pytestmark = pytest.mark.integration

Headers = list[tuple[str, str | bytes | None]]


def produce(
    bootstrap: str, topic: str, values: Sequence[bytes], headers: Sequence[Headers] | None = None
) -> None:
    """Write ``values`` to partition 0 of ``topic``, in order, each with its headers."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for index, value in enumerate(values):
        producer.produce(
            topic, value, partition=0, headers=headers[index] if headers is not None else None
        )
    assert producer.flush(30) == 0


def committed_offset(bootstrap: str, group: str, topic: str, partition: int = 0) -> int:
    """The group's committed offset (-1001 = none), asked without joining the group."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        answer = consumer.committed([KafkaTopicPartition(topic, partition)], timeout=10)
        return int(answer[0].offset)
    finally:
        consumer.close()


def wait_paused(consumer: ClientBalanceConsumer, topic: str) -> None:
    """Wait until the fetcher has paused partition 0 of ``topic`` (its buffer is full)."""
    assert consumer._run is not None
    fetcher = consumer._run.fetcher  # internal: a full buffer has no public sign
    deadline = time.monotonic() + 10
    while not fetcher._held[TopicPartition(topic, 0)].paused:
        assert time.monotonic() < deadline, f"partition {topic}:0 was never paused"
        time.sleep(0.01)


def values_of(result: ConsumeResult) -> list[bytes | None]:
    """The message values of a batch."""
    return [message.value() for message in result.messages]


def offsets_of(result: ConsumeResult) -> list[int | None]:
    """The message offsets of a batch."""
    return [message.offset() for message in result.messages]


def test_confirm_false_redelivers_the_same_batch(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """confirm(ctx, False) has the same messages delivered again, then consumption goes on."""
    # A buffer of two batches, so that partition 0 is paused before the rewind.
    monkeypatch.setattr(client_balance.consumer._shelf, "_BUFFER_FLOOR", 0)
    monkeypatch.setattr(client_balance.consumer._shelf, "_BUFFER_BATCHES", 2)
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, [f"v{i}".encode() for i in range(50)])
    consumer = make_consumer(batch_max_messages=10)
    consumer.start([topic], source_count=1, node_id=0)

    first = consumer.get_message(timeout_s=10)
    assert (first.start_offset, first.end_offset) == (0, 10)
    wait_paused(consumer, topic)  # the rewind must also undo librdkafka's pause
    rolled_back = consumer.confirm(first.confirm_context, consumed=False)
    assert (rolled_back.consumed, rolled_back.current) == (False, 0)
    for _ in range(2):
        again = consumer.get_message(timeout_s=10)
        assert (again.start_offset, again.end_offset) == (0, 10)
        assert offsets_of(again) == list(range(10))
        assert values_of(again) == values_of(first)
        assert again.confirm_context != first.confirm_context
        consumer.confirm(again.confirm_context, consumed=False)

    seen: list[bytes | None] = []
    while len(seen) < 50:
        batch = consumer.get_message(timeout_s=10)
        seen += values_of(batch)
        consumer.confirm(batch.confirm_context)
    assert seen == [f"v{i}".encode() for i in range(50)]
    assert committed_offset(kafka_bootstrap, consumer.settings.group_id, topic) == 50


def test_another_consumers_context_confirms_nothing_here(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """Two consumers on one partition (two groups): one's context is refused by the other, 400.

    Every consumer numbered its batches from 1, so A's first context confirmed B's first batch,
    whose messages B's application never processed, and B's group committed past them.
    """
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, [f"v{i}".encode() for i in range(30)])
    first, second = make_consumer(batch_max_messages=10), make_consumer(batch_max_messages=30)
    for consumer in (first, second):
        consumer.start([topic], source_count=0)
        consumer.connect(f"{topic}:0")
    theirs = first.get_message(timeout_s=10)
    mine = second.get_message(timeout_s=10)
    assert theirs.key == mine.key
    with pytest.raises(InvalidConfirmContextError, match="names no batch"):
        second.confirm(theirs.confirm_context)
    second.confirm(mine.confirm_context, consumed=False)
    assert committed_offset(kafka_bootstrap, second.settings.group_id, topic) in (-1001, 0)


def test_stale_and_malformed_confirm_contexts_are_refused(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A context confirmed already, rolled back, released, foreign or malformed raises 400."""
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, [f"v{i}".encode() for i in range(30)])
    consumer = make_consumer(batch_max_messages=10)
    consumer.start([topic], source_count=0)
    consumer.connect(f"{topic}:0")

    batch = consumer.get_message(timeout_s=10)
    consumer.confirm(batch.confirm_context)
    with pytest.raises(InvalidConfirmContextError, match="names no batch that is out") as twice:
        consumer.confirm(batch.confirm_context)
    assert twice.value.code == 400
    assert twice.value.context == batch.confirm_context

    rolled = consumer.get_message(timeout_s=10)
    consumer.confirm(rolled.confirm_context, consumed=False)
    redelivered = consumer.get_message(timeout_s=10)
    assert redelivered.start_offset == rolled.start_offset
    with pytest.raises(InvalidConfirmContextError):
        consumer.confirm(rolled.confirm_context)  # the token of the rolled-back delivery

    leader, _, _, token = redelivered.confirm_context.split(":")
    for foreign in (f"{leader}:{topic}:1:{token}", f"{leader}:other-topic:0:{token}"):
        with pytest.raises(InvalidConfirmContextError, match="names no batch"):
            consumer.confirm(foreign)
    malformed_contexts = [
        "", "garbage", f"{topic}:0:{token}", f"{leader}:{topic}:0:x",
        f"{leader}:{topic}:-1:{token}", f"x:{topic}:0:{token}", f"{leader}::0:1",
    ]  # fmt: skip
    for malformed in malformed_contexts:
        with pytest.raises(InvalidConfirmContextError, match="malformed"):
            consumer.confirm(malformed)
    with pytest.raises(InvalidConfirmContextError, match="malformed"):
        consumer.confirm(None)  # type: ignore[arg-type]

    # A batch still out when its partition is released is rolled back: its context is stale,
    # and the next holder gets its messages again.
    monkeypatch.setattr(client_balance.consumer._reconcile, "RELEASE_WAIT_S", 0.1)
    consumer.disconnect(f"{topic}:0")
    with pytest.raises(InvalidConfirmContextError, match="names no batch"):
        consumer.confirm(redelivered.confirm_context)
    consumer.connect(f"{topic}:0")
    after = consumer.get_message(timeout_s=10)
    assert offsets_of(after) == offsets_of(redelivered)
    consumer.confirm(after.confirm_context)


def test_connect_starts_at_bootstrap_offset_and_commits_it(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """connect(key, N) starts at offset N and commits N at once; a held partition is kept."""
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, [f"v{i}".encode() for i in range(100)])
    consumer = make_consumer(batch_max_messages=10)
    consumer.start([topic], source_count=0)  # manual: only what is connected is held
    assert consumer.registered_partitions() == set()

    consumer.connect(f"{topic}:0", 40)
    assert consumer.registered_partitions() == {f"1:{topic}:0"}
    group = consumer.settings.group_id
    assert committed_offset(kafka_bootstrap, group, topic) == 40  # before any confirm
    consumer.connect(f"1:{topic}:0", 70)  # held already: the offset is ignored
    batch = consumer.get_message(timeout_s=10)
    assert (batch.key, batch.start_offset) == (f"1:{topic}:0", 40)
    assert offsets_of(batch) == list(range(40, 50))
    assert values_of(batch)[0] == b"v40"
    consumer.confirm(batch.confirm_context)
    assert consumer.offset_infos()[f"1:{topic}:0"].current == 50

    # -1 resumes from the committed offset.
    consumer.disconnect(f"{topic}:0")
    assert consumer.registered_partitions() == set()
    consumer.connect(f"{topic}:0")
    resumed = consumer.get_message(timeout_s=10)
    assert resumed.start_offset == 50
    consumer.confirm(resumed.confirm_context)


def test_out_of_range_bootstrap_offsets_are_clamped(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """A bootstrap offset below the low watermark starts at it; one past the end starts at it."""
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, [f"v{i}".encode() for i in range(100)])
    admin_client = AdminClient({"bootstrap.servers": kafka_bootstrap})
    deleted = admin_client.delete_records([KafkaTopicPartition(topic, 0, 20)])
    for future in deleted.values():
        future.result(timeout=30)
    consumer = make_consumer(batch_max_messages=10)
    consumer.start([topic], source_count=0)
    key = f"{topic}:0"
    group = consumer.settings.group_id

    consumer.connect(key, 5)
    assert committed_offset(kafka_bootstrap, group, topic) == 20
    batch = consumer.get_message(timeout_s=10)
    assert batch.start_offset == 20
    assert offsets_of(batch)[0] == 20
    consumer.confirm(batch.confirm_context, consumed=False)
    consumer.disconnect(key)

    consumer.connect(key, 10**9)
    info = consumer.offset_infos()[f"1:{topic}:0"]
    assert (info.current, info.committed) == (100, 100)
    assert committed_offset(kafka_bootstrap, group, topic) == 100
    with pytest.raises(NoMessageError) as nothing:
        consumer.get_message(timeout_s=0.5)
    assert nothing.value.code == NoMessageError.ALL_WAITING
    produce(kafka_bootstrap, topic, [b"late"])
    late = consumer.get_message(timeout_s=10)
    assert (offsets_of(late), values_of(late)) == ([100], [b"late"])
    consumer.confirm(late.confirm_context)


def test_filters_deliver_matching_types_and_advance_committed_offset(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """Only messages whose type header is in the filter set arrive; the rest still commit."""
    topic = new_topic(partitions=1)
    kinds = ["created", "updated", None, "created", "deleted"] * 20 + ["updated"] * 15
    headers: list[Headers] = [[("type", kind.encode())] if kind else [] for kind in kinds]
    headers[3] = [("other", b"x"), ("type", b"created")]  # not the first header
    produce(kafka_bootstrap, topic, [f"v{i}".encode() for i in range(len(kinds))], headers)
    consumer = make_consumer(batch_max_messages=10, commit="interval", commit_interval_s=60.0)
    consumer.start({topic: {"created"}}, source_count=1, node_id=0)
    assert consumer.is_filter_consume(topic)
    assert not consumer.is_filter_consume("other-topic")

    delivered: list[Any] = []
    empty_batches = 0
    position = 0
    while position < len(kinds):
        batch = consumer.get_message(timeout_s=10)
        delivered += batch.messages
        empty_batches += not batch.messages
        position = consumer.confirm(batch.confirm_context).current
    assert position == len(kinds)
    assert [m.offset() for m in delivered] == [i for i, k in enumerate(kinds) if k == "created"]
    assert all(dict(m.headers())["type"] == b"created" for m in delivered)
    assert empty_batches >= 1  # the tail of 15 "updated" messages comes as empty batches
    consumer.commit()
    assert committed_offset(kafka_bootstrap, consumer.settings.group_id, topic) == len(kinds)


def test_interval_commits_are_flushed_on_shutdown(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With commit="interval", confirmed positions are committed at the latest on shutdown."""
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, [f"v{i}".encode() for i in range(25)])
    consumer = make_consumer(batch_max_messages=10, commit="interval", commit_interval_s=60.0)
    consumer.start([topic], source_count=1, node_id=0)
    batch = consumer.get_message(timeout_s=10)
    result = consumer.confirm(batch.confirm_context)
    assert (result.current, result.committed) == (10, False)
    group = consumer.settings.group_id
    assert committed_offset(kafka_bootstrap, group, topic) < 10
    consumer.get_message(timeout_s=10)  # out, unconfirmed: rolled back at shutdown
    monkeypatch.setattr(client_balance.consumer._reconcile, "RELEASE_WAIT_S", 0.1)
    consumer.shutdown()
    assert committed_offset(kafka_bootstrap, group, topic) == 10


def test_group_used_by_subscribe_raises_group_in_use(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """start() refuses a group id that a subscribe() consumer has joined."""
    topic = new_topic(partitions=1)
    group = f"cb-subscribed-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    subscriber = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
    try:
        subscriber.subscribe([topic])
        deadline = time.monotonic() + 30
        while not subscriber.assignment():
            assert time.monotonic() < deadline, "the subscriber never joined its group"
            subscriber.poll(0.1)
        consumer = make_consumer(group_id=group)
        with pytest.raises(GroupInUseError, match="subscribe") as caught:
            consumer.start([topic], source_count=1, node_id=0)
        assert caught.value.group_id == group
        assert consumer.is_shutdown()
    finally:
        subscriber.close()


def test_started_consumer_lifecycle_and_properties(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """A started node reports its place and share; after shutdown every call raises 420."""
    topic = new_topic(partitions=3)
    consumer = make_consumer()
    consumer.start([topic], source_count=3, node_id=2)
    assert (consumer.source_count, consumer.node_id) == (3, 2)
    assert not consumer.is_shutdown()
    meta = consumer.get_partition_meta()
    assert sorted(meta) == [f"1:{topic}:{p}" for p in range(3)]
    assert all(m.subscribable and m.leader == 1 for m in meta.values())
    assert consumer.is_partitions_ready(10.0)
    assert len(consumer.registered_partitions()) == 1  # one partition per node of three

    consumer.shutdown()
    consumer.shutdown()
    assert consumer.is_shutdown()
    calls: list[Callable[[], object]] = [
        lambda: consumer.get_message(0.1), consumer.registered_partitions,
        lambda: consumer.confirm(f"1:{topic}:0:1"), lambda: consumer.connect(f"{topic}:0"),
    ]  # fmt: skip
    for call in calls:
        with pytest.raises(NotStartedError) as caught:
            call()
        assert caught.value.code == 420
    with pytest.raises(NotStartedError):
        consumer.start([topic], source_count=3, node_id=2)
    assert list(consumer.batches()) == []

    unplaced = make_consumer()
    unplaced.start([topic], source_count=0, node_id=9)
    assert (unplaced.source_count, unplaced.node_id) == (-2, -2)
    assert unplaced.registered_partitions() == set()


def test_tubemq_style_start_leaves_the_assignment_to_the_application(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """start(topics, -1, 0), as TubeMQ's example calls it, registers only what is connected."""
    topic = new_topic(partitions=3)
    consumer = make_consumer()
    consumer.start([topic], source_count=-1, node_id=0)
    assert consumer.mode is GroupMode.MANUAL
    assert consumer.reconcile_now(30.0)
    assert consumer.registered_partitions() == set()
    consumer.connect(f"{topic}:1")
    assert consumer.reconcile_now(30.0)
    assert consumer.registered_partitions() == {f"1:{topic}:1"}


def test_manual_mode_with_a_callback_holds_the_callbacks_answer(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    kafka_settings: Callable[..., ClientBalanceSettings],
) -> None:
    """With an assigner, a manual member holds what the callback returns and sees its mode."""
    topic = new_topic(partitions=4)
    contexts: list[AssignmentContext] = []

    def assigner(context: AssignmentContext) -> list[str]:
        contexts.append(context)
        return sorted(key for key, m in context.partitions.items() if m.partition % 2 == 0)

    with ClientBalanceConsumer(kafka_settings(), assigner=assigner) as consumer:
        consumer.start([topic], source_count=-1, node_id=0)
        assert consumer.reconcile_now(30.0)
        assert consumer.registered_partitions() == {f"1:{topic}:0", f"1:{topic}:2"}
    assert contexts[0].mode == "manual"
    assert (contexts[0].source_count, contexts[0].node_id) == (-1, 0)


def test_a_resolved_start_is_committed_when_the_partition_is_registered(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """A -1 start resolved to "latest" is committed at once, so a crash cannot skip later data.

    Before the fix the position was committed only by the interval flush: a member killed
    within ``commit_interval_s`` left nothing committed, and its successor resolved "latest"
    again, later, skipping everything written in between.
    """
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, [b"before"] * 100)
    consumer = make_consumer(start_position="latest", commit="interval", commit_interval_s=3600.0)
    consumer.start([topic], source_count=-1, node_id=0)
    consumer.connect(f"{topic}:0")
    assert committed_offset(kafka_bootstrap, consumer.settings.group_id, topic) == 100


def test_start_during_shutdown_is_refused(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """start() while shutdown() waits for a batch raises 420 instead of leaking a new fetcher."""
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, [b"x"] * 10)
    fetch_threads_before = _fetch_threads()
    consumer = make_consumer()
    consumer.start([topic], source_count=1, node_id=0)
    batch = consumer.get_message(timeout_s=30)  # out and unconfirmed: shutdown() waits for it
    stopping = threading.Thread(target=consumer.shutdown)
    stopping.start()
    try:
        wait_until(consumer.is_shutdown, 10, "shutdown() to begin")
        with pytest.raises(NotStartedError, match="shut down"):
            consumer.start([topic], source_count=1, node_id=0)
        consumer.confirm(batch.confirm_context)  # lets shutdown() finish at once
    finally:
        stopping.join(30)
    assert not stopping.is_alive()
    assert consumer.is_shutdown()
    assert _fetch_threads() == fetch_threads_before  # no second fetcher left running


def _fetch_threads() -> int:
    return sum(t.name == "client-balance-fetch" and t.is_alive() for t in threading.enumerate())


def test_a_stopped_consumer_holds_no_kafka_client(
    new_topic: Callable[..., str], make_consumer: Callable[..., ClientBalanceConsumer]
) -> None:
    """After shutdown() none of its librdkafka threads is left, though the object is kept.

    Before the first fix the status writer was flushed, not closed, and the stopped consumer
    kept all it had built: the writer's and the admin client's seven librdkafka threads, and
    their connections reconnecting to the brokers, for as long as the application held the
    object. Before the second, the admin client (it has no close()) lived on in the member's
    reference cycles until the collector's next full collection: the collector is off here.
    """
    topic = new_topic(partitions=2)
    gc.collect()
    before = _kafka_threads()
    consumer = make_consumer()  # the fixture keeps it too, as an application would
    consumer.start([topic], source_count=1, node_id=0)
    assert _kafka_threads() > before
    with collector_off():
        consumer.shutdown()
        wait_until(lambda: _kafka_threads() <= before, 10.0, "the stopped consumer's clients gone")


def test_a_start_that_fails_leaves_no_kafka_client_behind(
    new_topic: Callable[..., str], make_consumer: Callable[..., ClientBalanceConsumer]
) -> None:
    """A refused start() closes what it made: no librdkafka thread outlives the call.

    Before the fix the admin client stayed, with its threads and connection, held by the
    frames of the error's traceback until the collector's next full collection.
    """
    not_compacted = new_topic(partitions=1)
    gc.collect()
    before = _kafka_threads()
    consumer = make_consumer(status_topic=not_compacted)
    with collector_off():
        with pytest.raises(ConfigError, match="it must be compacted") as refused:
            consumer.start([not_compacted], source_count=1, node_id=0)
        wait_until(lambda: _kafka_threads() <= before, 10.0, "the failed start's clients gone")
        assert refused.value.__traceback__ is not None  # the error and its frames are kept


def _kafka_threads() -> int:
    """The threads of librdkafka in this process (named ``rdk:...``)."""
    count = 0
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            count += (task / "comm").read_text().startswith("rdk:")
    return count


def test_retention_past_the_position_skips_only_what_was_removed(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Records deleted past a lagging position: delivery resumes at the new log start.

    Before the fix librdkafka's auto.offset.reset ("latest" by default) jumped to the high
    watermark, so messages that still existed were never delivered and then committed over.
    """
    monkeypatch.setattr(client_balance.consumer._shelf, "_BUFFER_FLOOR", 0)
    monkeypatch.setattr(client_balance.consumer._shelf, "_BUFFER_BATCHES", 2)
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, [f"v{i}".encode() for i in range(2_000)])
    consumer = make_consumer(
        batch_max_messages=10,
        start_position="latest",
        kafka={"fetch.message.max.bytes": 1024, "queued.max.messages.kbytes": 1},
    )
    consumer.start([topic], source_count=0)
    consumer.connect(f"{topic}:0", bootstrap_offset=0)
    first = consumer.get_message(timeout_s=10)
    consumer.confirm(first.confirm_context)
    wait_paused(consumer, topic)  # the position lags far behind the end now
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.delete_records([KafkaTopicPartition(topic, 0, 1_500)]).values():
        future.result(timeout=30)

    delivered: set[int] = set()
    with caplog.at_level(logging.WARNING, logger="client_balance"):
        while 1_999 not in delivered:
            batch = consumer.get_message(timeout_s=10)
            delivered.update(offset for offset in offsets_of(batch) if offset is not None)
            consumer.confirm(batch.confirm_context)
    assert set(range(1_500, 2_000)) <= delivered  # everything that still exists
    consumer.commit()
    assert committed_offset(kafka_bootstrap, consumer.settings.group_id, topic) == 2_000
    removed = [r for r in caplog.records if r.getMessage().startswith("retention removed")]
    assert removed, "the skipped range must be reported"
    info = consumer.offset_infos()[f"1:{topic}:0"]
    assert 0 < info.lost_to_retention <= 1_500 - 10


def test_a_topic_deleted_and_created_again_is_read_from_its_start(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    kafka_settings: Callable[..., ClientBalanceSettings],
) -> None:
    """A recreated topic (a new topic id) starts at its log start, under start_position=latest.

    Before the fix its partitions kept their first-seen time from the old topic, the group's
    offsets had gone with the old topic, and "latest" skipped what the new one already held.
    """
    topic = new_topic(partitions=1)
    wanted = {"on": True}

    def assigner(context: AssignmentContext) -> list[str]:
        return [f"{topic}:0"] if wanted["on"] else []

    settings = kafka_settings(start_position="latest", commit="sync")
    with ClientBalanceConsumer(settings, assigner=assigner) as consumer:
        consumer.start([topic], source_count=-1, node_id=0)
        assert consumer.reconcile_now(30.0)
        produce(kafka_bootstrap, topic, [b"old"] * 3)
        old: list[int | None] = []
        while len(old) < 3:
            batch = consumer.get_message(timeout_s=30)
            old += offsets_of(batch)
            consumer.confirm(batch.confirm_context)
        assert old == [0, 1, 2]

        wanted["on"] = False
        assert consumer.reconcile_now(30.0)
        assert consumer.registered_partitions() == set()
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        for future in admin.delete_topics([topic]).values():
            future.result(timeout=30)
        wait_until(lambda: topic not in admin.list_topics(timeout=10).topics, 30, "deletion")
        client_balance.admin.create_topics(kafka_bootstrap, {topic: 1}, exist_ok=True)
        produce(kafka_bootstrap, topic, [f"new{i}".encode() for i in range(7)])

        wanted["on"] = True
        assert consumer.reconcile_now(30.0)
        delivered: list[bytes | None] = []
        while len(set(delivered)) < 7:
            batch = consumer.get_message(timeout_s=30)
            delivered += values_of(batch)
            consumer.confirm(batch.confirm_context)
        assert set(delivered) == {f"new{i}".encode() for i in range(7)}


def _rolled_back_batch(consumer: ClientBalanceConsumer, times: int) -> ConsumeResult:
    """Roll the first batch back ``times`` times; the batch as it came the last time."""
    batch = consumer.get_message(timeout_s=30)
    for _ in range(times - 1):
        consumer.confirm(batch.confirm_context, consumed=False)
        batch = consumer.get_message(timeout_s=30)
    return batch


def test_past_max_redeliveries_the_raise_policy_raises_and_still_redelivers(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """The rollback that goes over the limit raises RedeliveryLimitError naming where; no skip."""
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, [f"v{i}".encode() for i in range(30)])
    consumer = make_consumer(batch_max_messages=10, max_redeliveries=2)
    consumer.start([topic], source_count=1, node_id=0)
    batch = _rolled_back_batch(consumer, 3)
    with pytest.raises(RedeliveryLimitError) as limit:
        consumer.confirm(batch.confirm_context, consumed=False)
    assert (limit.value.key, limit.value.offset, limit.value.rollbacks) == (f"1:{topic}:0", 0, 3)
    again = consumer.get_message(timeout_s=30)
    assert again.start_offset == 0  # rolled back all the same: the application decides


def test_past_max_redeliveries_the_skip_policy_moves_on(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A batch rolled back past max_redeliveries is skipped, logged and committed past."""
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, [f"v{i}".encode() for i in range(30)])
    consumer = make_consumer(batch_max_messages=10, max_redeliveries=1, redelivery_policy="skip")
    consumer.start([topic], source_count=1, node_id=0)
    batch = _rolled_back_batch(consumer, 2)
    consumer.confirm(batch.confirm_context, consumed=False)
    with caplog.at_level(logging.WARNING, logger="client_balance"):
        following = consumer.get_message(timeout_s=30)
    assert following.start_offset == batch.end_offset
    assert any(r.getMessage() == "batch skipped after too many rollbacks" for r in caplog.records)
    consumer.confirm(following.confirm_context)
    assert committed_offset(kafka_bootstrap, consumer.settings.group_id, topic) == 20


def test_the_skip_policy_skips_only_what_was_rolled_back(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """A one-message batch rolled back twice comes again with 20 more: those 20 are delivered.

    The skip went by the start offset alone and confirmed the whole batch as it came again,
    so the 20 messages that had arrived meanwhile were committed without being handed out.
    """
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, [b"poison"])
    consumer = make_consumer(batch_max_messages=100, max_redeliveries=1, redelivery_policy="skip")
    consumer.start([topic], source_count=1, node_id=0)
    batch = _rolled_back_batch(consumer, 2)
    assert values_of(batch) == [b"poison"]
    good = [f"good{i}".encode() for i in range(20)]
    produce(kafka_bootstrap, topic, good)
    wait_until(lambda: consumer.offset_infos()[f"1:{topic}:0"].high == 21, 30, "the 20 arrive")
    consumer.confirm(batch.confirm_context, consumed=False)  # the second rollback: over the limit
    delivered: list[bytes | None] = []
    while len(delivered) < len(good):
        following = consumer.get_message(timeout_s=30)
        assert following.start_offset >= 1
        delivered += values_of(following)
        consumer.confirm(following.confirm_context)
    assert delivered == good
    consumer.commit()
    assert committed_offset(kafka_bootstrap, consumer.settings.group_id, topic) == 21


def test_a_rollback_racing_a_disconnect_settles_without_a_kafka_error(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """confirm(consumed=False) whose rewind comes after disconnect() released the partition.

    The rewind unassigned a partition no longer assigned, and librdkafka's "Can't subtract
    from empty assignment" came out of confirm() as a raw KafkaException.
    """
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, [f"v{i}".encode() for i in range(30)])
    consumer = make_consumer(batch_max_messages=10)
    consumer.start([topic], source_count=0)
    key = f"{topic}:0"
    consumer.connect(key)
    batch = consumer.get_message(timeout_s=30)
    assert consumer._run is not None
    gate = consumer._run.fetcher._gate  # internal: the only way to order the two threads
    call, rolling_back = gate.call, threading.current_thread()
    disconnecting = threading.Thread(target=consumer.disconnect, args=(key,))

    def late_call(action: Callable[[], Any]) -> Any:
        if threading.current_thread() is rolling_back:
            gate.call = call  # type: ignore[method-assign]
            disconnecting.join(30)
        return call(action)

    gate.call = late_call  # type: ignore[method-assign]
    disconnecting.start()
    time.sleep(0.2)  # disconnect() now waits for the batch out
    result = consumer.confirm(batch.confirm_context, consumed=False)
    assert (result.consumed, result.current) == (False, 0)
    assert not disconnecting.is_alive()
    assert consumer.offset_infos() == {}


def test_past_max_redeliveries_the_dead_letter_policy_produces_the_batch(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """The batch goes to dead_letter_topic with headers naming its origin, then it is skipped."""
    topic, dead_letters = new_topic(partitions=1), new_topic(partitions=1)
    produce(kafka_bootstrap, topic, [f"v{i}".encode() for i in range(30)])
    consumer = make_consumer(
        batch_max_messages=10, max_redeliveries=0, redelivery_policy="dead-letter",
        dead_letter_topic=dead_letters,
    )  # fmt: skip
    consumer.start([topic], source_count=1, node_id=0)
    batch = consumer.get_message(timeout_s=30)
    consumer.confirm(batch.confirm_context, consumed=False)
    following = consumer.get_message(timeout_s=30)
    assert following.start_offset == batch.end_offset
    reader = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "dlq-reader"})
    try:
        reader.assign([KafkaTopicPartition(dead_letters, 0, 0)])
        moved: list[Any] = []

        def read_dead_letters() -> bool:
            moved.extend(reader.consume(10, 0.5))
            return len(moved) >= len(batch.messages)

        wait_until(read_dead_letters, 30, "the dead letters")
    finally:
        reader.close()
    assert [m.value() for m in moved] == values_of(batch)
    headers = dict(moved[0].headers() or [])
    assert headers["client_balance.topic"] == topic.encode()
    assert headers["client_balance.offset"] == b"0"


def test_partition_meta_has_watermarks_and_holders_of_every_configured_partition(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """get_partition_meta() gives each partition's low and high watermark and its live holder."""
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, [f"v{i}".encode() for i in range(20)])  # partition 0
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.delete_records([KafkaTopicPartition(topic, 0, 5)]).values():
        future.result(timeout=30)
    consumer = make_consumer()
    consumer.start([topic], source_count=-1, node_id=0)
    consumer.connect(f"{topic}:1")
    meta = consumer.get_partition_meta()
    first, second = meta[f"1:{topic}:0"], meta[f"1:{topic}:1"]
    assert (first.low, first.high, first.holder) == (5, 20, None)
    assert (second.low, second.high, second.holder) == (0, 0, consumer.consumer_id)


def test_polling_with_no_wait_gets_what_is_there(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_consumer: Callable[..., ClientBalanceConsumer],
) -> None:
    """get_message(0) in a loop hands out the messages: it fetches what librdkafka has queued.

    It never fetched, and kept the fetch thread out, so a polling application got nothing ever.
    """
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, [f"v{i}".encode() for i in range(100)])
    consumer = make_consumer(batch_max_messages=10)
    consumer.start([topic], source_count=0)
    consumer.connect(f"{topic}:0", 0)
    seen: list[int | None] = []
    for _ in range(3_000):  # 30 s at most of polling every 10 ms
        try:
            batch = consumer.get_message(timeout_s=0)
        except NoMessageError:
            time.sleep(0.01)  # the application's other work
            continue
        seen += offsets_of(batch)
        consumer.confirm(batch.confirm_context)
        if len(seen) == 100:
            break
    assert seen == list(range(100))
