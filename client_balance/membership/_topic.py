"""The status topic itself: its settings, a group's partition in it, and making sure it is fit.

``_log`` reads it and ``_writer`` writes it; a member whose topic was deleted under it makes it
again here, with the same settings as at its start (``_renewal``).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping

from client_balance._kafka import AdminClient, ensure_topic
from client_balance.errors import ConfigError
from client_balance.settings import KafkaValue

__all__ = ["STATUS_TOPIC_CONFIG", "ensure_status_topic", "status_partition"]

STATUS_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "message.timestamp.type": "LogAppendTime",
    # Dead members' last records are all compaction keeps; clean often enough that a long
    # run does not replay much on start.
    "min.cleanable.dirty.ratio": "0.1",
    # Every start replays the group's partition, and the active segment is never cleaned:
    # each member's report every report_interval_s stays there until it rolls. A group of
    # 100 reports 6,000 times in 10 minutes, which a start took 0.1-0.2 s to replay; rolled
    # each minute and cleaned (within the cleaner's 15 s back-off), 300-900 records stay.
    "segment.ms": "60000",
    # Tombstones of members that left, and of their claims, stay this long after cleaning
    # (Kafka's default is a day). A reader replays in milliseconds; only a replay longer than
    # this could miss a withdrawal.
    "delete.retention.ms": "3600000",
    # A member's report lists every partition it holds: compressed, about 20 bytes each, so
    # Kafka's 1 MB default would fence a member of some 35,000 partitions; 8 MiB, 280,000.
    "max.message.bytes": str(8 * 1024 * 1024),
    # A replica out of sync made leader cuts records off the log: claims and their
    # withdrawals among them. Kafka's default already, but a cluster may turn it on.
    "unclean.leader.election.enable": "false",
}
"""The settings of a status topic the SDK creates (docs/operations.md, "The status topic")."""


def status_partition(group: str, partitions: int) -> int:
    """The status partition of ``group`` among ``partitions`` (``status_topic_partitions``).

    Taken from the setting, never from the topic's current count: adding partitions to the
    status topic must not move a running group to another partition, where its new members
    would not see its old ones.
    """
    return zlib.crc32(group.encode()) % partitions


def ensure_status_topic(
    bootstrap_servers: str,
    topic: str,
    *,
    kafka: Mapping[str, KafkaValue],
    timeout_s: float,
    allow_single_replica: bool = False,
    partitions: int = 1,
    admin: AdminClient | None = None,
    on_created: Callable[[], None] = lambda: None,
    create: bool = True,
) -> int:
    """Create the status topic if missing; check its settings; return its partition count.

    Without ``create`` (an operator's read, which must change nothing) a missing topic is 0.

    Created with ``min(3, brokers)`` replicas (``min.insync.replicas=2`` with 3). Raises
    :class:`ConfigError` when it exists but is not compacted or does not stamp log-append time
    (claims would be lost to retention, or judged by each host's clock), or has a single
    replica on a cluster of several brokers (one broker's loss would fence every group) unless
    ``allow_single_replica``. ``admin``: a client to ask through (else a new one).
    """
    state = ensure_topic(
        bootstrap_servers, topic, config=STATUS_TOPIC_CONFIG, kafka=kafka, timeout_s=timeout_s,
        partitions=partitions, admin=admin, create=create,
    )  # fmt: skip
    if not state.partitions:
        return 0
    if state.partitions < partitions:
        raise ConfigError(
            f"status topic {topic!r} has {state.partitions} partitions, fewer than "
            f"status_topic_partitions={partitions}; add partitions to it or lower the setting "
            "(every member of a group must use the same value)"
        )
    single = state.replication_factor == 1 and state.brokers > 1
    if single and not allow_single_replica:
        raise ConfigError(
            f"status topic {topic!r} has replication factor {state.replication_factor} on a "
            f"cluster of {state.brokers} brokers: losing one broker would fence every group. "
            "Recreate it with more replicas (the SDK creates it with min(3, brokers)), use "
            "another status_topic, or set status_topic_single_replica_ok=True to accept it"
        )
    policy = state.config.get("cleanup.policy", "delete")
    stamp = state.config.get("message.timestamp.type", "")
    if policy.replace(" ", "") != "compact":
        raise ConfigError(
            f"status topic {topic!r} has cleanup.policy={policy}; it must be compacted "
            "(cleanup.policy=compact), or claims and reports are deleted by retention. Fix it "
            "with kafka-configs.sh, or set status_topic to another name"
        )
    if state.config.get("unclean.leader.election.enable", "false") == "true":
        raise ConfigError(
            f"status topic {topic!r} has unclean.leader.election.enable=true: a leader out of "
            "sync would cut claims and their withdrawals off the log. Set it to false with "
            "kafka-configs.sh, or set status_topic to another name"
        )
    if stamp != "LogAppendTime":
        raise ConfigError(
            f"status topic {topic!r} has message.timestamp.type={stamp}; it must be "
            "LogAppendTime so that leases run on the broker's clock, not each host's. Fix it "
            "with kafka-configs.sh, or set status_topic to another name"
        )
    if state.created:
        on_created()
    return state.partitions
