"""Checks of a fault test's history: the workers' batch logs and what the group committed.

Each worker logs every batch it hands out and every confirm (``consumer_worker.batch_events``),
and every message it delivers. From those, after a fault:

- :func:`assert_nothing_behind_the_new_owner`: a member that lost its partitions (paused) handed
  out no batch and committed no position behind where their new owner had committed, from the
  fault on; :func:`assert_nothing_behind_the_new_owner_then` the same, against what the new
  owner had committed by the time of each (cut off: it acts until it fences);
- :func:`assert_committed_was_delivered`: every offset below the group's committed offset was
  delivered by someone, and nothing past the high watermark is committed;
- :func:`assert_only_owners_act`: replaying the status log for who held each partition when, no
  member handed out a batch or committed while another member's winning claim stood;
- :func:`assert_commits_never_go_back`: across all members, committed positions only grow.

The status log is replayed record by record, so a group whose history is checked writes to a
status topic of its own (:func:`audited_status_topic`) that the log cleaner leaves alone while
the test runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from client_balance import admin
from client_balance.membership import GroupState, MemberReport, parse_key, status_partition
from client_balance.membership._log import STATUS_TOPIC_CONFIG
from tests.integration.consumer_worker import timed_batch_events
from tests.integration.workers import Node

STATUS_TOPIC = "__client_balance_status"


def audited_status_topic(bootstrap: str, name: str | None = None) -> str:
    """A status topic as the SDK makes one, but with hour-long segments; its name.

    The SDK's segments roll every minute and the cleaner then drops every report but each
    member's last: a replay of the whole history (who held what when) needs them all, and
    workers that report every second fill a segment within a test. ``name``: a fresh one by
    default; one that exists already is left as it is.
    """
    name = name or f"status-audited-{uuid.uuid4().hex[:8]}"
    config = {**STATUS_TOPIC_CONFIG, "segment.ms": "3600000"}
    admin.create_topics(bootstrap, {name: 1}, config=config, exist_ok=True)
    return name


Event = tuple[str, int, int, int]
"""``(kind, partition, position, flag)`` of ``consumer_worker.batch_events``."""


def owner_commits(events: Iterable[Event]) -> dict[int, int]:
    """The furthest position each partition was committed at by a member's confirms."""
    furthest: dict[int, int] = {}
    for kind, partition, position, at_once in events:
        if kind == "confirmed" and at_once:
            furthest[partition] = max(furthest.get(partition, 0), position)
    return furthest


def assert_nothing_behind_the_new_owner(
    owner_events: Iterable[Event], events_since_fault: Iterable[Event]
) -> None:
    """No batch out, and no commit, behind the new owner's commits on the same partition.

    After the partitions are handed back the old member starts from the new owner's committed
    positions, so its legitimate batches and commits are never behind them.
    """
    owner_at = owner_commits(owner_events)
    for event in events_since_fault:
        _not_behind(event, owner_at.get(event[1], 0))


def assert_nothing_behind_the_new_owner_then(
    owner_events: Iterable[TimedEvent], events_since_fault: Iterable[TimedEvent]
) -> None:
    """As :func:`assert_nothing_behind_the_new_owner`, against the owner's commits made by then.

    For a member that kept acting after the fault while its lease still held (cut off, it
    hands out what it had buffered until it fences): a batch it handed out before the new
    owner committed anything of the partition is no fault, though the new owner commits past
    it later. The workers share the host's clock.
    """
    commits = sorted(
        (at_ms, partition, position)
        for kind, partition, position, at_once, at_ms in owner_events
        if kind == "confirmed" and at_once
    )
    for kind, partition, position, at_once, at_ms in events_since_fault:
        by_then = max(
            (done for when, number, done in commits if when <= at_ms and number == partition),
            default=0,
        )
        _not_behind((kind, partition, position, at_once), by_then)


def _not_behind(event: Event, owner_at: int) -> None:
    """``event`` hands out no batch, and commits nothing, behind the owner's ``owner_at``."""
    kind, partition, position, at_once = event
    behind = position < owner_at
    assert not (kind == "out" and behind), (
        f"a batch of partition {partition} at {position} was handed out behind its new "
        f"owner ({owner_at})"
    )
    assert not (kind == "confirmed" and at_once and behind), (
        f"partition {partition} was committed back to {position} under its new owner's {owner_at}"
    )


def assert_committed_was_delivered(
    committed: Mapping[int, int], delivered: set[tuple[int, int]], high: Mapping[int, int]
) -> None:
    """Every offset below each committed offset was delivered; none is past the high mark."""
    for partition, end in committed.items():
        assert end <= high[partition], f"partition {partition} committed past its end: {end}"
        missing = sorted({(partition, o) for o in range(end)} - delivered)
        assert not missing, f"committed over undelivered offsets: {missing[:5]}"


def status_log(
    bootstrap: str, group: str, status_topic: str = STATUS_TOPIC
) -> list[tuple[bytes | None, bytes | None, int, int]]:
    """Every record of ``group`` in the status topic: (key, value, offset, broker ms)."""
    partition = status_partition(group, 1)  # the default status_topic_partitions
    return [
        record
        for record in topic_records(bootstrap, status_topic, partition)
        if (parsed := parse_key(record[0])) is not None and parsed[1] == group
    ]


def topic_records(
    bootstrap: str, topic: str, number: int = 0
) -> list[tuple[bytes | None, bytes | None, int, int]]:
    """Every record of one partition as it is now (compacted or not): (key, value, offset, ms)."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "status-log"})
    partition = KafkaTopicPartition(topic, number, 0)
    # Up to the end as it is now: live members keep writing, so the log never stays at its end.
    _, end = reader.get_watermark_offsets(partition, timeout=10)
    reader.assign([partition])
    records: list[tuple[bytes | None, bytes | None, int, int]] = []
    try:
        while True:
            message = reader.poll(5)
            assert message is not None, "the status topic did not reach its end"
            offset = message.offset()
            assert message.error() is None, message.error()
            assert offset is not None
            records.append((message.key(), message.value(), offset, message.timestamp()[1]))
            if offset + 1 >= end:
                return records
    finally:
        reader.close()


TimedEvent = tuple[str, int, int, int, int]
"""An :data:`Event` with its wall-clock ms last (``consumer_worker.timed_batch_events``)."""
Record = tuple[bytes | None, bytes | None, int, int]
"""A status record: (key, value, offset, broker ms)."""

TOLERANCE_MS = 1_000
"""A worker stamps a line after the call it logs returned; the broker stamps on arrival."""


def owners_over_time(
    group: str, topic: str, log: list[Record]
) -> dict[int, list[tuple[int, str | None]]]:
    """Replay the status log: partition number -> [(broker ms, holder or None)], in order."""
    state = GroupState(group)
    owners: dict[int, list[tuple[int, str | None]]] = {}
    for key, value, offset, stamp in log:
        before = dict(state.holders)
        state.apply(key, value, offset, stamp)
        for partition in set(before) | set(state.holders):
            if partition.topic != topic:
                continue
            was, now = before.get(partition), state.holders.get(partition)
            if (was and was.consumer_id) != (now and now.consumer_id):
                owners.setdefault(partition.partition, []).append(
                    (stamp, now.consumer_id if now else None)
                )
    return owners


def members_by_pid(log: list[Record]) -> dict[int, str]:
    """Worker pid -> consumer id, from the member reports in the status log."""
    found = {}
    for key, value, _, _ in log:
        parsed = parse_key(key)
        if parsed is not None and parsed[0] == "member" and value is not None:
            found[MemberReport.decode(value).pid] = parsed[2]
    return found


def assert_only_owners_act(
    owners: dict[int, list[tuple[int, str | None]]],
    member_events: dict[str, list[TimedEvent]],
) -> None:
    """No member hands out a batch or commits while another member's winning claim stands.

    A line stamped more than :data:`TOLERANCE_MS` after another member won the partition
    (and before this member won it back) is a second live owner acting.
    """
    for member, events in member_events.items():
        for kind, partition, position, at_once, at_ms in events:
            if not (kind == "out" or (kind == "confirmed" and at_once)):
                continue
            history = owners.get(partition, [])
            current = [owner for stamp, owner in history if stamp <= at_ms - TOLERANCE_MS]
            holder = current[-1] if current else None
            recent = {owner for stamp, owner in history if at_ms - TOLERANCE_MS < stamp <= at_ms}
            assert holder in (member, None) or member in recent, (
                f"{member} acted on partition {partition} at {position} while {holder} held it"
            )


def assert_commits_never_go_back(member_events: dict[str, list[TimedEvent]]) -> None:
    """Across all members, each partition's committed position only grows over time."""
    commits: dict[int, list[tuple[int, int, str]]] = {}
    for member, events in member_events.items():
        for kind, partition, position, at_once, at_ms in events:
            if kind == "confirmed" and at_once:
                commits.setdefault(partition, []).append((at_ms, position, member))
    for partition, seen in commits.items():
        furthest = 0
        for _at_ms, position, member in sorted(seen):
            assert position >= furthest, (
                f"{member} committed partition {partition} back to {position} from {furthest}"
            )
            furthest = position


def assert_history_holds(
    bootstrap: str, group: str, topic: str, nodes: Iterable[Node], status_topic: str
) -> None:
    """Replay the status log and the workers' timed logs: only owners act, commits only grow.

    ``status_topic``: the group's, from :func:`audited_status_topic`.
    """
    log = status_log(bootstrap, group, status_topic)
    pids = members_by_pid(log)
    events = {pids[node.process.pid]: timed_batch_events(node.out) for node in nodes}
    assert_only_owners_act(owners_over_time(group, topic, log), events)
    assert_commits_never_go_back(events)
