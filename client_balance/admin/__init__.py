"""Operator and setup calls against a Kafka cluster.

Readiness probes and topic creation, and the operator view of client-balanced groups:
``GroupView.load(settings, group)``, ``list_groups``, ``reset_offsets``, ``reap_dead_members``,
and the group offset
helpers ``partition_offsets`` and ``commit_offsets``. Every ``confluent_kafka`` error is turned
into :class:`~client_balance.errors.KafkaClientError`.
"""

from client_balance._kafka import (
    cluster_answers,
    commit_offsets,
    create_topics,
    group_members,
    partition_offsets,
    wait_for_group_coordinator,
)
from client_balance.admin._reap import reap_dead_members
from client_balance.admin._reset import reset_offsets
from client_balance.admin._view import GroupView, MemberView, PartitionView, list_groups

__all__ = [
    "GroupView",
    "MemberView",
    "PartitionView",
    "cluster_answers",
    "commit_offsets",
    "create_topics",
    "group_members",
    "list_groups",
    "partition_offsets",
    "reap_dead_members",
    "reset_offsets",
    "wait_for_group_coordinator",
]
