"""Reading a group's records from the status topic once, and the time to judge them at.

Members judge every lease by the broker's log-append time, never by a host's clock. The
read-only view may use this host's clock (``status``: it decides nothing), but what acts on a
verdict of death (``reap``, ``reset-offsets``) takes the broker's time: a host clock a minute
fast would otherwise reap a live member's claims, or reset a live group's offsets.
"""

from __future__ import annotations

import time

from client_balance.errors import ConfigError, KafkaClientError
from client_balance.membership import (
    GroupState,
    StatusReader,
    StatusWriter,
    ensure_status_topic,
    status_partition,
    status_secret,
)
from client_balance.settings import ClientBalanceSettings

__all__ = ["CLOCK_PROBE_KEY", "broker_now_ms", "read_group", "read_group_at"]

CLOCK_PROBE_KEY = b'["clock-probe"]'
"""The key of the record whose broker time is "now". No member reads it as a record of its
group (``parse_key`` names no kind ``clock-probe``), and it is a tombstone: compaction keeps at
most one per partition, and drops that one ``delete.retention.ms`` after cleaning."""


def broker_now_ms(settings: ClientBalanceSettings, partition: int, timeout_s: float) -> int:
    """The broker's time now: the log-append time of a probe written to ``partition``.

    Unsigned even with ``status_secret``: a signed reader rejects it without counting it as a
    record of its group (its key names none), and so keeps no signature state for it.
    """
    writer = StatusWriter(
        settings.bootstrap_servers, settings.status_topic, partition,
        kafka=settings.admin_config(), timeout_s=timeout_s,
    )  # fmt: skip
    try:
        [(_, stamp)] = writer.write([(CLOCK_PROBE_KEY, None)])
    except KafkaClientError as error:
        raise KafkaClientError(
            f"could not take the broker's time from the status topic "
            f"{settings.status_topic!r} (partition {partition}): {error}. Judging members dead "
            "needs the broker's clock, which members judge by, not this host's: allow this "
            "client to write the status topic",
            kafka_code=error.kafka_code,
            kafka_name=error.kafka_name,
            retriable=error.retriable,
        ) from error
    finally:
        writer.close()
    return stamp


def read_group(
    settings: ClientBalanceSettings, group: str, timeout_s: float
) -> tuple[GroupState, int]:
    """The group's state read from the status topic once, and its status partition.

    The partition is ``crc32(group) % settings.status_topic_partitions``, unless the topic has
    more partitions and the group's records are on another ``crc32(group) % n``: members with
    another setting put them there. Records on several of them raise :class:`ConfigError`,
    unless the setting was given and names one of them.
    """
    state, partition, _ = read_group_at(settings, group, timeout_s, broker_clock=False)
    return state, partition


def read_group_at(
    settings: ClientBalanceSettings, group: str, timeout_s: float, *, broker_clock: bool,
    must_exist: bool = False,
) -> tuple[GroupState, int, int]:  # fmt: skip
    """:func:`read_group`, and the time (ms) to judge its leases at.

    With ``broker_clock`` the broker's time of a probe written before the read's end, so that
    every record written before it counts; else the later of the newest record's time and this
    host's clock (a group whose members all died must not look alive forever).

    A status topic that does not exist is never made here: it is a group with nobody, or with
    ``must_exist`` (a reset, which acts on "nobody is live") a :class:`ConfigError`,
    since a mistyped name would let them act on a live group.
    """
    kafka = settings.admin_config()
    count = ensure_status_topic(
        settings.bootstrap_servers, settings.status_topic, kafka=kafka, timeout_s=timeout_s,
        allow_single_replica=True,  # an operator must see a group whatever its topic is like
        partitions=settings.status_topic_partitions,
        create=False,  # a view decides nothing: a mistyped name must not make a topic
    )  # fmt: skip
    if not count and must_exist:
        raise ConfigError(
            f"status topic {settings.status_topic!r} does not exist on the cluster: no member "
            "has started with it, so nothing can be judged live or dead; check its name "
            "(status_topic, --status-topic)"
        )
    if not count:  # no member ever started with it: the group has nobody
        return GroupState(group), 0, int(time.time() * 1000)
    secret = status_secret(settings)  # with it, the view shows what the members decide by
    readers: dict[int, StatusReader] = {}
    try:
        for candidate in _candidates(settings, group, count):
            readers[candidate] = StatusReader(
                settings.bootstrap_servers, settings.status_topic, candidate, group,
                kafka=kafka, timeout_s=timeout_s, follow=False, secret=secret,
            )  # fmt: skip
            readers[candidate].read_to_end(timeout_s)
        states = {partition: reader.state for partition, reader in readers.items()}
        partition = _group_partition(settings, group, count, states)
        reader = readers[partition]
        if not broker_clock:
            return reader.state, partition, max(reader.state.last_ms, int(time.time() * 1000))
        now_ms = broker_now_ms(settings, partition, timeout_s)
        reader.read_to_end(timeout_s)  # up to the probe: a report just before it counts
    finally:
        for each in readers.values():
            each.close()
    return reader.state, partition, max(reader.state.last_ms, now_ms)


def _candidates(settings: ClientBalanceSettings, group: str, count: int) -> list[int]:
    """The partitions ``group`` may be on: the setting's first, then ``crc32 % n`` for n <= count.

    The setting's default (1) is rarely the members' on a topic of several partitions, and a
    view of the wrong partition shows a live group as having no members at all.
    """
    chosen = status_partition(group, settings.status_topic_partitions)
    if count <= settings.status_topic_partitions:
        return [chosen]
    others = {status_partition(group, n) for n in range(1, count + 1)} - {chosen}
    return [chosen, *sorted(others)]


def _group_partition(
    settings: ClientBalanceSettings, group: str, count: int, states: dict[int, GroupState]
) -> int:
    """The partition holding ``group``'s records, or the setting's when none or it was given."""
    chosen = status_partition(group, settings.status_topic_partitions)
    found = [p for p, state in states.items() if state.members or state.holders]
    if len(found) == 1:
        return found[0]
    if not found or (
        chosen in found and "status_topic_partitions" in settings.model_fields_set
    ):  # named: e.g. to reap what members left behind before the setting changed
        return chosen
    raise ConfigError(
        f"group {group!r} has records in partitions {found} of the status topic "
        f"{settings.status_topic!r} ({count} partitions): its members used different "
        "status_topic_partitions. Give the one to act on (status_topic_partitions, "
        "--status-topic-partitions N: the group's partition is crc32(group) % N)"
    )
